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
  // Throws Error naming the cuBLASLt failure or a bad MEMRA_FAST_MIN_TOKENS.
  FastGemm();
  ~FastGemm();
  FastGemm(const FastGemm&) = delete;
  FastGemm& operator=(const FastGemm&) = delete;

  // Steps of more than this many tokens take the fast path by default. Below it each matrix's f16
  // copy costs more than cuBLASLt saves: 8B Q4_K_M prefill, one step a prompt, canonical against
  // fast (tok/s, H100, receipts/2026-12-05-bench-qwen3-8b-q4_k_m-{long-prompts,fast}-h100.json):
  // 512 tokens 21,939 / 17,123, 1,024 21,625 / 20,880, 2,048 20,177 / 21,518, 4,096 17,289 /
  // 19,679 (on the H200 at 512: 21,816 / 18,515). It also keeps every decode step (64 tokens or
  // fewer) and its graph on the canonical kernels.
  static constexpr int64_t kDefaultMinTokens = 1024;
  // MEMRA_FAST_MIN_TOKENS (64 to 2^20) when set, else kDefaultMinTokens: where the copy pays
  // depends on the GPU's bandwidth and the matrices' types. Never under 64, so that decode steps
  // (64 tokens or fewer) and their graphs stay canonical. Throws Error naming a bad value.
  static int64_t min_tokens_from_env();
  // The largest f16 copy of one matrix it makes (larger matrices stay on the canonical kernels).
  static constexpr size_t kMaxCopyBytes = size_t{1} << 30;

  // Whether matmul() takes these outputs (every one a tiled Q4_K, Q6_K or Q8_0 matrix, where the
  // path pays; n_tokens > min_tokens), and the bytes of the largest copy (its `w16` buffer).
  static bool takes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, int64_t n_tokens,
                    int64_t min_tokens);
  bool takes(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, int64_t n_tokens) const {
    return takes(outs, n_outs, n_in, n_tokens, min_tokens_);
  }
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
  int64_t min_tokens_;  // min_tokens_from_env() at construction
};

}  // namespace memra::cuda
