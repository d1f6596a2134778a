// Private to kernels/matmul: the folded canonical order of Q4_K and Q5_K (matmul.cu).
//
// Why. A Q4_K / Q5_K weight is d * sc_j * q - dmin * m_j, with 6-bit integers sc_j and m_j per
// 32-element group j of a 256-element block and q < 32. Scaling each group's own mma chain in f32
// costs one CUDA-core FMA per row, token and group (two with the mins) beside the tensor cores'
// 32 multiply-adds: on an H200 SM as long as the tensor work itself, and the quantized wgmma
// prefill kernel reached 11% of the tensor rate that way. Here the integer scale rides in the A
// operand instead: sc_j * q <= 63 * 31 = 1953 is an exact f16 integer, so one mma chain over the
// chunk gives sum_j sc_j sum_e q_e x_e, the mins' term is one more mma step, and d and dmin are
// applied on the CUDA cores once per chunk: 17 tensor steps and 3 CUDA-core operations per row,
// token and 256 elements instead of 16 steps and 16 operations.
//
// The chunk partial of one 256-element block (kChunk), for a row and a token:
//   s = mma chain over the chunk's 16 k16 steps from +0, A = sc_j * q (f16, exact);
//   b = one k16 step from +0: A element e = m_(e % 8); B element e = the f16 hi (e < 8) or lo
//       (e >= 8) part of v = xsum_(e % 8) / 32 (the group sums of the f16 x, matmul.cu), hi =
//       f16(v), lo = f16(v - hi): hi + lo carries ~22 bits of the f32 sum, m * hi and m * lo are
//       exact, and v stays below f16's range (|x| < 2^15, 32 elements);
//   p = fma(d, s, (-32 dmin) * b).
// Every kernel computes s and b with these operands in mma.sync-equivalent steps (a wgmma k16
// step gives mma.sync's bits, matmul_prefill_wgmma.cu) and p with these two operations, so p is a
// function of the row's block and the token's x alone: batch-invariant like the other types.
#pragma once

#include "core/dtype.h"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

template <DType D>
inline constexpr bool kFold = D == DType::q4_k || D == DType::q5_k;

// A row's block header unpacked: the first 16 bytes of a Q4_K / Q5_K block (f16 d, f16 dmin,
// scales[12]), which a tiled Q4_K record keeps per row too. Byte j of sc[0] / sc[1] is sc_j /
// sc_(4 + j), the same for m: scale_min_k4 (weight_frag.cuh) for the eight groups at once.
struct FoldRow {
  uint32_t sc[2], m[2];
  float d, nb;  // d and -32 dmin
};
__device__ __forceinline__ FoldRow fold_row(const uint4& h) {
  FoldRow r;
  r.sc[0] = h.y & 0x3f3f3f3fu;
  r.sc[1] = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
  r.m[0] = h.z & 0x3f3f3f3fu;
  r.m[1] = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
  r.d = __half2float(__ushort_as_half(static_cast<unsigned short>(h.x & 0xffffu)));
  r.nb = -32.0f * __half2float(__ushort_as_half(static_cast<unsigned short>(h.x >> 16)));
  return r;
}
// The header of a raw block in shared or global memory (16-byte aligned: 144 and 176 are
// multiples of 16 and rows start aligned).
__device__ __forceinline__ FoldRow fold_row(const uint8_t* blk) {
  return fold_row(*reinterpret_cast<const uint4*>(blk));
}

// sc_j as an f16 pair (both halves), exact.
__device__ __forceinline__ uint32_t fold_scale(const FoldRow& r, int j) {
  const uint32_t k = static_cast<uint32_t>(j & 3);
  return exact_f16x2<0>(__byte_perm(j < 4 ? r.sc[0] : r.sc[1], 0u, k | (k << 8) | 0x4040u));
}
// Group j's scales in the operand form of Tiled<q4_k>::folded_frag: {sc, -1024 sc} of row g
// (low nibbles) and {sc / 16, -64 sc} of row g + 8 (high nibbles in place), f16 pairs, exact.
// The groups j & ~1 and j | 1 are decoded and scaled together as the two halves of one pair and
// j's half broadcast (an operand selector of the HFMA2 that uses it), so an unrolled chunk pays
// the scale arithmetic once per two groups.
struct FoldScales {
  uint2 g, g8;
};
__device__ __forceinline__ uint32_t fold_scale_pair(const FoldRow& r, int j) {
  const uint32_t k = static_cast<uint32_t>(j & 2);  // the even group's byte in its word
  return exact_f16x2<0>(__byte_perm(j < 4 ? r.sc[0] : r.sc[1], 0u, k | ((k + 1) << 8) | 0x4040u));
}
__device__ __forceinline__ uint32_t half_of(__half2 pair, int j) {
  return h2_bits((j & 1) ? __high2half2(pair) : __low2half2(pair));
}
__device__ __forceinline__ FoldScales fold_scales(const FoldRow& r_g, const FoldRow& r_g8, int j) {
  const __half2 s = bits_h2(fold_scale_pair(r_g, j)), s8 = bits_h2(fold_scale_pair(r_g8, j));
  FoldScales f;
  f.g = make_uint2(half_of(s, j), half_of(__hmul2(s, __float2half2_rn(-1024.0f)), j));
  f.g8 = make_uint2(half_of(__hmul2(s8, __float2half2_rn(0.0625f)), j),
                    half_of(__hmul2(s8, __float2half2_rn(-64.0f)), j));
  return f;
}
__device__ __forceinline__ uint32_t hmul_bits(uint32_t a, uint32_t b) {
  return h2_bits(__hmul2(bits_h2(a), bits_h2(b)));
}
// One row's fragment half (weight_frag.cuh's Weight<D>::frag: elements {4t, 4t + 1}, {4t + 2,
// 4t + 3} of a step) times the row's group scale: exact, the products are integers below 2048.
// (The tiled layout folds while it decodes: Tiled<q4_k>::folded_frag.)
__device__ __forceinline__ uint2 fold_half(uint2 v, uint32_t s) {
  return make_uint2(hmul_bits(v.x, s), hmul_bits(v.y, s));
}

// The mins' step's A fragment for rows g (r0) and g + 8 (r8): lane t holds elements 4t .. 4t + 3
// (weight_frag.cuh's k permutation), element e being m_(e % 8).
__device__ __forceinline__ void bias_a(const FoldRow& r0, const FoldRow& r8, int t,
                                       uint32_t (&af)[4]) {
  // Selects, not r.m[t & 1]: a runtime index would put the rows in local memory.
  const uint32_t w0 = (t & 1) ? r0.m[1] : r0.m[0], w8 = (t & 1) ? r8.m[1] : r8.m[0];
  af[0] = exact_f16x2<0>(__byte_perm(w0, 0u, 0x4140));
  af[1] = exact_f16x2<0>(__byte_perm(w8, 0u, 0x4140));
  af[2] = exact_f16x2<0>(__byte_perm(w0, 0u, 0x4342));
  af[3] = exact_f16x2<0>(__byte_perm(w8, 0u, 0x4342));
}

__device__ __forceinline__ uint32_t bias_pair(float a, float b, bool lo) {
  const float va = a * 0.03125f, vb = b * 0.03125f;
  const __half2 hi = __floats2half2_rn(va, vb);
  if (!lo) return h2_bits(hi);
  const float2 h = __half22float2(hi);
  return pack_f16(__fsub_rn(va, h.x), __fsub_rn(vb, h.y));
}
// The mins' step's B fragment for one token (xsum_row: its group sums; null: a token past the
// batch, zeros): elements 4t .. 4t + 3 are the hi (t < 2) or lo (t >= 2) parts of the sums of
// groups 4 (t % 2) .. + 3 of chunk c. bias_b_of: the same from those four sums v.
__device__ __forceinline__ uint2 bias_b_of(const float4& v, int t) {
  return make_uint2(bias_pair(v.x, v.y, t >= 2), bias_pair(v.z, v.w, t >= 2));
}
__device__ __forceinline__ uint2 bias_b(const float* xsum_row, int c, int t) {
  if (xsum_row == nullptr) return make_uint2(0u, 0u);
  return bias_b_of(__ldg(reinterpret_cast<const float4*>(xsum_row + 8 * c + 4 * (t & 1))), t);
}
// bias_b's fragment for both halves of a token's four sums v, converted once for every lane that
// needs them: .x, .y for t < 2 (the hi parts), .z, .w for t >= 2 (the lo parts).
__device__ __forceinline__ uint4 bias_b_both(const float4& v) {
  return make_uint4(bias_pair(v.x, v.y, false), bias_pair(v.z, v.w, false),
                    bias_pair(v.x, v.y, true), bias_pair(v.z, v.w, true));
}

// p = fma(d, s, nb * b) on an mma C fragment: registers 0, 1 are row g (r0), 2, 3 row g + 8.
__device__ __forceinline__ void fold_chunk(float (&p)[4], const float (&s)[4], const float (&b)[4],
                                           const FoldRow& r0, const FoldRow& r8) {
  p[0] = fmaf(r0.d, s[0], __fmul_rn(r0.nb, b[0]));
  p[1] = fmaf(r0.d, s[1], __fmul_rn(r0.nb, b[1]));
  p[2] = fmaf(r8.d, s[2], __fmul_rn(r8.nb, b[2]));
  p[3] = fmaf(r8.d, s[3], __fmul_rn(r8.nb, b[3]));
}

// The mins' B fragments of kN n8 token tiles whose column g is token tok0 + 8n + g of a (zeros
// past a.n_tokens), for chunk c.
template <int kN>
__device__ __forceinline__ void bias_b_tiles(const MatmulArgs& a, int tok0, int c, int g, int t,
                                             uint2 (&bb)[kN]) {
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    const int tok = tok0 + 8 * n + g;
    bb[n] = bias_b(tok < a.n_tokens ? a.xsum + tok * a.xsum_stride : nullptr, c, t);
  }
}

// One m16 x n8 tile's chunk end (mma C layout): acc holds s; the mins' step (A ba: bias_a of the
// tile's rows r0, r8; B bb: its tokens') and p = fma(d, s, nb * b) replace it by the partial.
__device__ __forceinline__ void fold_tile(float (&acc)[4], const uint32_t (&ba)[4], uint2 bb,
                                          const FoldRow& r0, const FoldRow& r8) {
  float b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_f16(b, ba, bb.x, bb.y);
  const float s[4] = {acc[0], acc[1], acc[2], acc[3]};
  fold_chunk(acc, s, b, r0, r8);
}

// fold_tile over kM m16 x kN n8 tiles (rows fr[m], tokens bb[n]).
template <int kM, int kN>
__device__ __forceinline__ void fold_tiles(float (&acc)[kM][kN][4], const FoldRow (&fr)[kM][2],
                                           const uint2 (&bb)[kN], int t) {
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    uint32_t ba[4];
    bias_a(fr[m][0], fr[m][1], t, ba);
#pragma unroll
    for (int n = 0; n < kN; ++n) fold_tile(acc[m][n], ba, bb[n], fr[m][0], fr[m][1]);
  }
}

}  // namespace memra::kernels::matmul_detail
