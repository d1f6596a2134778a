// `memra bench [-m SOURCE] [-p 512] [-n 128] [-r 3] [--threads N]`: end-to-end engine speed on
// one sequence. Each run submits a P-token prompt (fixed pseudo-random ids, prefix cache off so
// every run prefills in full) and generates N tokens greedily past EOS. Prefill tok/s = P / time
// to the first token; decode tok/s = (N - 1) / the time after it. Reports the median, min and max
// over R runs after one untimed warm-up. On a shared machine wall time undercounts, so it also
// reports tokens per CPU-second of the process times the thread count: the speed the same work
// would reach with the threads' cores to itself (a spinning thread pool makes it pessimistic).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "cli_args.h"
#include "commands.h"
#include "core/error.h"
#include "memra/engine.h"

namespace memra::cli {
namespace {

constexpr const char* kUsage =
    "usage: memra bench [-m SOURCE] [-p 512] [-n 128] [-r 3] [--threads N]\n"
    "  -m, --model SOURCE   model (default: the packaged Gemma 3 270M Q4_K_M)\n"
    "  -p N                 prompt tokens per run (default 512)\n"
    "  -n N                 generated tokens per run (default 128)\n"
    "  -r N                 timed runs, at least 3 (default 3)\n"
    "  --threads N          CPU threads (default: all cores)\n"
    "  --device DEV         auto | cpu | cuda | cuda:N (default: $MEMRA_DEVICE or auto)\n";

struct BenchOptions {
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t runs = 3;
  int threads = 0;
  std::string device = "auto";
};

BenchOptions parse_options(const Args& args) {
  BenchOptions o;
  if (const char* env = std::getenv("MEMRA_DEVICE")) o.device = env;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-m" || a == "--model") {
      o.model = value();
    } else if (a == "-p") {
      o.n_prompt = parse_int(a, value(), 1, 1 << 20);
    } else if (a == "-n") {
      o.n_gen = parse_int(a, value(), 2, 1 << 20);
    } else if (a == "-r") {
      o.runs = parse_int(a, value(), 3, 1000);
    } else if (a == "--threads") {
      o.threads = parse_int(a, value(), 0, 4096);
    } else if (a == "--device") {
      o.device = value();
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      fail(ErrorCode::invalid_argument, "unknown argument '{}'\n{}", a, kUsage);
    }
  }
  return o;
}

struct RunTiming {
  double prefill_tps = 0;
  double decode_tps = 0;
  double prefill_cpu_s = 0;  // process CPU seconds (user + system) of each phase
  double decode_cpu_s = 0;
};

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

RunTiming bench_once(Engine& engine, const std::vector<int32_t>& prompt, int32_t n_gen) {
  using Clock = std::chrono::steady_clock;
  std::promise<StreamEvent> done;
  Clock::time_point first{};
  double first_cpu = 0;
  bool got_first = false;
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = n_gen;
  r.stop.ignore_eos = true;
  r.sink = [&](const StreamEvent& e) {
    if (!got_first && !e.tokens.empty()) {
      first = Clock::now();
      first_cpu = process_cpu_seconds();
      got_first = true;
    }
    if (e.finish != FinishReason::none) done.set_value(e);
  };
  const double start_cpu = process_cpu_seconds();
  const auto start = Clock::now();
  engine.submit(std::move(r));
  const StreamEvent last = done.get_future().get();
  const auto end = Clock::now();
  const double end_cpu = process_cpu_seconds();
  if (last.finish != FinishReason::length)
    fail(ErrorCode::internal, "bench run ended with '{}' {}", finish_reason_name(last.finish),
         last.error);
  return {prompt.size() / std::chrono::duration<double>(first - start).count(),
          (n_gen - 1) / std::chrono::duration<double>(end - first).count(), first_cpu - start_cpu,
          end_cpu - first_cpu};
}

void print_row(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("| %-14s | %10.1f | %10.1f | %10.1f |\n", name, v[v.size() / 2], v.front(), v.back());
}

int run_bench(const Args& args) {
  const BenchOptions o = parse_options(args);
  EngineOptions eo;
  eo.model = o.model;
  eo.n_threads = o.threads;
  eo.device = o.device;
  eo.max_sequences = 1;
  eo.max_batch_tokens = o.n_prompt;  // the whole prompt in one step
  eo.prefix_cache = false;
  eo.context_length = o.n_prompt + o.n_gen;
  std::unique_ptr<Engine> engine = Engine::create(eo);
  const EngineModelInfo& info = engine->model_info();
  // Fixed pseudo-random ids from the lower vocabulary (ordinary tokens in every vocabulary we
  // load), so every run and every build sees the same prompt.
  std::vector<int32_t> prompt(static_cast<size_t>(o.n_prompt));
  const uint32_t span = static_cast<uint32_t>(std::min(info.n_vocab, 32000) - 1000);
  uint32_t x = 12345;
  for (int32_t& t : prompt) {
    x = x * 1664525u + 1013904223u;
    t = 1000 + static_cast<int32_t>((x >> 8) % span);
  }
  std::fprintf(stderr, "memra bench: %s (%s) on %s, pp%d + tg%d, %d runs\n", info.id.c_str(),
               info.architecture.c_str(), info.device.c_str(), o.n_prompt, o.n_gen, o.runs);
  bench_once(*engine,
             std::vector<int32_t>(prompt.begin(), prompt.begin() + std::min(o.n_prompt, 16)), 4);
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<double> prefill, decode, prefill_cpu, decode_cpu;
  for (int32_t i = 0; i < o.runs; ++i) {
    const RunTiming t = bench_once(*engine, prompt, o.n_gen);
    prefill.push_back(t.prefill_tps);
    decode.push_back(t.decode_tps);
    prefill_cpu.push_back(o.n_prompt / (t.prefill_cpu_s / threads));
    decode_cpu.push_back((o.n_gen - 1) / (t.decode_cpu_s / threads));
  }
  std::printf("| %-14s | %10s | %10s | %10s |\n", "tok/s", "median", "min", "max");
  std::printf("|----------------|------------|------------|------------|\n");
  print_row(("prefill pp" + std::to_string(o.n_prompt)).c_str(), prefill);
  print_row(("decode tg" + std::to_string(o.n_gen)).c_str(), decode);
  std::printf("\ntokens per (process CPU-seconds / %d threads): the speed on %d unshared cores\n",
              threads, threads);
  print_row(("prefill pp" + std::to_string(o.n_prompt)).c_str(), prefill_cpu);
  print_row(("decode tg" + std::to_string(o.n_gen)).c_str(), decode_cpu);
  return 0;
}

const Registration kReg{{"bench", "measure prefill and decode speed", &run_bench}};

}  // namespace
}  // namespace memra::cli
