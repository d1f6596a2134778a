// Private to kernels/: rope's per-token angle table and pair rotation, shared by the rope kernel
// and the fused attention prologue (attention/qk_prologue.cu) so that both round every step the
// same way (the CPU reference's expression: theta = position * inv_freq[i] in double, cos and sin
// in double rounded to float, then separately rounded products and sum).
#pragma once

#include <cstdint>

namespace memra::kernels::detail {

// cos_t[i], sin_t[i] for i < half, the work strided over n_threads threads (the caller syncs).
__device__ __forceinline__ void rope_table(float* cos_t, float* sin_t, int half, int32_t position,
                                           const double* inv_freq, int tid, int n_threads) {
  const double pos = static_cast<double>(position);
  for (int i = tid; i < half; i += n_threads) {
    double s, c;
    sincos(pos * inv_freq[i], &s, &c);
    cos_t[i] = static_cast<float>(c);
    sin_t[i] = static_cast<float>(s);
  }
}

// The rotated pair (a, b) by the angle of table entry i.
__device__ __forceinline__ float2 rope_rotate(float a, float b, float c, float s) {
  return make_float2(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)),
                     __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
}

// The pair of dims rotated by entry i: neox (i, i + half), normal (2i, 2i + 1).
__device__ __forceinline__ int2 rope_pair(int i, int half, bool neox) {
  return neox ? make_int2(i, i + half) : make_int2(2 * i, 2 * i + 1);
}

}  // namespace memra::kernels::detail
