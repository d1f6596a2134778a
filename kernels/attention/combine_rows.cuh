// The split plan's combine for decode steps of 17-64 tokens that also writes its output's rows form
// for the o projection (MEMRA_COMBINE_ROWS=1, opt-in, written in the fifty-fifth round;
// attention.cu picks it, the CUDA backend hands the rows to the products: kernels/row_max.h's x's
// rows form). Private to kernels/attention.
//
// Why. At 64 sequences the combine (2,048 blocks, one a token and head) took 7.7 us a layer and
// the products' own preparation of o's input (`x_to_f16`, 64 blocks) 4.0 more on the H100
// (fifty-fifth round's c64 step): two launches and two passes over a row for ~1 MB. Here a block
// takes a token's whole row: it merges every head's partials, writes out, and converts the row
// from shared memory, as the gated activation's register form does for down (elementwise.cu).
// Predicted ~6 us a layer at 64 tokens. At one sequence one block would serialize both steps (the
// twenty-second round's one-block form lost there), so only steps of more than 16 tokens take it.
//
// The same bits. Each output element is the combine kernel's: its head's partials merged in split
// order with merge_weights / merge_value from the first live split's (M, L, O), then O / L
// (__fdiv_rn). The row's largest |out| is exact in any order, and each 32-element group's f16
// values and sum are x_to_f16's steps (prepare_x.cuh: row_scale, group_values_to_f16) on the
// same values. kernel-check compares it with the combine and the products' own preparation.
#pragma once

#include "kernels/attention/attention_split.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels::detail {

constexpr int kCombineRowsThreads = matmul_detail::kXThreads;  // block_max's shape: 256
// A row of at most this many elements: one 32-element group a thread for the conversion.
constexpr int kCombineRowsMaxDim = 32 * kCombineRowsThreads;

// Block t: token t (select 0) of a row of n_heads x D elements, kPer elements a thread (element
// e = thread + 256 j, j < kPer; kPer x 256 >= n_heads x D). Dynamic shared memory: the row's
// floats.
template <int D, int kPer>
__global__ void __launch_bounds__(kCombineRowsThreads)
    attention_combine_rows_kernel(const float* partials, const int32_t* positions, int32_t window,
                                  int n_heads, int n_splits, float* out, uint16_t* xh, float* xsum,
                                  int xsum_stride, float* xinv) {
  detail::wait_for_inputs();
  extern __shared__ float combine_row[];
  __shared__ float warp_max_smem[kCombineRowsThreads / 32];
  const int t = static_cast<int>(blockIdx.x);
  const int dim = n_heads * D;
  const KeyRange range = key_range(positions[t], window);
  const bool bad = range.last >= n_splits;  // a caller bug: NaN, as the combine writes
  const float* token_part = partials + int64_t{t} * n_heads * n_splits * (D + 2);
  float M[kPer], L[kPer], O[kPer];
  // Each element's head's partials in split order (the loads of a split for all kPer elements
  // issued together).
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = static_cast<int>(threadIdx.x) + j * kCombineRowsThreads;
    M[j] = 0.0f, L[j] = 1.0f, O[j] = 0.0f;
    if (e >= dim || bad) continue;
    const float* ps = token_part + (int64_t{e / D} * n_splits + range.first) * (D + 2);
    M[j] = ps[D], L[j] = ps[D + 1], O[j] = ps[e % D];
  }
  for (int s = range.first + 1; !bad && s <= range.last; ++s) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = static_cast<int>(threadIdx.x) + j * kCombineRowsThreads;
      if (e >= dim) continue;
      const float* ps = token_part + (int64_t{e / D} * n_splits + s) * (D + 2);
      float a, b;
      merge_weights(M[j], L[j], ps[D], ps[D + 1], a, b);
      O[j] = merge_value(O[j], ps[e % D], a, b);
    }
  }
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = static_cast<int>(threadIdx.x) + j * kCombineRowsThreads;
    if (e >= dim) continue;
    const float v = bad ? __int_as_float(0x7fffffff) : __fdiv_rn(O[j], L[j]);
    out[int64_t{t} * dim + e] = v;
    combine_row[e] = v;
    m = fmaxf(m, fabsf(v));
  }
  // (block_max's barrier also publishes combine_row.)
  const float scale = matmul_detail::row_scale(matmul_detail::block_max(m, warp_max_smem), t, xinv);
  const int g = static_cast<int>(threadIdx.x);
  if (g < dim / 32)
    matmul_detail::group_values_to_f16<true>(
        *reinterpret_cast<const float(*)[32]>(combine_row + 32 * g), scale, t, g, dim, nullptr, xh,
        xsum, xsum_stride);
}

}  // namespace memra::kernels::detail
