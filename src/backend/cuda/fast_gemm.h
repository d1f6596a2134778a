// The cuBLASLt half of `--deterministic off` (kernels.h, "matmul, fast mode"): y = W x with W a
// plain f16 [n_out][n_in] matrix and x f16 [n_tokens][n_in], f32 accumulation and output. Not
// batch-invariant: cuBLASLt picks its algorithm (and so its summation order) per shape.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/kernels.h"

namespace memra::cuda {

class FastGemm {
 public:
  FastGemm();  // throws Error naming the cuBLASLt failure
  ~FastGemm();
  FastGemm(const FastGemm&) = delete;
  FastGemm& operator=(const FastGemm&) = delete;

  // Steps of more than this many tokens take the fast path (the canonical kernels' decode range
  // stays on them, so decode steps and their graphs are the deterministic ones).
  static constexpr int64_t kMinTokens = 64;
  // The largest f16 copy of one matrix it makes (larger matrices stay on the canonical kernels).
  static constexpr size_t kMaxCopyBytes = size_t{1} << 30;

  // Whether matmul() takes these outputs (every one a tiled Q4_K, Q6_K or Q8_0 matrix, where the
  // path pays; n_tokens > kMinTokens), and the bytes of the largest copy (its `w16` buffer).
  static bool takes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, int64_t n_tokens);
  static size_t copy_bytes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in);

  // matmul_shared_x's contract without its invariance: x prepared once in scratch
  // (matmul_scratch_bytes), then per output its f16 copy in w16, one GEMM, and the rows' scaling.
  void matmul(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
              int64_t n_tokens, void* scratch, void* w16, cudaStream_t stream);

 private:
  // y[t][o] = sum_i w[o][i] * x[t][i] for t < n_tokens, o < n_out; y rows at stride ldy floats.
  // Every pointer is device memory, 16-byte aligned; n_in a multiple of 8.
  void run(const void* w, const void* x, float* y, int64_t n_out, int64_t n_tokens, int64_t n_in,
           int64_t ldy, cudaStream_t stream);

  struct Lt;
  std::unique_ptr<Lt> lt_;
};

}  // namespace memra::cuda
