// Private to kernels/: one row of the RMS norm (and the fused residual add) by a block of
// kNormThreads threads, shared by the norm kernels (norm.cu: the plain ones and Gemma's fused
// chains) and the norm that also prepares the matmul input (matmul/matmul.cu), so all compute
// every y with the same steps. The sum of squares is reduced in an order that depends on dim alone
// (per-thread chunks of 4, warp xor tree, then the 8 warp sums in index order), so a row's result
// is the same in any batch.
#pragma once

#include <cstdint>

#include "kernels/elementwise/norm_math.cuh"

namespace memra::kernels::detail {

constexpr int kNormThreads = 256;
constexpr int kNormWarps = kNormThreads / 32;

// Thread `tid` owns the 4-element chunks c = tid, tid + 256, ... (elements 4c..4c+3, clipped to
// dim) and adds their squares in that order. The chunking is the same whether or not rows are
// 16-byte aligned, so alignment never changes the reduction order.
__device__ __forceinline__ float norm_block_sum(float v, float* warp_sums) {
  v = warp_butterfly_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kNormWarps; ++w) total += warp_sums[w];  // every thread, same order
  return total;
}

// Up to 4 elements of chunk c of a row: one 16-byte access when the row allows it, else scalar.
__device__ __forceinline__ int load4(const float* p, int64_t c, int64_t dim, bool vec, float v[4]) {
  if (vec) {
    const float4 t = reinterpret_cast<const float4*>(p)[c];
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    return 4;
  }
  const int n = static_cast<int>(min(int64_t{4}, dim - 4 * c));
  for (int k = 0; k < n; ++k) v[k] = p[4 * c + k];
  return n;
}

__device__ __forceinline__ void store4(float* p, int64_t c, bool vec, const float v[4], int n) {
  if (vec) {
    reinterpret_cast<float4*>(p)[c] = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
  for (int k = 0; k < n; ++k) p[4 * c + k] = v[k];
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The first pass over a row: x's chunks (replaced by x + d when d is not null, then times s when
// kScaled, each step rounded alone as the add and scale kernels round it, and stored back to x),
// their sum of squares, and 1 / rms of the row. Every caller's reduction is this one.
template <bool kScaled = false>
__device__ __forceinline__ float norm_row_inv(float* xr, const float* dr, float s, int64_t dim,
                                              float eps, bool vec, float* warp_sums) {
  const int64_t n_chunks = (dim + 3) / 4;
  float sum = 0.0f;
  float v[4], dv[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = load4(xr, c, dim, vec, v);
    if (dr || kScaled) {
      if (dr) {
        load4(dr, c, dim, vec, dv);
        for (int k = 0; k < n; ++k) v[k] = __fadd_rn(v[k], dv[k]);
      }
      if constexpr (kScaled)
        for (int k = 0; k < n; ++k) v[k] = __fmul_rn(v[k], s);
      store4(xr, c, vec, v, n);
    }
    sum = add_squares(sum, v, n);
  }
  return inv_rms(norm_block_sum(sum, warp_sums), dim, eps);
}

// The second pass: y = x * inv * w over the thread's chunks; returns the largest |y| it wrote
// (fmaxf: NaN never wins). The thread rereads only the x it wrote itself in the first pass.
__device__ __forceinline__ float norm_row_out(const float* xr, const float* w, float inv,
                                              int64_t dim, bool vec, float* yr) {
  const int64_t n_chunks = (dim + 3) / 4;
  float m = 0.0f;
  float v[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = load4(xr, c, dim, vec, v);
    for (int k = 0; k < n; ++k) {
      v[k] = norm_out(v[k], inv, w, 4 * c + k);
      m = fmaxf(m, fabsf(v[k]));
    }
    store4(yr, c, vec, v, n);
  }
  return m;
}

// Row `row` of x (d == nullptr: plain rms_norm; else x += d first, stored back to x) into y;
// returns the largest |y| among the elements this thread wrote. Each thread rereads only the
// elements it wrote itself, so no extra barrier is needed.
__device__ __forceinline__ float norm_row(float* x, const float* d, const float* w, int64_t dim,
                                          float eps, float* y, int64_t row, float* warp_sums) {
  float* xr = x + row * dim;
  const float* dr = d ? d + row * dim : nullptr;
  float* yr = y + row * dim;
  const bool vec = dim % 4 == 0 && aligned16(xr) && aligned16(yr) && (!dr || aligned16(dr));
  const float inv = norm_row_inv(xr, dr, 1.0f, dim, eps, vec, warp_sums);
  return norm_row_out(xr, w, inv, dim, vec, yr);
}

}  // namespace memra::kernels::detail
