// `memra bench`: end-to-end engine speed through the Engine API. Prefill (pp P: P tokens / time to
// the first token), decode (tg N: (N - 1) / the time after the first token, after a prompt of
// each -d depth, or after each -p prompt), and aggregate figures of -c concurrent sequences. Every
// figure is the median, min and max of R runs after an untimed warm-up of the same shape; on a GPU
// each is also a percentage of the ceilings (copy bandwidth, bf16 matrix rate) measured in the
// same run (docs/PERFORMANCE.md says how). On the CPU it also reports tokens per CPU-second of the
// process times the thread count: the speed the same work would reach with its cores to itself.
// --compare BASELINES.json adds a peer engine's figures and the speed targets beside ours, after a
// run or, with --receipts, from receipts already written (bench_compare.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "bench_compare.h"
#include "cli_args.h"
#include "commands.h"
#include "core/dtype.h"
#include "core/error.h"
#include "engine/backend_select.h"
#include "memra/engine.h"

namespace memra::cli {
namespace {

using bench::BenchOptions;

constexpr const char* kUsage =
    "usage: memra bench [-m SOURCE] [-p 512[,2048]] [-n 128] [-d 0[,4096,...]] [-c 1[,8,...]]\n"
    "                   [-r 3] [--threads N] [--device DEV] [--cuda-graphs on|off]\n"
    "                   [--deterministic on|off] [--kv-dtype TYPE]\n"
    "                   [--json FILE] [--compare BASELINES.json]\n"
    "       memra bench --compare BASELINES.json --receipts R.json [R.json ...] [--json FILE]\n"
    "  -m, --model SOURCE   model (default: the packaged Gemma 3 270M Q4_K_M)\n"
    "  -p LIST              prefill figures of these prompt sizes (default 512; none when only\n"
    "                       -d or -c is given); the first is each sequence's prompt under -c\n"
    "  -n N                 generated tokens per sequence (default 128)\n"
    "  -d LIST              decode after a prompt of each depth (untimed prefill); without -d,\n"
    "                       decode is measured after each -p prompt\n"
    "  -c LIST              aggregate prefill and decode of this many concurrent sequences\n"
    "  -r N                 timed runs per figure, at least 3 (default 3)\n"
    "  --threads N          CPU threads (default: all cores)\n"
    "  --device DEV         auto | cpu | cuda | cuda:N (default: $MEMRA_DEVICE or auto)\n"
    "  --cuda-graphs on|off replay decode steps as CUDA graphs (default: $MEMRA_CUDA_GRAPHS or\n"
    "                       on)\n"
    "  --deterministic on|off  off: faster GPU prefill that breaks the determinism contract\n"
    "                       (default: $MEMRA_DETERMINISTIC or on)\n"
    "  --kv-dtype TYPE      KV cache type: F16 (the CUDA default), BF16, F32, F8_E4M3 (alias\n"
    "                       fp8; on the CPU F32 or F8_E4M3) (default: $MEMRA_KV_DTYPE or the\n"
    "                       backend's)\n"
    "  --json FILE          write a receipt (commit, GPU, command, model, ceilings, figures);\n"
    "                       with --receipts, the comparison\n"
    "  --compare FILE       after the table, each figure beside the peer's baseline and the\n"
    "                       target from FILE (bench/baselines/*.json), also in the receipt\n"
    "  --receipts R...      with --compare: the comparison of these bench receipts, nothing run\n";

constexpr int kCeilingRuns = 20;
constexpr int32_t kKvBlockSize = 16;
constexpr int64_t kMaxTokensAtOnce = int64_t{1} << 24;

// "512,2048" -> {512, 2048}, each in [lo, hi], none twice.
std::vector<int32_t> parse_list(const std::string& flag, const std::string& text, int32_t lo,
                                int32_t hi) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    const int32_t v = parse_int(flag, item, lo, hi);
    if (std::find(out.begin(), out.end(), v) != out.end())
      fail(ErrorCode::invalid_argument, "{} lists {} twice", flag, v);
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The command as typed, arguments with shell-special characters single-quoted.
std::string command_line(const Args& args) {
  std::string out = "memra bench";
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                                         "OPQRSTUVWXYZ0123456789-_.,:/=+@") == std::string::npos;
    out += ' ';
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// Flags that shape a run: refused with --receipts, which runs nothing.
bool is_run_flag(const std::string& a) {
  for (const char* f : {"-m", "--model", "-p", "-n", "-d", "-c", "-r", "--threads", "--device",
                        "--cuda-graphs", "--deterministic", "--kv-dtype"})
    if (a == f) return true;
  return false;
}

// --receipts R1 [R2 ...]: the arguments after args[i] up to the next flag; advances i.
std::vector<std::string> receipt_list(const Args& args, size_t& i) {
  std::vector<std::string> out;
  while (i + 1 < args.size() && !args[i + 1].starts_with("-")) out.push_back(args[++i]);
  if (out.empty()) fail(ErrorCode::invalid_argument, "--receipts needs at least one receipt file");
  return out;
}

// --compare / --receipts: what goes with what, refused by flag.
void check_compare_flags(const BenchOptions& o, const std::string& run_flag) {
  if (o.receipts.empty()) return;
  if (o.compare_path.empty())
    fail(ErrorCode::invalid_argument,
         "--receipts needs --compare BASELINES.json (it compares receipts with baselines)");
  if (!run_flag.empty())
    fail(ErrorCode::invalid_argument,
         "{} cannot be given with --receipts: the comparison reads receipts and runs nothing",
         run_flag);
}

BenchOptions parse_options(const Args& args) {
  BenchOptions o;
  bool prompts_given = false;
  std::string run_flag;  // the first flag given that shapes a run
  o.command = command_line(args);
  if (const char* env = std::getenv("MEMRA_DEVICE")) o.device = env;
  if (const char* env = std::getenv("MEMRA_CUDA_GRAPHS"))
    o.cuda_graphs = parse_on_off("MEMRA_CUDA_GRAPHS", env);
  if (const char* env = std::getenv("MEMRA_DETERMINISTIC"))
    o.deterministic = parse_on_off("MEMRA_DETERMINISTIC", env);
  if (const char* env = std::getenv("MEMRA_KV_DTYPE")) o.kv_dtype = env;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (run_flag.empty() && is_run_flag(a)) run_flag = a;
    if (a == "-m" || a == "--model") {
      o.model = value();
    } else if (a == "-p") {
      o.prompts = parse_list(a, value(), 1, 1 << 20);
      prompts_given = true;
    } else if (a == "-n") {
      o.n_gen = parse_int(a, value(), 2, 1 << 20);
    } else if (a == "-d") {
      o.depths = parse_list(a, value(), 0, 1 << 24);
    } else if (a == "-c") {
      o.concurrency = parse_list(a, value(), 1, 4096);
    } else if (a == "-r") {
      o.runs = parse_int(a, value(), 3, 1000);
    } else if (a == "--threads") {
      o.threads = parse_int(a, value(), 0, 4096);
    } else if (a == "--device") {
      o.device = value();
    } else if (a == "--cuda-graphs") {
      o.cuda_graphs = parse_on_off(a, value());
    } else if (a == "--deterministic") {
      o.deterministic = parse_on_off(a, value());
    } else if (a == "--kv-dtype") {
      o.kv_dtype = value();
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "--compare") {
      o.compare_path = value();
    } else if (a == "--receipts") {
      const std::vector<std::string> more = receipt_list(args, i);
      o.receipts.insert(o.receipts.end(), more.begin(), more.end());
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      fail(ErrorCode::invalid_argument, "unknown argument '{}'\n{}", a, kUsage);
    }
  }
  o.prefill = prompts_given || (o.depths.empty() && o.concurrency.empty());
  // A misspelt type is refused before minutes of ceilings; whether the backend keeps it is the
  // engine's check (the CPU refuses all but F32 and F8_E4M3 by name).
  if (!o.kv_dtype.empty() && !kv_dtype_from_name(o.kv_dtype))
    fail(ErrorCode::invalid_argument,
         "--kv-dtype {} is not a KV cache type (F16, BF16, F32, F8_E4M3 or fp8)", o.kv_dtype);
  check_compare_flags(o, run_flag);
  return o;
}

// Refuses, by flag, a workload the model's context or the engine cannot hold.
void check_fits(const BenchOptions& o, int32_t trained_context) {
  auto need = [&](const char* flag, int64_t tokens, int32_t value) {
    if (tokens + o.n_gen > trained_context)
      fail(ErrorCode::invalid_argument,
           "{} {} with -n {} needs {} tokens of context; the model's context length is {}", flag,
           value, o.n_gen, tokens + o.n_gen, trained_context);
  };
  if (o.prefill)
    for (int32_t p : o.prompts) need("-p", p, p);
  if (!o.concurrency.empty()) need("-p", o.prompts[0], o.prompts[0]);
  for (int32_t d : o.depths) need("-d", std::max(d, 1), d);
  for (int32_t c : o.concurrency)
    if (int64_t{c} * (o.prompts[0] + o.n_gen) > kMaxTokensAtOnce)
      fail(ErrorCode::invalid_argument,
           "-c {} sequences of -p {} + -n {} tokens exceed {} tokens of KV cache at once", c,
           o.prompts[0], o.n_gen, kMaxTokensAtOnce);
}

// Context, sequences, step budget and KV blocks for the largest figure asked for, prefix cache
// off so every run prefills in full.
EngineOptions engine_options(const BenchOptions& o) {
  EngineOptions eo;
  eo.model = o.model;
  eo.n_threads = o.threads;
  eo.device = o.device;
  eo.cuda_graphs = o.cuda_graphs;
  eo.deterministic = o.deterministic;
  eo.kv_dtype = o.kv_dtype;
  eo.prefix_cache = false;
  eo.kv_block_size = kKvBlockSize;
  // The longest single-sequence prompt or depth, and the prompt under -c (1 where unused).
  const int32_t p_max = o.prefill ? *std::ranges::max_element(o.prompts) : 1;
  const int32_t d_max = o.depths.empty() ? 1 : std::max(1, *std::ranges::max_element(o.depths));
  const int32_t c_max = o.concurrency.empty() ? 1 : *std::ranges::max_element(o.concurrency);
  const int32_t p0 = o.concurrency.empty() ? 1 : o.prompts[0];
  eo.context_length = std::max({p_max, d_max, p0}) + o.n_gen;
  eo.max_sequences = c_max;
  eo.max_queued = std::max(eo.max_queued, c_max);
  // Each -p prompt, and all -c prompts together, prefill in one step; a deep context (untimed)
  // in steps of at most 16,384 tokens.
  eo.max_batch_tokens = std::max({p_max, c_max * p0, std::min(d_max, 16384)});
  const auto blocks = [](int64_t tokens) { return (tokens + kKvBlockSize - 1) / kKvBlockSize; };
  const int64_t kv_blocks = std::max(blocks(eo.context_length), c_max * blocks(p0 + o.n_gen));
  eo.kv_blocks = static_cast<int32_t>(kv_blocks);
  return eo;
}

std::optional<bench::Ceilings> measure_ceilings(int ordinal) {
  if (ordinal < 0) return std::nullopt;
  std::fprintf(stderr, "memra bench: measuring the ceilings of GPU %d (copy, bf16 GEMM)\n",
               ordinal);
  const GpuCeilings g = backend_gpu_ceilings(ordinal, kCeilingRuns);
  return bench::Ceilings{g.name, g.driver_version, g.runtime_version, g.copy_tb_s, g.bf16_tflops};
}

// Prints what the percentages are taken of, before the table.
void print_basis(const bench::ModelCost& cost, const std::optional<bench::Ceilings>& c,
                 uint64_t kv_bytes_per_token, const std::string& kv_dtype) {
  std::printf(
      "model: %s, %.4g parameters (%.4g in matrix products per token), %.4g GB of "
      "weights, %.4g GB read per decoded token, KV %llu bytes per token of context (%s)\n",
      cost.file_type.c_str(), double(cost.parameters), double(cost.matmul_parameters),
      cost.weight_bytes * 1e-9, cost.bytes_per_token * 1e-9,
      static_cast<unsigned long long>(kv_bytes_per_token), kv_dtype.c_str());
  if (cost.n_expert > 0)
    std::printf(
        "experts: %d of %d per token; %.4g GB of expert weights, of which a token reads "
        "%.4g GB\n",
        cost.n_expert_used, cost.n_expert, cost.expert_bytes * 1e-9,
        cost.expert_bytes * cost.expert_share(1.0) * 1e-9);
  if (!c) {
    std::printf("ceilings: n/a on the CPU\n");
    return;
  }
  const bench::Spread copy = bench::spread(c->copy_tb_s), mm = bench::spread(c->bf16_tflops);
  std::printf(
      "ceilings (%s, driver %d, runtime %d, median of %zu): copy %.3f TB/s (%.3f-%.3f), "
      "bf16 GEMM 8192^3 %.1f TFLOP/s (%.1f-%.1f)\n",
      c->gpu_name.c_str(), c->driver_version, c->runtime_version, c->copy_tb_s.size(), copy.median,
      copy.min, copy.max, mm.median, mm.min, mm.max);
}

// {"compare_baselines": ..., "compare": rows}: what a receipt carries of a comparison.
nlohmann::ordered_json compare_receipt_part(const bench::Baselines& b,
                                            const std::vector<bench::CompareRow>& rows) {
  return {{"compare_baselines", bench::baselines_json(b)}, {"compare", bench::compare_json(rows)}};
}

// --compare with --receipts: the table of every receipt's figures, then the entries none of them
// measured; --json writes it as a receipt of its own.
int compare_receipts(const BenchOptions& o) {
  if (!o.json_path.empty() && !std::ofstream(o.json_path, std::ios::app))
    fail(ErrorCode::invalid_argument, "--json {}: cannot be written", o.json_path);
  const bench::Baselines b = bench::baselines_load(o.compare_path);
  std::vector<bench::CompareRow> rows;
  for (const std::string& path : o.receipts) {
    const bench::BenchReceipt r = bench::bench_receipt_load(path);
    const auto more = bench::compare_figures(b, r.model, r.figures, path);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  const auto unmeasured = bench::compare_unmeasured(b, rows);
  rows.insert(rows.end(), unmeasured.begin(), unmeasured.end());
  std::fputs(bench::compare_table(b, rows).c_str(), stdout);
  if (o.json_path.empty()) return 0;
  nlohmann::ordered_json out = {{"what", "bench-compare"}};
  out.update(bench::commit_json());
  out["timestamp"] = bench::utc_now();
  out["command"] = o.command;
  out["receipts"] = o.receipts;
  out.update(compare_receipt_part(b, rows));
  std::ofstream file(o.json_path);
  file << out.dump(2) << "\n";
  if (!file) fail(ErrorCode::io, "--json {}: cannot be written", o.json_path);
  std::fprintf(stderr, "memra bench: comparison written to %s\n", o.json_path.c_str());
  return 0;
}

int run_bench(const Args& args) {
  const BenchOptions o = parse_options(args);
  if (!o.receipts.empty()) return compare_receipts(o);
  // Found out before minutes of GPU time, not after.
  if (!o.json_path.empty() && !std::ofstream(o.json_path, std::ios::app))
    fail(ErrorCode::invalid_argument, "--json {}: cannot be written", o.json_path);
  std::optional<bench::Baselines> baselines;
  if (!o.compare_path.empty()) baselines = bench::baselines_load(o.compare_path);
  const int ordinal = backend_gpu_ordinal(o.device);
  const bench::ModelCost cost = bench::model_cost(o.model);
  check_fits(o, cost.trained_context);
  const std::optional<bench::Ceilings> ceilings = measure_ceilings(ordinal);
  const EngineOptions eo = engine_options(o);
  std::unique_ptr<Engine> engine = Engine::create(eo);
  const EngineModelInfo& info = engine->model_info();
  if (ordinal >= 0 && !info.device.starts_with("cuda:" + std::to_string(ordinal) + " "))
    fail(ErrorCode::internal, "the engine runs on '{}' but the ceilings were measured on GPU {}",
         info.device, ordinal);
  const uint64_t kv_bytes_per_token =
      info.kv_cache_bytes / (uint64_t(engine->stats().kv_blocks_total) * eo.kv_block_size);
  std::fprintf(stderr, "memra bench: %s (%s) on %s, KV cache %s, %d runs per figure\n",
               info.id.c_str(), info.architecture.c_str(), info.device.c_str(),
               info.kv_dtype.c_str(), o.runs);
  const int threads =
      ordinal >= 0
          ? 0
          : (o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<bench::Figure> figures = bench::run_figures(*engine, o, threads);
  if (ceilings) bench::apply_ceilings(figures, cost, *ceilings, kv_bytes_per_token);
  print_basis(cost, ceilings, kv_bytes_per_token, info.kv_dtype);
  if (threads > 0) bench::print_cpu_table(figures, threads);
  bench::print_table(figures);
  nlohmann::ordered_json compare;
  if (baselines) {
    // The device as the receipt names it: the GPU the ceilings were measured on (a GPU run always
    // measures them, on the engine's GPU: checked above), or the CPU.
    const std::string gpu = ceilings ? ceilings->gpu_name : "cpu";
    const bench::ComparedModel model{info.id,
                                     info.architecture,
                                     cost.parameters,
                                     cost.file_type,
                                     o.deterministic,
                                     o.kv_dtype.empty() ? "" : info.kv_dtype,
                                     gpu};
    std::vector<bench::ComparedFigure> measured;
    for (const bench::Figure& f : figures)
      measured.push_back({f.name, "tok/s", bench::spread(f.tok_s).median});
    const auto rows = bench::compare_figures(*baselines, model, measured);
    std::fputs(bench::compare_table(*baselines, rows).c_str(), stdout);
    compare = compare_receipt_part(*baselines, rows);
  }
  if (!o.json_path.empty()) {
    bench::write_receipt(o.json_path, {o, info, cost, ceilings, kv_bytes_per_token, figures,
                                       baselines ? &compare : nullptr});
    std::fprintf(stderr, "memra bench: receipt written to %s\n", o.json_path.c_str());
  }
  return 0;
}

const Registration kReg{{"bench", "measure prefill and decode speed", &run_bench}};

}  // namespace
}  // namespace memra::cli
