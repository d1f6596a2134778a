// cuBLASLt for the fast matmul: one handle and workspace per backend, and one plan (descriptors
// and the heuristic's first algorithm) per shape, made on first use. A decode graph never reaches
// here (steps over its token bound, never a decode step's 64 or fewer), but nothing here would
// break a capture: the heuristic query is host work, and cublasLtMatmul is stream-ordered with its
// workspace preallocated.
#include "backend/cuda/fast_gemm.h"

#include <cublasLt.h>

#include <algorithm>

#include "core/env.h"
#include "core/error.h"

namespace memra::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCode::internal, "cuBLASLt {}: {} ({})", what, cublasLtGetStatusString(status),
         cublasLtGetStatusName(status));
}

}  // namespace

struct FastGemm::Lt {
  struct Plan {
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  void* workspace = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Plan> plans;

  static void destroy(Plan& p) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  }
  ~Lt() {
    for (auto& [shape, p] : plans) destroy(p);
    if (workspace) (void)cudaFree(workspace);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }

  // Column-major terms: D (n_out x n_tokens, ld ldy) = A^T B with A the weights as
  // (n_in x n_out, ld n_in) and B = x as (n_in x n_tokens, ld n_in).
  const Plan& plan(int64_t n_out, int64_t n_tokens, int64_t n_in, int64_t ldy) {
    const auto key = std::make_tuple(n_out, n_tokens, n_in, ldy);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    Plan p;
    cublasStatus_t status = cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, n_in, n_out, n_in);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, n_in, n_tokens, n_in);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, n_out, n_tokens, ldy);
    cublasLtMatmulPreference_t pref = nullptr;
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceCreate(&pref);
    const uint64_t ws = kWorkspaceBytes;
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS)
      status =
          cublasLtMatmulAlgoGetHeuristic(handle, op, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (status == CUBLAS_STATUS_SUCCESS && found == 0) status = CUBLAS_STATUS_NOT_SUPPORTED;
    if (status != CUBLAS_STATUS_SUCCESS) {
      destroy(p);
      fail(ErrorCode::internal, "cuBLASLt has no f16 GEMM for {} x {} x {}: {}", n_out, n_tokens,
           n_in, cublasLtGetStatusString(status));
    }
    p.algo = result.algo;
    return plans.emplace(key, p).first->second;
  }
};

int64_t FastGemm::min_tokens_from_env() {
  return env_int("MEMRA_FAST_MIN_TOKENS", 64, int64_t{1} << 20, kDefaultMinTokens);
}

FastGemm::FastGemm() : lt_(std::make_unique<Lt>()), min_tokens_(min_tokens_from_env()) {
  lt_check(cublasLtCreate(&lt_->handle), "create");
  lt_check(cublasLtMatmulDescCreate(&lt_->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  lt_check(cublasLtMatmulDescSetAttribute(lt_->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                          sizeof(transpose)),
           "transpose attribute");
  if (cudaMalloc(&lt_->workspace, kWorkspaceBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    lt_->workspace = nullptr;
    fail(ErrorCode::resource_exhausted, "cannot allocate the {} bytes of cuBLASLt workspace",
         kWorkspaceBytes);
  }
}

FastGemm::~FastGemm() = default;

bool FastGemm::takes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, int64_t n_tokens,
                     int64_t min_tokens) {
  if (n_tokens <= min_tokens || n_outs <= 0) return false;
  for (int i = 0; i < n_outs; ++i) {
    // Only the quantized types: F16/BF16 have copies too, but the canonical wgmma kernel beats
    // the copy's write plus cuBLASLt there (8B gate at 512 tokens on the H200: 143 vs 176 us;
    // Q4_K 444 vs 159).
    const DType d = outs[i].wtype;
    const bool quantized = d == DType::q4_k || d == DType::q6_k || d == DType::q8_0;
    if (!quantized || !kernels::matmul_dequant_supported(d, outs[i].layout)) return false;
  }
  return copy_bytes(outs, n_outs, n_in) <= kMaxCopyBytes;
}

size_t FastGemm::copy_bytes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in) {
  size_t bytes = 0;
  for (int i = 0; i < n_outs; ++i)
    bytes = std::max(bytes, static_cast<size_t>(outs[i].n_out * n_in) * 2);
  return bytes;
}

void FastGemm::matmul(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                      int64_t n_tokens, void* scratch, void* w16, cudaStream_t stream) {
  const kernels::PreparedX px = kernels::matmul_prepare_x(x, n_tokens, n_in, scratch, stream);
  for (int i = 0; i < n_outs; ++i) {
    const kernels::MatmulOut& o = outs[i];
    if (o.n_out == 0) continue;
    kernels::matmul_dequant_f16(o.wtype, o.w, n_in, o.n_out, w16, stream);
    run(w16, px.xh, o.y, o.n_out, n_tokens, n_in, o.ldy, stream);
    kernels::scale_rows(o.y, px.xinv, n_tokens, o.n_out, o.ldy, stream);
  }
}

void FastGemm::run(const void* w, const void* x, float* y, int64_t n_out, int64_t n_tokens,
                   int64_t n_in, int64_t ldy, cudaStream_t stream) {
  if (n_out <= 0 || n_tokens <= 0) return;
  const Lt::Plan& p = lt_->plan(n_out, n_tokens, n_in, ldy);
  const float alpha = 1.0f, beta = 0.0f;
  lt_check(cublasLtMatmul(lt_->handle, lt_->op, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d,
                          &p.algo, lt_->workspace, kWorkspaceBytes, stream),
           "matmul");
}

}  // namespace memra::cuda
