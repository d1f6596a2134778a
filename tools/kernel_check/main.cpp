// memra-kernel-check: every CUDA kernel against an independent CPU reference (double
// accumulation) on fresh random inputs from a printed seed, outputs poisoned first, plus the
// bitwise batch-invariance checks. Prints one table row per case and ALL GREEN (exit 0) or
// RED: N failed (exit 1); --teeth runs each case with a deliberate defect instead. --json writes
// a receipt (../shared/GATES.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "check.h"
#include "core/error.h"

namespace {

using memra::kernel_check::Context;
using memra::kernel_check::Options;

constexpr const char* kUsage = R"(usage: memra-kernel-check [--seed N] [--filter SUBSTR] [--teeth]
                          [--json FILE] [--commit SHA]

Checks every CUDA kernel (elementwise, rms_norm, get_rows, rope, kv_store, attention, matmul,
argmax_rows, sample_rows, and the linear-attention ssm_conv, gated_delta_rule, rms_norm_gated,
sigmoid_mul) against a CPU reference (double precision; for sample_rows the CPU sampler's own
chain, bit for bit; for the linear-attention kernels the CPU backend's ops; qk_prologue,
post_norm_add_norm and rms_norm_dual against the plain kernels they fuse, bit for bit) on fresh
random inputs, with outputs poisoned (NaN) first, plus bitwise invariances (a row / query /
sequence alone == the same inside a batch; a sequence split over two steps == whole; attention's
split and one_pass plans agree). One table row per case: kernel, shape, dtype, metric, worst
error, tolerance, verdict.

  --seed N        seed of the random inputs (default: random; always printed, to reproduce)
  --filter SUBSTR run only the kernel families whose name contains SUBSTR (attention, matmul,
                  get_rows, gated_delta_rule, ...: the family, not a case's row in the table)
  --teeth         run each case with a deliberately broken variant (wrong eps, rope layout
                  swapped, position off by one, a quant byte flipped on the GPU only, window one
                  key short, softcap dropped, kv_store into the wrong slot, a perturbed recurrent
                  state, ...). Every case must then be RED; exit 0 only when every broken
                  variant was caught.
  --json FILE     write a receipt: commit, GPU, driver/runtime, command line, seed, results
  --commit SHA    commit recorded in the receipt (default: git rev-parse HEAD, if available)

Exit: 0 = ALL GREEN (or, with --teeth, every defect caught); 1 = RED / a defect missed / error;
2 = bad usage.
)";

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string git_head() {
  FILE* pipe = popen("git rev-parse HEAD 2>/dev/null", "r");
  if (!pipe) return "";
  char buf[64] = {};
  const bool ok = std::fgets(buf, sizeof(buf), pipe) != nullptr;
  pclose(pipe);
  std::string s = ok ? buf : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// A check family and its wall time in this run (the receipt's family_seconds: where a run's
// minutes go, so the slowest family is the one to make faster).
struct FamilyTime {
  const char* name;
  double seconds;
};

nlohmann::json receipt(const Context& ctx, const Options& opt, const std::string& command,
                       const std::string& commit, double seconds,
                       const std::vector<FamilyTime>& families, bool pass) {
  const memra::cuda::DeviceInfo info = memra::cuda::device_info(0);
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& r : ctx.results()) {
    cases.push_back({{"kernel", r.kernel},
                     {"shape", r.shape},
                     {"dtype", r.dtype},
                     {"metric", r.metric},
                     {"error", r.error},
                     {"tolerance", r.tolerance},
                     {"pass", r.pass()},
                     {"broken", r.broken}});
  }
  nlohmann::json by_family = nlohmann::json::object();
  for (const FamilyTime& f : families) by_family[f.name] = f.seconds;
  return {
      {"what", "kernel-check"},
      {"timestamp", utc_now()},
      {"commit", commit},
      {"command", command},
      {"gpu", info.name},
      {"compute_capability", std::to_string(info.sm_major) + "." + std::to_string(info.sm_minor)},
      {"driver_version", memra::cuda::driver_version()},
      {"runtime_version", memra::cuda::runtime_version()},
      {"seed", opt.seed},
      {"teeth", opt.teeth},
      {"filter", opt.filter},
      {"seconds", seconds},
      {"family_seconds", by_family},
      {"cases", cases},
      {"pass", pass}};
}

}  // namespace

int main(int argc, char** argv) {
  // The grouped decode launches (MEMRA_GROUPED_DECODE, on by default) are proven here even where
  // a user's environment turned them off: the shared-x cases then run them. An explicit setting
  // wins.
  setenv("MEMRA_GROUPED_DECODE", "1", /*overwrite=*/0);
  // Likewise the warp-specialized Q4_K prefill kernel (MEMRA_WGMMA_FOLD, on by default: tiled
  // Q4_K products of more than 64 tokens on sm_90a) and the experts in the file's layout on the
  // device (MEMRA_MOE_DEVICE_GGML, on by default).
  setenv("MEMRA_WGMMA_FOLD", "1", /*overwrite=*/0);
  setenv("MEMRA_MOE_DEVICE_GGML", "1", /*overwrite=*/0);
  Options opt;
  opt.seed = std::random_device{}();
  std::string json_path, commit, command = "memra-kernel-check";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--seed" && has_value) {
      opt.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--filter" && has_value) {
      opt.filter = argv[++i];
    } else if (arg == "--teeth") {
      opt.teeth = true;
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else if (arg == "--commit" && has_value) {
      commit = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  try {
    if (memra::cuda::device_count() == 0) {
      std::fprintf(stderr, "memra-kernel-check: no CUDA device (driver %d)\n",
                   memra::cuda::driver_version());
      return 1;
    }
    if (commit.empty()) commit = git_head();
    std::printf("memra-kernel-check seed %llu%s (reproduce with --seed %llu)\n",
                static_cast<unsigned long long>(opt.seed), opt.teeth ? " --teeth" : "",
                static_cast<unsigned long long>(opt.seed));
    std::printf("%-24s %-30s %-5s %-7s %11s %9s  %s\n", "kernel", "shape", "dtype", "metric",
                "worst err", "tolerance", "verdict");
    const auto start = std::chrono::steady_clock::now();
    Context ctx(opt);
    namespace kc = memra::kernel_check;
    const struct {
      const char* name;
      void (*check)(kc::Context&);
    } kFamilies[] = {{"elementwise", kc::check_elementwise},
                     {"norm", kc::check_norm},
                     {"norm_fused", kc::check_norm_fused},
                     {"get_rows", kc::check_get_rows},
                     {"rope", kc::check_rope},
                     {"kv_store", kc::check_kv_store},
                     {"qk_prologue", kc::check_qk_prologue},
                     {"attention", kc::check_attention},
                     {"attention_prologue", kc::check_attention_prologue},
                     {"matmul", kc::check_matmul},
                     {"matmul_fast", kc::check_matmul_fast},
                     {"sampling", kc::check_sampling},
                     {"sample_rows", kc::check_sample_rows},
                     {"ssm", kc::check_ssm},
                     {"moe", kc::check_moe}};
    std::vector<FamilyTime> families;
    for (const auto& f : kFamilies) {
      const auto t0 = std::chrono::steady_clock::now();
      f.check(ctx);
      families.push_back(
          {f.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("seconds by family:");
    for (const FamilyTime& f : families)
      if (f.seconds >= 0.05) std::printf(" %s %.1f", f.name, f.seconds);
    std::printf("\n");
    const auto& results = ctx.results();
    int failed = 0;
    for (const auto& r : results) failed += !r.pass();
    const int n = static_cast<int>(results.size());
    bool pass;
    if (n == 0) {
      std::printf("RED: no case matched --filter '%s'\n", opt.filter.c_str());
      pass = false;
    } else if (opt.teeth) {
      pass = failed == n;
      if (pass) {
        std::printf("TEETH OK: all %d broken variants were RED (%.1f s)\n", n, seconds);
      } else {
        std::printf("TEETH MISSING: %d of %d broken variants passed as green (%.1f s)\n",
                    n - failed, n, seconds);
      }
    } else {
      pass = failed == 0;
      if (pass) {
        std::printf("%d cases in %.1f s\nALL GREEN\n", n, seconds);
      } else {
        std::printf("%d cases in %.1f s\nRED: %d failed\n", n, seconds, failed);
      }
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << receipt(ctx, opt, command, commit, seconds, families, pass).dump(2) << "\n";
      if (!out) memra::fail(memra::ErrorCode::io, "cannot write receipt {}", json_path);
    }
    return pass ? 0 : 1;
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "memra-kernel-check: %s\n", e.what());
    return 1;
  }
}
