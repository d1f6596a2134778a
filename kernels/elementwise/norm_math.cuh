// Private to kernels/: the RMS norm's rounding steps, shared by the norm kernels (norm.cu) and
// the fused attention prologue (attention/qk_prologue.cu) so that both give the same bits.
#pragma once

#include <cstdint>

namespace memra::kernels::detail {

// sum plus the squares of up to 4 consecutive elements, added one by one in order (a norm
// thread's running sum over its chunks).
__device__ __forceinline__ float add_squares(float sum, const float* v, int n) {
  for (int k = 0; k < n; ++k) sum = __fadd_rn(sum, __fmul_rn(v[k], v[k]));
  return sum;
}

// Every lane ends with the same bits (each step adds the same two values, commutatively).
__device__ __forceinline__ float warp_butterfly_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Returns 1 / sqrt(mean + eps) computed as the CPU reference does (sum / dim, + eps, sqrt,
// reciprocal), with IEEE-rounded division and sqrt.
__device__ __forceinline__ float inv_rms(float sum_sq, int64_t dim, float eps) {
  const float mean = __fdiv_rn(sum_sq, static_cast<float>(dim));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
}

// y = x * inv * w as two rounded products in the reference's order (w: the weight's element i,
// or no weight).
__device__ __forceinline__ float norm_out_w(float x, float inv, float w, bool has_w) {
  const float v = __fmul_rn(x, inv);
  return has_w ? __fmul_rn(v, w) : v;
}
__device__ __forceinline__ float norm_out(float x, float inv, const float* w, int64_t i) {
  return norm_out_w(x, inv, w ? w[i] : 0.0f, w != nullptr);
}

}  // namespace memra::kernels::detail
