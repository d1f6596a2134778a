// Private to kernels/: the f16 form of a row of x that matmul's tensor-core kernels read, written
// by prepare_x.cu's x_to_f16 from x, or by a norm kernel from the y it has just written
// (prepare_x.cu's norm_to_f16, the fused norms of elementwise/norm.cu), so that the next matmul
// over y skips preparing it (kernels.h: rms_norm_for_matmul, kPreparedRows). One definition keeps
// every writer's bits the same.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

// One block per token row. The row's largest |x| (exact in any order) picks the power of two;
// then thread i rounds 32-element group i (the last may hold 16) to f16 and sums the rounded
// values in the group sum's order (half_sum). The f16 row goes to xh in element order and/or to xp
// in physical k order (within each 16 elements, 0, 1, 4, 5, 8, 9, 12, 13, then 2, 3, 6, 7, 10, 11,
// 14, 15) at xp_offset's places, the wgmma prefill kernel's tiles, or (kRows) at x_rows_offset's,
// plain rows (matmul_launch.cuh: x's rows form).
constexpr int kXThreads = 256;

// The larger of m and f's largest |element| (fmaxf: a NaN never wins; exact in any order).
__device__ __forceinline__ float max_abs(float m, float4 f) {
  return fmaxf(m, fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w))));
}

// The block's largest of its threads' m (warp_max: kXThreads / 32 floats of shared memory).
__device__ __forceinline__ float block_max(float m, float* warp_max) {
  return detail::block_max<kXThreads>(m, warp_max);
}

// The power of two a row is scaled by before its f16 rounding, as its exponent: m * 2^shift lies
// in [2^14, 2^15) (m = f * 2^e with f in [0.5, 1), shift = 15 - e; 0 for a zero or non-finite m).
__device__ __forceinline__ int row_shift(float m) {
  int e = 0;
  if (m > 0.0f && m <= 3.4e38f) (void)frexpf(m, &e);
  return m > 0.0f && m <= 3.4e38f ? 15 - e : 0;
}
// The scale 2^shift itself; thread 0 writes its inverse to xinv[row].
__device__ __forceinline__ float row_scale(float m, int64_t row, float* xinv) {
  const int shift = row_shift(m);
  if (threadIdx.x == 0) xinv[row] = ldexpf(1.0f, -shift);
  return ldexpf(1.0f, shift);
}

// The group sum's order, which every writer of a group sum and the products that make it
// themselves (one_token_x.cuh: XRaw) share: each run of four rounded values summed in element
// order, the four runs of a 16-element half as (r0 + r1) + (r2 + r3), and a group's two halves
// as h0 + h1 (a 16-element group's sum is its h0). A tree, so that the 32 lanes holding a chunk's
// 64 float4s (one run each) finish a sum in three shuffle steps instead of a quad re-reading and
// walking 32 elements (sixty-sixth round, docs/PERFORMANCE.md: the Q4_K down product's raw x
// +0.9% -> +2.8% on the 8B at one sequence).
__device__ __forceinline__ float run_sum(float e0, float e1, float e2, float e3) {
  return __fadd_rn(__fadd_rn(__fadd_rn(e0, e1), e2), e3);
}
__device__ __forceinline__ float half_sum(const float (&e16)[16]) {
  float r[4];
#pragma unroll
  for (int q = 0; q < 4; ++q)
    r[q] = run_sum(e16[4 * q], e16[4 * q + 1], e16[4 * q + 2], e16[4 * q + 3]);
  return __fadd_rn(__fadd_rn(r[0], r[1]), __fadd_rn(r[2], r[3]));
}

// Elements [k0, k0 + 16) of row `row`, already times the row's scale: rounded to f16 in place,
// written to xh (element order) and/or xp (physical k order; kRows: the rows form). h: which half
// of its group [k0, k0 + 16) is; sum: the group's sum so far (the first half's half_sum, then
// h0 + h1).
template <bool kRows = false>
__device__ __forceinline__ void half_group_to_f16(float (&e16)[16], int64_t row, int k0, int n_in,
                                                  uint16_t* xh, uint16_t* xp, int h, float& sum) {
#pragma unroll
  for (int i = 0; i < 16; ++i) e16[i] = __half2float(__float2half_rn(e16[i]));
  const float half = half_sum(e16);
  sum = h == 0 ? half : __fadd_rn(sum, half);
  if (xh != nullptr) {
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = pack_f16(e16[2 * i], e16[2 * i + 1]);
    uint4* dst = reinterpret_cast<uint4*>(xh + row * n_in + k0);
    dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
    dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
  if (xp != nullptr) {
    uint32_t o[8];  // pair i: elements 4 (i % 4) + 2 (i / 4), + 1
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int el = 4 * (i & 3) + 2 * (i >> 2);
      o[i] = pack_f16(e16[el], e16[el + 1]);
    }
    // Indexed through a uint4 pointer, each piece is one 16-byte store; the same store through a
    // cast element pointer came out as four 4-byte stores (PTX). k0 is a multiple of 8, so each
    // piece's offset is too.
    uint4* dst = reinterpret_cast<uint4*>(xp);
    const auto at = [&](int k) {
      return kRows ? x_rows_offset(row, k, n_in) : xp_offset(row, k, n_in);
    };
    dst[at(k0) / 8] = make_uint4(o[0], o[1], o[2], o[3]);
    dst[at(k0 + 8) / 8] = make_uint4(o[4], o[5], o[6], o[7]);
  }
}

// Group g (32 elements, the last may hold 16) of row `row` (src: its n_in floats, 16-byte
// aligned) times scale, to f16 (half_group_to_f16) and its sum to xsum; kLdg reads src through the
// read-only cache (rows no kernel of this launch writes).
template <bool kLdg, bool kRows = false>
__device__ __forceinline__ void group_to_f16(const float4* src, float scale, int64_t row, int g,
                                             int n_in, uint16_t* xh, uint16_t* xp, float* xsum,
                                             int xsum_stride) {
  const int n = min(32, n_in - 32 * g);
  float sum = 0.0f;
  for (int h = 0; h < n / 16; ++h) {
    const int k0 = 32 * g + 16 * h;
    float e16[16];
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float4 f = kLdg ? __ldg(src + k0 / 4 + v) : src[k0 / 4 + v];
      e16[4 * v] = f.x * scale;
      e16[4 * v + 1] = f.y * scale;
      e16[4 * v + 2] = f.z * scale;
      e16[4 * v + 3] = f.w * scale;
    }
    half_group_to_f16<kRows>(e16, row, k0, n_in, xh, xp, h, sum);
  }
  xsum[row * xsum_stride + g] = sum;
}

// The f16 form of row `row` (x_row: its n_in floats, 16-byte aligned) from its largest |x| m.
template <bool kLdg, bool kRows = false>
__device__ __forceinline__ void row_to_f16(const float* x_row, float m, int64_t row, int n_in,
                                           uint16_t* xh, uint16_t* xp, float* xsum, int xsum_stride,
                                           float* xinv) {
  const float4* src = reinterpret_cast<const float4*>(x_row);
  const float scale = row_scale(m, row, xinv);
  for (int g = threadIdx.x; g < xsum_stride; g += kXThreads)
    group_to_f16<kLdg, kRows>(src, scale, row, g, n_in, xh, xp, xsum, xsum_stride);
}

// Group g of row `row` (32 elements, fewer at the row's end: v, not yet scaled) times scale, to
// f16 (half_group_to_f16) and its sum to xsum: group_to_f16's steps on values a thread already
// holds (in registers, or in shared memory its block wrote).
template <bool kRows>
__device__ __forceinline__ void group_values_to_f16(const float (&v)[32], float scale, int64_t row,
                                                    int g, int n_in, uint16_t* xh, uint16_t* xp,
                                                    float* xsum, int xsum_stride) {
  const int n = min(32, n_in - 32 * g);
  float sum = 0.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (16 * h >= n) continue;
    float e16[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) e16[i] = v[16 * h + i] * scale;
    half_group_to_f16<kRows>(e16, row, 32 * g + 16 * h, n_in, xh, xp, h, sum);
  }
  xsum[row * xsum_stride + g] = sum;
}

// The register form of x_to_f16's row (as norm_row.cuh's for the norms): thread t holds the
// groups t + 256 j, j < kG, whole, loaded at once (one memory round trip instead of the max's
// pass and a reread), and converts them from registers: the same values, the same steps.
template <int kG, bool kRows = false>
__device__ __forceinline__ void row_to_f16_regs(const float* x_row, int64_t row, int n_in,
                                                uint16_t* xh, uint16_t* xp, float* xsum,
                                                int xsum_stride, float* xinv, float* warp_max) {
  const float4* src = reinterpret_cast<const float4*>(x_row);
  float v[kG][32];
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int g = threadIdx.x + j * kXThreads;
    const int n = g < xsum_stride ? min(32, n_in - 32 * g) : 0;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (4 * q < n) f = __ldg(src + 8 * g + q);
      v[j][4 * q] = f.x, v[j][4 * q + 1] = f.y, v[j][4 * q + 2] = f.z, v[j][4 * q + 3] = f.w;
    }
  }
#pragma unroll
  for (int j = 0; j < kG; ++j) {
#pragma unroll
    for (int i = 0; i < 32; ++i) m = fmaxf(m, fabsf(v[j][i]));
  }
  const float scale = row_scale(block_max(m, warp_max), row, xinv);
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int g = threadIdx.x + j * kXThreads;
    if (g < xsum_stride)
      group_values_to_f16<kRows>(v[j], scale, row, g, n_in, xh, xp, xsum, xsum_stride);
  }
}

// Where the prepared rows go in a matmul scratch buffer (matmul_scratch_bytes(n_rows, dim)
// bytes) for a norm kernel that writes them (xh null: none).
struct PreparedRows {
  uint16_t* xh = nullptr;
  float* xsum = nullptr;
  int xsum_stride = 0;
  float* xinv = nullptr;
};
// The places of n_rows prepared rows of dim in scratch, after checking what the prepared form
// needs (else Error naming `kernel`): n_rows <= kPreparedRows, dim a multiple of 16, scratch
// and every pointer in `aligned` 16-byte aligned (prepare_x.cu).
PreparedRows prepared_rows(const char* kernel, void* scratch, int64_t n_rows, int64_t dim,
                           std::initializer_list<const void*> aligned);
// The places of x's rows form of n_rows x dim in scratch (matmul_launch.cuh: x_rows_offset), as
// PreparedRows with xh holding the rows form, for the kernels that write it whole
// (kernels/row_max.h); the caller checks sizes and alignment.
PreparedRows x_rows_places(void* scratch, int64_t n_rows, int64_t dim);

// The launches that prepare x (prepare_x.cu), for matmul.cu's products.
//
// x_to_f16 over n_rows rows (rows: x row of each, null for x row r; xh and/or xp null where not
// wanted; xp_rows: xp in x's rows form).
void launch_x_to_f16(int64_t n_rows, int n_in, cudaStream_t stream, const float* x, uint16_t* xh,
                     uint16_t* xp, float* xsum, int xsum_stride, float* xinv, const int32_t* rows,
                     bool xp_rows = false);
// x's wgmma form alone by token groups (MEMRA_XP_GROUPS=0: x_to_f16 instead), from the rows'
// largest |x| in xmax (xmax_given) or found first.
bool xp_groups_enabled();
void launch_xp_groups(int n_rows, int n_in, cudaStream_t stream, const float* x, uint16_t* xp,
                      float* xsum, int xsum_stride, float* xinv, float* xmax, bool xmax_given,
                      bool xp_rows);
// Whether an n_tokens step's products read x's rows form (their wgmma kernels; MEMRA_X_ROWS=0: no;
// at 33-64 tokens unless MEMRA_X_ROWS_DECODE=0, and only where every wgmma output is one the
// pipelined Q4_K or the scaled Q6_K / Q8_0 kernel takes: matmul.cu checks that per call).
bool x_rows_enabled(int64_t n_tokens);
// Steps past this many tokens and at most kDecodeTokens read x's rows form (unless
// MEMRA_X_ROWS_DECODE=0): those whose every Q4_K, Q6_K and Q8_0 product takes wgmma
// (fold64_takes, scaled_split_takes).
constexpr int64_t kRowsDecodeMinTokens = 32;

// After a norm kernel's block wrote row `row` of y (m: the largest |y| each thread wrote; y_row
// 16-byte aligned): the row's prepared form, as x_to_f16 would make it from y.
__device__ __forceinline__ void prepare_row(const float* y_row, float m, int64_t row, int dim,
                                            const PreparedRows& p, float* warp_max) {
  row_to_f16<false>(y_row, block_max(m, warp_max), row, dim, p.xh, nullptr, p.xsum, p.xsum_stride,
                    p.xinv);
}

}  // namespace memra::kernels::matmul_detail
