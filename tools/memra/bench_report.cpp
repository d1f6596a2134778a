// `memra bench` reporting: what the model costs per token (from its file), each figure's ceiling
// on this GPU, the tables and the JSON receipt (receipts/, see ../shared/GATES.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "core/error.h"
#include "formats/convert.h"
#include "formats/model_archive.h"
#include "formats/model_source.h"

namespace memra::cli::bench {

using nlohmann::ordered_json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The first line `command` prints, or "" when it fails.
static std::string first_line_of(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "";
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  const int rc = pclose(p);
  std::string line = got && rc == 0 ? buf : "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

// $MEMRA_COMMIT when set (the GPU recipe sets it to the commit the packed binaries were built
// from: a tree copied to another machine may carry a stale .git), else the source tree's HEAD
// (and whether tracked files differ from it) when the source folder ($MEMRA_SOURCE_DIR, else where
// this binary was built from) is a git checkout. Only the folder's own .git counts: a copy inside
// another repository must not name that repository's HEAD.
ordered_json commit_json() {
  if (const char* env = std::getenv("MEMRA_COMMIT"); env != nullptr && *env != '\0')
    return {{"commit", env}, {"commit_source", "env"}};
  std::string dir;
  if (const char* env = std::getenv("MEMRA_SOURCE_DIR")) dir = env;
#ifdef MEMRA_SOURCE_DIR
  if (dir.empty()) dir = MEMRA_SOURCE_DIR;
#endif
  std::error_code ec;
  if (!dir.empty() && dir.find('\'') == std::string::npos &&
      std::filesystem::exists(std::filesystem::path(dir) / ".git", ec)) {
    const std::string git = "git -C '" + dir + "' ";
    const std::string head = first_line_of(git + "rev-parse HEAD 2>/dev/null");
    const std::string dirty =
        first_line_of(git + "status --porcelain --untracked-files=no 2>/dev/null");
    if (head.size() == 40)
      return {{"commit", head}, {"commit_source", "git"}, {"commit_dirty", !dirty.empty()}};
  }
  return {{"commit", ""}, {"commit_source", "none"}};
}

namespace {

// llama.cpp's name for general.file_type when it is a mix memra writes, else the tensor type
// holding the most bytes.
std::string file_type_name(const ModelArchive& a, const std::map<std::string, uint64_t>& by_type) {
  using convert::Mix;
  if (const auto ft = a.metadata.get_int("general.file_type")) {
    for (Mix m : {Mix::f32, Mix::f16, Mix::bf16, Mix::q8_0, Mix::q4_k_m, Mix::q5_k_m, Mix::q6_k})
      if (convert::llama_file_type(m) == *ft) return std::string(convert::mix_name(m));
    return "LLAMA_FTYPE " + std::to_string(*ft);
  }
  const auto most =
      std::max_element(by_type.begin(), by_type.end(),
                       [](const auto& x, const auto& y) { return x.second < y.second; });
  return most == by_type.end() ? "none" : most->first;
}

ordered_json spread_json(const std::vector<double>& values) {
  const Spread s = spread(values);
  return {{"median", s.median},
          {"min", s.min},
          {"max", s.max},
          {"runs", values.size()},
          {"values", values}};
}

ordered_json figure_json(const Figure& f) {
  ordered_json j = {{"name", f.name},
                    {"kind", figure_kind_name(f.kind)},
                    {"prompt_tokens", f.prompt},
                    {"gen_tokens", f.gen},
                    {"depth", f.depth},
                    {"concurrency", f.concurrency},
                    {"unit", "tok/s"}};
  j.update(spread_json(f.tok_s));
  const double median = spread(f.tok_s).median;
  j["ceiling_tok_s"] = f.ceiling_tok_s ? ordered_json(*f.ceiling_tok_s) : ordered_json();
  j["pct_of_ceiling"] =
      f.ceiling_tok_s ? ordered_json(100.0 * median / *f.ceiling_tok_s) : ordered_json();
  if (!f.cpu_tok_s.empty()) j["tok_per_cpu_second_x_threads"] = spread_json(f.cpu_tok_s);
  return j;
}

ordered_json model_json(const ReceiptInputs& in) {
  const ModelCost& c = in.cost;
  return {{"id", in.info.id},
          {"architecture", in.info.architecture},
          {"file_type", c.file_type},
          {"parameters", c.parameters},
          {"matmul_parameters_per_token", c.matmul_parameters},
          {"weight_bytes", c.weight_bytes},
          {"engine_weight_bytes", in.info.weight_bytes},
          {"bytes_read_per_token", c.bytes_per_token},
          {"expert_bytes", c.expert_bytes},
          {"experts", c.n_expert},
          {"experts_used", c.n_expert_used},
          {"kv_bytes_per_token", in.kv_bytes_per_token},
          {"kv_dtype", in.info.kv_dtype},
          {"tied_embeddings", c.tied_embeddings},
          {"context_length", c.trained_context},
          {"bytes_by_type", c.bytes_by_type}};
}

ordered_json ceilings_json(const std::optional<Ceilings>& c) {
  if (!c) return ordered_json();
  return {{"copy_tb_s", spread_json(c->copy_tb_s)},
          {"copy", "device-to-device, 2 GiB, (bytes read + bytes written) / s"},
          {"bf16_tflops", spread_json(c->bf16_tflops)},
          {"bf16", "cuBLASLt bf16 GEMM 8192^3, f32 accumulation, random data"}};
}

}  // namespace

const char* figure_kind_name(FigureKind kind) {
  switch (kind) {
    case FigureKind::prefill:
      return "prefill";
    case FigureKind::decode:
      return "decode";
    case FigureKind::aggregate_prefill:
      return "aggregate_prefill";
    case FigureKind::aggregate_decode:
      return "aggregate_decode";
  }
  return "?";
}

Spread spread(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  const double median = v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  return {median, v.front(), v.back()};
}

ModelCost model_cost(const std::string& source) {
  const ResolvedModel resolved =
      model_source_resolve(source.empty() ? model_source_default_path() : source);
  const ModelArchive a = archive_open(resolved.path);
  ModelCost c;
  const TensorView* embd = a.find_tensor("token_embd.weight");
  if (embd == nullptr) fail(ErrorCode::unsupported, "{} has no token_embd.weight", resolved.path);
  c.tied_embeddings = a.find_tensor("output.weight") == nullptr;
  const std::string arch = a.architecture();
  uint64_t expert_parameters = 0;
  for (const TensorView& t : a.tensors) {
    c.parameters += t.n_elements();
    c.weight_bytes += t.n_bytes;
    c.bytes_by_type[std::string(dtype_name(t.dtype))] += t.n_bytes;
    if (t.name.find("_exps.") != std::string::npos) {
      c.expert_bytes += t.n_bytes;
      expert_parameters += t.n_elements();
    }
  }
  if (c.expert_bytes > 0) {
    c.n_expert = static_cast<int32_t>(a.metadata.get_int(arch + ".expert_count").value_or(0));
    c.n_expert_used =
        static_cast<int32_t>(a.metadata.get_int(arch + ".expert_used_count").value_or(0));
    if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
      fail(ErrorCode::malformed_file,
           "{} has expert tensors but expert_count {} and "
           "expert_used_count {}",
           resolved.path, c.n_expert, c.n_expert_used);
  }
  // The experts a token does not use are neither read nor multiplied.
  const double active = c.expert_share(1.0);
  const auto idle_bytes = static_cast<uint64_t>(double(c.expert_bytes) * (1.0 - active));
  const auto idle_parameters = static_cast<uint64_t>(double(expert_parameters) * (1.0 - active));
  const uint64_t row_bytes = embd->n_bytes / std::max<uint64_t>(1, embd->n_rows());
  c.bytes_per_token =
      (c.tied_embeddings ? c.weight_bytes : c.weight_bytes - embd->n_bytes + row_bytes) -
      idle_bytes;
  c.matmul_parameters =
      (c.tied_embeddings ? c.parameters : c.parameters - embd->n_elements()) - idle_parameters;
  c.file_type = file_type_name(a, c.bytes_by_type);
  c.trained_context =
      static_cast<int32_t>(a.metadata.get_int(arch + ".context_length").value_or(8192));
  return c;
}

double ModelCost::expert_share(double tokens) const {
  if (n_expert <= 0) return 1.0;
  return 1.0 - std::pow(1.0 - double(n_expert_used) / n_expert, tokens);
}

// Prefill: the bf16 matrix rate over 2 FLOPs per matrix parameter per token (attention's own
// FLOPs left out). Decode: copy bandwidth over the bytes a step reads (weights once, of a
// mixture's experts the share its tokens touch, plus the KV of each sequence's context at the
// middle of the decode) per token it makes, capped for many sequences by the prefill bound.
void apply_ceilings(std::vector<Figure>& figures, const ModelCost& cost, const Ceilings& c,
                    uint64_t kv_bytes_per_token) {
  const double bandwidth = spread(c.copy_tb_s).median * 1e12;
  const double compute_bound =
      spread(c.bf16_tflops).median * 1e12 / (2.0 * double(cost.matmul_parameters));
  for (Figure& f : figures) {
    if (f.kind == FigureKind::prefill || f.kind == FigureKind::aggregate_prefill) {
      f.ceiling_tok_s = compute_bound;
      continue;
    }
    const double context = f.depth + 0.5 * f.gen;
    const double experts =
        double(cost.expert_bytes) * (cost.expert_share(f.concurrency) - cost.expert_share(1.0));
    const double step_bytes = double(cost.bytes_per_token) + experts +
                              f.concurrency * context * double(kv_bytes_per_token);
    f.ceiling_tok_s = std::min(compute_bound, f.concurrency * bandwidth / step_bytes);
  }
}

void print_table(const std::vector<Figure>& figures) {
  std::printf("\n| %-22s | %10s | %10s | %10s | %10s | %9s |\n", "tok/s", "median", "min", "max",
              "ceiling", "% ceiling");
  std::printf(
      "|------------------------|------------|------------|------------|------------|"
      "-----------|\n");
  for (const Figure& f : figures) {
    const Spread s = spread(f.tok_s);
    char ceiling[32] = "n/a", pct[32] = "n/a";
    if (f.ceiling_tok_s) {
      std::snprintf(ceiling, sizeof(ceiling), "%.1f", *f.ceiling_tok_s);
      std::snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * s.median / *f.ceiling_tok_s);
    }
    std::printf("| %-22s | %10.1f | %10.1f | %10.1f | %10s | %9s |\n", f.name.c_str(), s.median,
                s.min, s.max, ceiling, pct);
  }
}

void print_cpu_table(const std::vector<Figure>& figures, int threads) {
  std::printf("\ntokens per (process CPU-seconds / %d threads): the speed on %d unshared cores\n",
              threads, threads);
  std::printf("| %-22s | %10s | %10s | %10s |\n", "tok/s", "median", "min", "max");
  std::printf("|------------------------|------------|------------|------------|\n");
  for (const Figure& f : figures) {
    if (f.cpu_tok_s.empty()) continue;
    const Spread s = spread(f.cpu_tok_s);
    std::printf("| %-22s | %10.1f | %10.1f | %10.1f |\n", f.name.c_str(), s.median, s.min, s.max);
  }
}

void write_receipt(const std::string& path, const ReceiptInputs& in) {
  const BenchOptions& o = in.options;
  ordered_json r = {{"what", "bench"}};
  r.update(commit_json());
  r["timestamp"] = utc_now();
  r["command"] = o.command;
  r["device"] = in.info.device;
  r["kv_dtype"] = in.info.kv_dtype;
  r["gpu"] = in.ceilings ? ordered_json{{"name", in.ceilings->gpu_name},
                                        {"driver_version", in.ceilings->driver_version},
                                        {"runtime_version", in.ceilings->runtime_version}}
                         : ordered_json();
  r["options"] = {{"prompts", o.prompts},
                  {"gen", o.n_gen},
                  {"depths", o.depths},
                  {"concurrency", o.concurrency},
                  {"runs", o.runs},
                  {"threads", o.threads},
                  {"device", o.device},
                  {"deterministic", o.deterministic},
                  {"kv_dtype", o.kv_dtype.empty() ? ordered_json() : ordered_json(o.kv_dtype)}};
  r["model"] = model_json(in);
  r["ceilings"] = ceilings_json(in.ceilings);
  r["figures"] = ordered_json::array();
  for (const Figure& f : in.figures) r["figures"].push_back(figure_json(f));
  if (in.compare != nullptr) r.update(*in.compare);
  std::ofstream out(path);
  out << r.dump(2) << "\n";
  if (!out) fail(ErrorCode::io, "cannot write the receipt {}", path);
}

}  // namespace memra::cli::bench
