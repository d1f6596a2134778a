// memra-kernel-bench: times kernels::matmul on the Qwen3-8B matrix shapes against the ceilings
// measured in the same run: device copy bandwidth (decode, 1 and 8 tokens: GB/s of weight bytes)
// and cuBLASLt's bf16 GEMM (prefill, 512 tokens: TFLOP/s); then kernels::attention on the same
// model's shape (attention.cpp; --attention runs only that), then kernels::sample_rows
// (sampling.cpp), then the mixture-of-experts kernels on Qwen3-30B-A3B's and Gemma 4 26B-A4B's
// shapes (moe.cpp; --moe runs only those), then the
// gated delta rule on Qwen3.5-9B's (delta_rule.cpp; --delta-rule runs only that). --chain runs
// only a decode step's products as launches against one persistent grid (chain.cpp);
// --elementwise only a prompt step's elementwise kernels (elementwise.cpp). Weights
// are random valid blocks, rotated over enough copies that L2 (60 MB) cannot serve them; each
// figure is the median of 9 event-timed bursts of 10 back-to-back calls after warm-up (bench.h). A
// self-check runs first (check.cpp);
// --json FILE saves it all. --tokens N[,N...] times only those token counts per matrix (1, 2, 4, 8,
// 16, 32, 64 or 512) and skips attention and sampling: a quick look at one regime while a kernel
// is being changed.
// --shapes qwen3-0.6b times the 0.6B's matrix shapes instead of the 8B's; --dtypes q4_k,q6_k
// times only those weight types; --copies N rotates each shape's calls over N weight copies instead
// of enough to miss L2 (1: the same pages every call, as a profiler's replays read them); --only
// SHAPE times one shape (qkv, gate, down, output); --soak-ms N runs each tiled product on for N ms
// and adds its sustained per-call time (scripts/gpu_clocks.py beside it reads the clock).
#include <cublasLt.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/fast_gemm.h"
#include "core/error.h"
#include "core/half.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Makes random bytes valid weights of dtype: finite elements, f16 block scales near 2^-10.
void make_valid(DType dtype, uint8_t* p, size_t bytes) {
  auto u16 = [&](size_t at, uint16_t keep, uint16_t set) {
    uint16_t h;
    std::memcpy(&h, p + at, 2);
    h = static_cast<uint16_t>((h & keep) | set);
    std::memcpy(p + at, &h, 2);
  };
  if (dtype == DType::f32) {
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
      uint32_t v;
      std::memcpy(&v, p + i, 4);
      v = (v & 0x807FFFFFu) | 0x3C000000u;
      std::memcpy(p + i, &v, 4);
    }
    return;
  }
  if (dtype == DType::f16 || dtype == DType::bf16) {
    const bool half = dtype == DType::f16;
    for (size_t i = 0; i + 2 <= bytes; i += 2)
      u16(i, half ? 0x83FF : 0x807F, half ? 0x2000 : 0x3C00);
    return;
  }
  const size_t block = dtype_traits(dtype).type_size;
  std::vector<size_t> scales = {0};
  if (dtype == DType::q4_1 || dtype == DType::q5_1 || dtype == DType::q4_k || dtype == DType::q5_k)
    scales = {0, 2};
  if (dtype == DType::q6_k) scales = {208};
  for (size_t b = 0; b + block <= bytes; b += block) {
    for (size_t s : scales) u16(b + s, 0x83FF, 0x1400);
  }
}

cuda::DeviceBuffer tiled_stack(DType dtype, int n_in, int n_out, int copies, uint64_t seed,
                               const cuda::Stream& stream, size_t& each_bytes) {
  const size_t ggml = dtype_row_bytes(dtype, static_cast<uint64_t>(n_in), "bench") * n_out;
  std::vector<uint8_t> host(ggml);
  for (size_t i = 0; i + 8 <= host.size(); i += 8) {
    const uint64_t v = splitmix(seed);
    std::memcpy(host.data() + i, &v, 8);
  }
  make_valid(dtype, host.data(), host.size());
  cuda::DeviceBuffer src(ggml);
  cuda::check(cudaMemcpy(src.data(), host.data(), ggml, cudaMemcpyHostToDevice), "upload weights");
  each_bytes = kernels::matmul_tiled_bytes(dtype, n_in, n_out);
  cuda::DeviceBuffer out(each_bytes * static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c)
    kernels::matmul_tile(dtype, src.data(), n_in, n_out,
                         static_cast<uint8_t*>(out.data()) + c * each_bytes, stream.get());
  return out;
}

namespace {

using cuda::check;

constexpr size_t kRotateBytes = size_t{256} << 20;  // >4x L2 of weights per rotation

struct Shape {
  const char* name;
  int n_out;
  int n_in;
};
// Fused QKV, one of gate/up, down, and the output (vocabulary) matrix: Qwen3-8B's by default,
// Qwen3-0.6B's with --shapes qwen3-0.6b (the small model's products, K 1,024 or 3,072, choose
// kernels differently at some token counts).
const std::vector<Shape> kShapes8b = {
    {"qkv", 6144, 4096}, {"gate", 12288, 4096}, {"down", 4096, 12288}, {"output", 151936, 4096}};
const std::vector<Shape> kShapes06b = {
    {"qkv", 4096, 1024}, {"gate", 3072, 1024}, {"down", 1024, 3072}, {"output", 151936, 1024}};

// Mean milliseconds per call of launch(i) over the second half of `ms` milliseconds of bursts
// (median_ms's bursts of kBurst calls, back to back): the sustained state, after the clock has
// settled under the work's power.
template <typename F>
double soak_mean_ms(const cuda::Stream& stream, int ms, F&& launch) {
  cuda::Event start, end;
  double elapsed = 0, late_ms = 0;
  int call = 0, late_calls = 0;
  while (elapsed < ms) {
    start.record(stream);
    for (int b = 0; b < kBurst; ++b) launch(call++);
    end.record(stream);
    const double m = cuda::Event::elapsed_ms(start, end);
    elapsed += m;
    if (elapsed >= ms / 2.0) late_ms += m, late_calls += kBurst;
  }
  return late_ms / late_calls;
}

double copy_tb_per_s(const cuda::Stream& stream) {
  const size_t bytes = size_t{2} << 30;
  cuda::DeviceBuffer a(bytes), b(bytes);
  check(cudaMemsetAsync(a.data(), 1, bytes, stream.get()), "memset");
  const double ms = median_ms(stream, [&](int) {
    check(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()),
          "d2d");
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e12;
}

// cuBLASLt bf16 x bf16 -> f32 for y[t][o] = sum_i W[o][i] x[t][i]: column-major D (n_out x n_tok)
// = op(A) B with A = W viewed as a K x n_out column-major matrix, transposed.
class LtGemm {
 public:
  LtGemm() : workspace_(kWorkspace) {
    if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) fail(ErrorCode::internal, "cublasLt");
  }
  ~LtGemm() { cublasLtDestroy(handle_); }
  double time_ms(const cuda::Stream& stream, const void* w, const void* x, float* y, int n_out,
                 int n_in, int n_tok) {
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n_in, n_out, n_in);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n_in, n_tok, n_in);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n_out, n_tok, n_out);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const size_t ws = kWorkspace;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(handle_, op, la, lb, lc, lc, pref, 1, &result, &found);
    double ms = -1.0;
    if (found > 0) {
      const float alpha = 1.0f, beta = 0.0f;
      ms = median_ms(stream, [&](int) {
        cublasLtMatmul(handle_, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &result.algo,
                       workspace_.data(), kWorkspace, stream.get());
      });
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    return ms;
  }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  cublasLtHandle_t handle_ = nullptr;
  cuda::DeviceBuffer workspace_;
};

struct Bench {
  const cuda::Stream& stream;
  double copy_tbps;
  std::vector<uint8_t>& host;  // random bytes, made valid per dtype in place
  std::vector<int> token_counts;
  // --copies N: the weight copies a shape's calls rotate over (0: enough that L2 cannot serve
  // them, at least 4). 1 reads the same pages every call, as a profiler's replays do.
  size_t weight_copies = 0;
  // --soak-ms N: after its timed runs a tiled product runs on in bursts for N ms, and its row
  // "/tiled soak" gives the mean over the second half: the sustained state (clock under power).
  int soak_ms = 0;
  nlohmann::json rows = nlohmann::json::array();

  void print_row(const std::string& what, const Shape& s, int tokens, double ms, double bytes) {
    const double flops = 2.0 * s.n_out * static_cast<double>(s.n_in) * tokens;
    const double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-8s %-7s %6d x %-6d %4d tok %9.1f us %8.0f GB/s %5.1f%% copy %7.1f TFLOP/s\n",
                what.c_str(), s.name, s.n_out, s.n_in, tokens, ms * 1e3, gbps,
                100.0 * gbps / (copy_tbps * 1e3), flops / (ms * 1e-3) / 1e12);
    rows.push_back({{"kernel", what},
                    {"shape", s.name},
                    {"n_out", s.n_out},
                    {"n_in", s.n_in},
                    {"n_tokens", tokens},
                    {"us", ms * 1e3},
                    {"weight_gb_per_s", gbps},
                    {"pct_of_copy", 100.0 * gbps / (copy_tbps * 1e3)},
                    {"tflop_per_s", flops / (ms * 1e-3) / 1e12}});
  }

  // `--deterministic off`'s path on the same tiled weights (the f16 copy, cuBLASLt, the rows'
  // scaling: everything a step pays), for the token counts it takes.
  void run_fast(DType dtype, const Shape& s, const uint8_t* tbase, size_t tstride, size_t copies,
                const cuda::DeviceBuffer& dx, cuda::DeviceBuffer& dy, cuda::DeviceBuffer& scratch,
                size_t bytes) {
    if (!kernels::matmul_dequant_supported(dtype, kernels::WeightLayout::tiled)) return;
    cuda::FastGemm fast;
    std::unique_ptr<cuda::DeviceBuffer> w16;
    for (int tokens : token_counts) {
      const kernels::MatmulOut probe{dtype,   tbase,
                                     s.n_out, static_cast<float*>(dy.data()),
                                     s.n_out, kernels::WeightLayout::tiled};
      // Every token count asked for (no lower bound): the rows show where the copy pays.
      if (!cuda::FastGemm::takes(&probe, 1, s.n_in, tokens, 0)) continue;
      if (!w16)
        w16 = std::make_unique<cuda::DeviceBuffer>(cuda::FastGemm::copy_bytes(&probe, 1, s.n_in));
      const double ms = median_ms(stream, [&](int i) {
        kernels::MatmulOut out = probe;
        out.w = tbase + (i % copies) * tstride;
        fast.matmul(&out, 1, s.n_in, static_cast<const float*>(dx.data()), tokens, scratch.data(),
                    w16->data(), stream.get());
      });
      check(cudaGetLastError(), "matmul fast");
      print_row(std::string(dtype_name(dtype)) + "/fast", s, tokens, ms,
                static_cast<double>(bytes));
    }
  }

  void run(DType dtype, const Shape& s, LtGemm* lt) {
    const size_t bytes = dtype_row_bytes(dtype, static_cast<uint64_t>(s.n_in), "bench") * s.n_out;
    const size_t stride = (bytes + 255) / 256 * 256;
    const size_t copies =
        weight_copies > 0 ? weight_copies : std::max<size_t>(4, (kRotateBytes + bytes - 1) / bytes);
    cuda::DeviceBuffer w(stride * copies);
    make_valid(dtype, host.data(), bytes);
    check(cudaMemcpy(w.data(), host.data(), bytes, cudaMemcpyHostToDevice), "upload weights");
    auto* base = static_cast<uint8_t*>(w.data());
    for (size_t c = 1; c < copies; ++c) {
      check(cudaMemcpy(base + c * stride, base, bytes, cudaMemcpyDeviceToDevice), "copy weights");
    }
    const int max_tokens = 512;
    std::vector<float> x(size_t{1} * max_tokens * s.n_in);
    uint64_t seed = 99;
    for (float& v : x) v = static_cast<float>(splitmix(seed) >> 40) / 8388608.0f - 1.0f;
    cuda::DeviceBuffer dx(x.size() * 4), dy(size_t{1} * max_tokens * s.n_out * 4),
        scratch(kernels::matmul_scratch_bytes(max_tokens, s.n_in));
    check(cudaMemcpy(dx.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), "upload x");
    const std::string name(dtype_name(dtype));
    for (int tokens : token_counts) {
      if (dtype == DType::f32 && tokens > 8) continue;  // the fixtures' exact path, not for speed
      const double ms = median_ms(stream, [&](int i) {
        kernels::matmul(dtype, base + (i % copies) * stride, s.n_in, s.n_out,
                        static_cast<const float*>(dx.data()), tokens,
                        static_cast<float*>(dy.data()), s.n_out, scratch.data(), stream.get());
      });
      check(cudaGetLastError(), "matmul");
      print_row(name, s, tokens, ms, static_cast<double>(bytes));
    }
    if (kernels::matmul_tiled_supports(dtype, s.n_in)) {  // the same weights, tiled at load
      const size_t tbytes = kernels::matmul_tiled_bytes(dtype, s.n_in, s.n_out);
      const size_t tstride = (tbytes + 255) / 256 * 256;
      cuda::DeviceBuffer tw(tstride * copies);
      auto* tbase = static_cast<uint8_t*>(tw.data());
      for (size_t c = 0; c < copies; ++c)
        kernels::matmul_tile(dtype, base, s.n_in, s.n_out, tbase + c * tstride, stream.get());
      check(cudaStreamSynchronize(stream.get()), "tile weights");
      for (int tokens : token_counts) {
        const auto call = [&](int i) {
          kernels::matmul(dtype, tbase + (i % copies) * tstride, s.n_in, s.n_out,
                          static_cast<const float*>(dx.data()), tokens,
                          static_cast<float*>(dy.data()), s.n_out, scratch.data(), stream.get(),
                          kernels::WeightLayout::tiled);
        };
        const double ms = median_ms(stream, call);
        check(cudaGetLastError(), "matmul tiled");
        print_row(name + "/tiled", s, tokens, ms, static_cast<double>(bytes));
        if (soak_ms > 0) {
          const double soak = soak_mean_ms(stream, soak_ms, call);
          check(cudaGetLastError(), "matmul tiled soak");
          print_row(name + "/tiled soak", s, tokens, soak, static_cast<double>(bytes));
        }
      }
      run_fast(dtype, s, tbase, tstride, copies, dx, dy, scratch, bytes);
    }
    if (lt != nullptr &&
        std::find(token_counts.begin(), token_counts.end(), max_tokens) != token_counts.end()) {
      std::vector<uint16_t> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
      cuda::DeviceBuffer dxb(xb.size() * 2);
      check(cudaMemcpy(dxb.data(), xb.data(), xb.size() * 2, cudaMemcpyHostToDevice), "upload");
      const double ms = lt->time_ms(stream, base, dxb.data(), static_cast<float*>(dy.data()),
                                    s.n_out, s.n_in, max_tokens);
      if (ms > 0) print_row("cublasLt", s, max_tokens, ms, static_cast<double>(bytes));
    }
  }
};

// The receipt fields every GPU receipt carries (GATES.md): what, when, which commit ($MEMRA_COMMIT,
// which the GPU recipe sets to the packed binaries' commit), the command, the GPU and versions.
nlohmann::json receipt_header(int argc, char** argv, const cuda::DeviceInfo& info) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) command += ' ';
    command += argv[i];
  }
  const char* commit = std::getenv("MEMRA_COMMIT");
  return {{"what", "kernel-bench"},
          {"timestamp", stamp},
          {"commit", commit ? commit : ""},
          {"command", command},
          {"device", info.name},
          {"sm_count", info.sm_count},
          {"driver_version", cuda::driver_version()},
          {"runtime_version", cuda::runtime_version()}};
}

}  // namespace
}  // namespace memra::bench

int main(int argc, char** argv) {
  using namespace memra;
  std::string json_path;
  bool check_only = false;
  bool attention_only = false;
  bool delta_rule_only = false;
  bool moe_only = false;
  bool chain_only = false;
  bool elementwise_only = false;
  std::vector<int> token_counts = {1, 8, 16, 32, 64, 512};
  bool tokens_given = false;  // --tokens: the products alone
  const std::vector<bench::Shape>* shapes = &bench::kShapes8b;
  std::vector<DType> only_dtypes;  // --dtypes; empty: every supported one
  size_t weight_copies = 0;        // --copies
  std::string only_shape;          // --only
  int soak_ms = 0;                 // --soak-ms
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--check") {
      check_only = true;
    } else if (arg == "--attention") {
      attention_only = true;
    } else if (arg == "--delta-rule") {
      delta_rule_only = true;
    } else if (arg == "--moe") {
      moe_only = true;
    } else if (arg == "--chain") {
      chain_only = true;
    } else if (arg == "--elementwise") {
      elementwise_only = true;
    } else if (arg == "--tokens" && i + 1 < argc) {
      token_counts.clear();
      tokens_given = true;
      for (const std::string& v : bench::split_list(argv[++i])) {
        int n = 0;  // the whole item a number ("8x" is refused, not read as 8)
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec != std::errc() || end != v.data() + v.size() ||
            (n != 1 && n != 2 && n != 4 && n != 8 && n != 16 && n != 32 && n != 64 && n != 512)) {
          std::fprintf(stderr,
                       "memra-kernel-bench: --tokens takes 1, 2, 4, 8, 16, 32, 64 or 512 (or a "
                       "comma list of them), not '%s'\n",
                       v.c_str());
          return 2;
        }
        token_counts.push_back(n);
      }
    } else if (arg == "--shapes" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "qwen3-8b" && v != "qwen3-0.6b") {
        std::fprintf(stderr, "memra-kernel-bench: --shapes takes qwen3-8b or qwen3-0.6b\n");
        return 2;
      }
      shapes = v == "qwen3-8b" ? &bench::kShapes8b : &bench::kShapes06b;
    } else if (arg == "--only" && i + 1 < argc) {
      only_shape = argv[++i];
    } else if (arg == "--soak-ms" && i + 1 < argc) {
      soak_ms = std::atoi(argv[++i]);
      if (soak_ms < 1 || soak_ms > 60000) {
        std::fprintf(stderr, "memra-kernel-bench: --soak-ms takes 1 to 60000\n");
        return 2;
      }
    } else if (arg == "--copies" && i + 1 < argc) {
      const int n = std::atoi(argv[++i]);
      if (n < 1 || n > 64) {
        std::fprintf(stderr, "memra-kernel-bench: --copies takes 1 to 64\n");
        return 2;
      }
      weight_copies = static_cast<size_t>(n);
    } else if (arg == "--dtypes" && i + 1 < argc) {
      const std::string list = argv[++i];
      for (const std::string& name : bench::split_list(list)) {
        const auto d = dtype_from_name(name);
        if (!d) {
          std::fprintf(stderr, "memra-kernel-bench: --dtypes: unknown weight type in '%s'\n",
                       list.c_str());
          return 2;
        }
        only_dtypes.push_back(*d);
      }
    } else {
      std::fprintf(
          stderr,
          "usage: memra-kernel-bench [--check | --attention | --delta-rule | --moe | --chain | "
          "--elementwise | "
          "--tokens N] "
          "[--shapes qwen3-8b|qwen3-0.6b] [--dtypes q4_k,...] [--only SHAPE|CASE] [--copies N] "
          "[--soak-ms N] [--json FILE]\n");
      return 2;
    }
  }
  try {
    if (cuda::device_count() == 0) {
      std::fprintf(stderr, "memra-kernel-bench: no CUDA device\n");
      return 1;
    }
    const cuda::DeviceInfo info = cuda::device_info(0);
    cuda::Stream stream;
    std::vector<DType> dtypes;
    for (DType d : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1,
                    DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k, DType::q6_k}) {
      if (!only_dtypes.empty() &&
          std::find(only_dtypes.begin(), only_dtypes.end(), d) == only_dtypes.end())
        continue;
      if (kernels::matmul_supports(d)) dtypes.push_back(d);
    }
    if (dtypes.empty()) {
      std::fprintf(stderr, "memra-kernel-bench: --dtypes names no supported weight type\n");
      return 2;
    }
    // One family of timings against the copy ceiling (their correctness is memra-kernel-check's).
    const auto only = [&](const char* key, auto run) {
      const double copy = bench::copy_tb_per_s(stream);
      std::printf("device %s, %d SMs: d2d copy %.2f TB/s (read + write)\n", info.name.c_str(),
                  info.sm_count, copy);
      nlohmann::json out = bench::receipt_header(argc, argv, info);
      out["copy_tb_per_s"] = copy;
      out[key] = run(stream, copy);
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
      return 0;
    };
    if (attention_only)
      return only("attention", [&](const cuda::Stream& st, double copy) {
        // No --only: every case (split_list("") would name one empty case).
        return bench::run_attention(
            st, copy,
            only_shape.empty() ? std::vector<std::string>{} : bench::split_list(only_shape));
      });
    if (moe_only) return only("moe", bench::run_moe);
    if (elementwise_only) return only("elementwise", bench::run_elementwise);
    if (chain_only) {
      bool identical = false;
      const int rc = only("chain", [&](const cuda::Stream& s, double copy) {
        return bench::run_chain(s, copy, identical);
      });
      return identical ? rc : 1;
    }
    if (delta_rule_only) {  // its correctness is memra-kernel-check's
      std::printf("device %s, %d SMs\n", info.name.c_str(), info.sm_count);
      nlohmann::json out = bench::receipt_header(argc, argv, info);
      out["delta_rule"] = bench::run_delta_rule(stream);
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
      return 0;
    }
    const bool checked = bench::run_check(dtypes, stream.get());
    nlohmann::json out = bench::receipt_header(argc, argv, info);
    out["check_pass"] = checked;
    if (!checked || check_only) {
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
      std::printf("%s\n", checked ? "check ok" : "check FAILED: no timings");
      return checked ? 0 : 1;
    }
    const double copy = bench::copy_tb_per_s(stream);
    std::printf("device %s, %d SMs: d2d copy %.2f TB/s (read + write)\n", info.name.c_str(),
                info.sm_count, copy);
    size_t max_bytes = 0;
    for (DType d : dtypes) {
      for (const auto& s : *shapes) {
        max_bytes = std::max<size_t>(max_bytes, dtype_row_bytes(d, s.n_in, "bench") * s.n_out);
      }
    }
    std::vector<uint8_t> host(max_bytes);
    uint64_t seed = 7;
    for (size_t i = 0; i + 8 <= host.size(); i += 8) {
      const uint64_t v = bench::splitmix(seed);
      std::memcpy(host.data() + i, &v, 8);
    }
    bench::LtGemm lt;
    bench::Bench b{stream, copy, host, token_counts, weight_copies, soak_ms};
    bool ran = false;
    for (DType d : dtypes) {
      for (const auto& s : *shapes) {
        if (!only_shape.empty() && only_shape != s.name) continue;
        b.run(d, s, d == DType::bf16 ? &lt : nullptr);
        ran = true;
      }
    }
    if (!ran) {
      std::fprintf(stderr,
                   "memra-kernel-bench: --only %s names no shape (qkv, gate, down, output)\n",
                   only_shape.c_str());
      return 2;
    }
    out["copy_tb_per_s"] = copy;
    out["results"] = b.rows;
    out["shapes"] = shapes == &bench::kShapes8b ? "qwen3-8b" : "qwen3-0.6b";
    if (!tokens_given) {
      out["attention"] = bench::run_attention(stream, copy);
      out["sampling"] = bench::run_sampling(stream);
      out["moe"] = bench::run_moe(stream, copy);
      out["delta_rule"] = bench::run_delta_rule(stream);
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "memra-kernel-bench: %s\n", e.what());
    return 1;
  }
}
