// Ceiling measurements: a device-to-device copy and a cuBLASLt bf16 GEMM, each event-timed call by
// call after enough warm-up calls for the clocks to settle.
#include "backend/cuda/ceilings.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/cuda_runtime.h"
#include "core/error.h"

namespace memra::cuda {

namespace {

constexpr int kWarmup = 5;
constexpr int kGemmDim = 8192;
constexpr size_t kCopyBytes = size_t{2} << 30;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCode::internal, "{}: {} ({})", what, cublasLtGetStatusString(status),
         cublasLtGetStatusName(status));
}

// Milliseconds of each of `runs` calls of launch() after kWarmup untimed ones.
template <typename F>
std::vector<double> time_calls_ms(const Stream& stream, int runs, F&& launch) {
  Event start, end;
  for (int i = 0; i < kWarmup; ++i) launch();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    start.record(stream);
    launch();
    end.record(stream);
    ms.push_back(Event::elapsed_ms(start, end));
  }
  return ms;
}

// Uniform bf16 values in [-1, 1): the top 16 bits of floats built from xorshift bits.
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint16_t& v : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // Exponent of 1.0 with random mantissa gives [1, 2); subtract 1.5 and double: [-1, 1).
    const uint32_t bits = 0x3F800000u | static_cast<uint32_t>(x >> 41);
    float f;
    std::memcpy(&f, &bits, 4);
    f = (f - 1.5f) * 2.0f;
    uint32_t fb;
    std::memcpy(&fb, &f, 4);
    v = static_cast<uint16_t>(fb >> 16);
  }
  return out;
}

// cuBLASLt handles and layouts for D = A B, all kGemmDim square, column-major, bf16, with the
// algorithm its heuristic ranks first; destroyed in reverse order of creation.
struct LtGemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};

  LtGemm() {
    lt_check(cublasLtCreate(&handle), "cublasLtCreate");
    lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
    lt_check(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, kGemmDim, kGemmDim, kGemmDim),
             "matrix layout");
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "matmul preference");
    const size_t ws = kWorkspaceBytes;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws)),
             "workspace preference");
    int found = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(handle, op, layout, layout, layout, layout, pref, 1,
                                            &algo, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) fail(ErrorCode::unsupported, "cuBLASLt has no bf16 GEMM algorithm here");
  }
  ~LtGemm() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(handle);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
};

}  // namespace

std::vector<double> measure_copy_tb_s(int ordinal, int runs) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  Stream stream;
  DeviceBuffer a(kCopyBytes), b(kCopyBytes);
  check(cudaMemsetAsync(a.data(), 1, kCopyBytes, stream.get()), "memset copy source");
  const std::vector<double> ms = time_calls_ms(stream, runs, [&] {
    check(cudaMemcpyAsync(b.data(), a.data(), kCopyBytes, cudaMemcpyDeviceToDevice, stream.get()),
          "device-to-device copy");
  });
  std::vector<double> out;
  for (double m : ms) out.push_back(2.0 * static_cast<double>(kCopyBytes) / (m * 1e-3) / 1e12);
  return out;
}

std::vector<double> measure_bf16_tflops(int ordinal, int runs) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  Stream stream;
  const size_t n = size_t{kGemmDim} * kGemmDim;
  DeviceBuffer a(n * 2), b(n * 2), d(n * 2), workspace(kWorkspaceBytes);
  for (auto [buf, seed] : {std::pair{&a, 1ull}, std::pair{&b, 2ull}}) {
    const std::vector<uint16_t> host = random_bf16(n, seed);
    check(cudaMemcpy(buf->data(), host.data(), n * 2, cudaMemcpyHostToDevice), "upload operand");
  }
  LtGemm g;
  const float alpha = 1.0f, beta = 0.0f;
  const std::vector<double> ms = time_calls_ms(stream, runs, [&] {
    lt_check(cublasLtMatmul(g.handle, g.op, &alpha, a.data(), g.layout, b.data(), g.layout, &beta,
                            d.data(), g.layout, d.data(), g.layout, &g.algo.algo, workspace.data(),
                            kWorkspaceBytes, stream.get()),
             "cublasLtMatmul");
  });
  const double flops = 2.0 * kGemmDim * double{kGemmDim} * kGemmDim;
  std::vector<double> out;
  for (double m : ms) out.push_back(flops / (m * 1e-3) / 1e12);
  return out;
}

}  // namespace memra::cuda
