// The split plan's combine for a step a matmul reads next (private to attention.cu): one block a
// token merges every head's split partials into out, with attention_combine_kernel's arithmetic
// element by element, then prepares the row as the matmul's f16 input (matmul_detail::prepare_row,
// x_to_f16's steps): one launch where the decode step had two (the combine, then the output
// projection's x_to_f16), and the same bits in out and in the prepared row (kernel-check: the
// products over it against products that prepare out themselves).
//
// A head's merge rescales each split's partial by factors that depend on (m, l) only, so they are
// computed once a head (phase 1, in shared memory) instead of once an element as the plain combine
// does; every element then walks its splits in the same order with the same two products a step:
// the same values. The partials' loads are issued kBatch splits at a time, so a thread's memory
// round trips do not grow with its elements.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_split.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels::detail {

// Shared memory of the kernel: [n_heads][n_splits] (a, b) factors and [n_heads] final L.
__host__ __device__ constexpr int64_t combine_prepare_smem(int n_heads, int n_splits) {
  return int64_t{n_heads} * n_splits * 8 + int64_t{n_heads} * 4;
}

template <int D>
__global__ void __launch_bounds__(matmul_detail::kXThreads)
    attention_combine_prepare_kernel(const float* partials, const int32_t* positions,
                                     int32_t window, int n_heads, int n_splits, float* out,
                                     matmul_detail::PreparedRows prep) {
  detail::wait_for_inputs();
  constexpr int kThreads = matmul_detail::kXThreads, kBatch = 8;
  extern __shared__ float2 combine_factors[];  // [n_heads][n_splits], then L per head
  __shared__ float warp_max[kThreads / 32];
  float* final_l = reinterpret_cast<float*>(combine_factors + int64_t{n_heads} * n_splits);
  const int t = static_cast<int>(blockIdx.x), dim = n_heads * D;
  const KeyRange range = key_range(positions[t], window);
  const bool bad = range.last >= n_splits;  // a caller bug: NaN, as the plain combine
  const int n = bad ? 0 : range.last - range.first + 1;
  const float* base =
      partials + int64_t{t} * n_heads * n_splits * (D + 2) + int64_t{range.first} * (D + 2);
  // Phase 1: a head's (M, L) chain over its splits, keeping each step's factors.
  for (int h = threadIdx.x; h < n_heads && n > 0; h += kThreads) {
    const float* part = base + int64_t{h} * n_splits * (D + 2);
    float2* f = combine_factors + int64_t{h} * n_splits;
    float M = part[D], L = part[D + 1];
    for (int s0 = 1; s0 < n; s0 += kBatch) {
      float2 ml[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (s0 + i < n) {
          const float* ps = part + int64_t{s0 + i} * (D + 2);
          ml[i] = make_float2(ps[D], ps[D + 1]);
        }
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (s0 + i < n) {
          float a, b;
          merge_weights(M, L, ml[i].x, ml[i].y, a, b);
          f[s0 + i] = make_float2(a, b);
        }
    }
    final_l[h] = L;
  }
  __syncthreads();
  // Phase 2: each element's O chain in split order, then O / L into the row.
  float* row = out + int64_t{t} * dim;
  float m = 0.0f;
  for (int e = threadIdx.x; e < dim; e += kThreads) {
    const int h = e / D, d = e % D;
    float v = __int_as_float(0x7fffffff);
    if (n > 0) {
      const float* part = base + int64_t{h} * n_splits * (D + 2) + d;
      const float2* f = combine_factors + int64_t{h} * n_splits;
      float O = part[0];
      for (int s0 = 1; s0 < n; s0 += kBatch) {
        float o[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
          if (s0 + i < n) o[i] = part[int64_t{s0 + i} * (D + 2)];
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
          if (s0 + i < n) O = merge_value(O, o[i], f[s0 + i].x, f[s0 + i].y);
      }
      v = __fdiv_rn(O, final_l[h]);
    }
    row[e] = v;
    m = fmaxf(m, fabsf(v));
  }
  __syncthreads();  // the row is written: prepare_row reads it back
  matmul_detail::prepare_row(row, m, t, dim, prep, warp_max);
}

}  // namespace memra::kernels::detail
