// Private to kernels/matmul: weight decoders, one per dtype. Each is a pure function of raw ggml
// block bytes (in shared memory), so the decode and prefill kernels see bit-identical operands.
//
// Quantized types never round a weight: a ggml weight is (group scale) * q + (group bias) with a
// small integer q, and every such q is exact in f16. So the tensor cores multiply the integers q
// (f16) by x (f16, matmul.cu), and the group's scale and bias are applied in f32 after each
// group's mma chain: sum_e w_e x_e = scale * sum_e q_e x_e + bias * sum_e x_e, the second sum
// precomputed per 32 elements of x (Q4_K and Q5_K fold their integer group scales into the
// operand instead and apply d and dmin once per block: fold.cuh). Scale and bias are the CPU
// dequantizer's f32 values
// (src/formats/quant_k.cpp, quant_legacy.cpp): each is one exact product (an f16 by a 6- or
// 8-bit integer).
//
// The k order inside an mma step is a fixed permutation, the same for weights and x in every
// kernel: the A/B fragment slots {2t, 2t + 1} and {2t + 8, 2t + 9} of lane t hold the step's
// elements {4t, 4t + 1} and {4t + 2, 4t + 3}, so a lane reads four consecutive elements (one
// 32-bit load of a K-quant's nibbles, one 64-bit load of F16/BF16) and x sits in plain order.
//
// F16 weights are exact in f16; BF16 weights are converted to f16, exact within f16's normal range
// (the backend refuses a BF16 tensor with a value beyond f16's range at load; values under 2^-14
// keep an absolute error below 2^-25).
#pragma once

#include "core/dtype.h"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

// Bits [8 * byte + shift, + width) of a little-endian 16-bit word.
template <int kWidth>
__device__ __forceinline__ uint32_t bits(uint32_t word, int byte, int shift) {
  return (word >> (8 * byte + shift)) & ((1u << kWidth) - 1u);
}

// The low (shift 0) or high (shift 4) nibbles of the two bytes of a 16-bit word, one per f16 lane.
__device__ __forceinline__ uint32_t nibble_pair(uint32_t word16, int shift) {
  return (spread_bytes(word16) >> shift) & 0x000f000fu;
}
// Bytes 0, 1 (kHalf 0) or 2, 3 (kHalf 1) of a 32-bit word, one per f16 lane.
template <int kHalf>
__device__ __forceinline__ uint32_t spread_half(uint32_t word32) {
  return __byte_perm(word32, 0u, kHalf ? 0x4342 : 0x4140);
}

// Each Weight<D> gives:
//   frag(blk, s, t): the f16 pairs of elements {16s + 4t, +1} (.x) and {16s + 4t + 2, +3} (.y) of
//     the block at blk, as integers q (quantized types) or values (F16/BF16): one row's half of
//     an mma A fragment for the k16 slice s.
//   kGroup: elements per scale group (a multiple of 16 dividing the 256-element chunk);
//     kScaled: whether groups carry a scale; kBias: whether they carry a bias too.
//   scale(blk, j): {scale, bias} of group j of the block.
// blk is at least 2-byte aligned (all block sizes are even); F16/BF16 rows are 16-aligned.
template <DType D>
struct Weight;

template <>
struct Weight<DType::f16> {
  static constexpr int kBlock = 16, kBytes = 32, kGroup = 256;
  static constexpr bool kScaled = false, kBias = false;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int, int t) {
    return *reinterpret_cast<const uint2*>(b + 8 * t);  // rows are 16-byte aligned
  }
  static __device__ __forceinline__ float2 scale(const uint8_t*, int) {
    return make_float2(1.0f, 0.0f);
  }
};

template <>
struct Weight<DType::bf16> {
  static constexpr int kBlock = 16, kBytes = 32, kGroup = 256;
  static constexpr bool kScaled = false, kBias = false;
  static __device__ __forceinline__ uint32_t to_f16(uint32_t p) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&p));
    return h2_bits(__float22half2_rn(f));
  }
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int, int t) {
    const uint2 v = *reinterpret_cast<const uint2*>(b + 8 * t);  // rows are 16-byte aligned
    return make_uint2(to_f16(v.x), to_f16(v.y));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t*, int) {
    return make_float2(1.0f, 0.0f);
  }
};

// Q8_0: f16 d, int8 qs[32]; value = d * q.
template <>
struct Weight<DType::q8_0> {
  static constexpr int kBlock = 32, kBytes = 34, kGroup = 32;
  static constexpr bool kScaled = true, kBias = false;
  static __device__ __forceinline__ uint32_t pair(const uint8_t* q) {
    return exact_f16x2<128>(spread_bytes(ld_u16(q) ^ 0x8080u));  // int8 + 128, minus 128
  }
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const uint8_t* q = b + 2 + 16 * s + 4 * t;
    return make_uint2(pair(q), pair(q + 2));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t* b, int) {
    return make_float2(ld_f16(b), 0.0f);
  }
};

// Q4_0 / Q4_1: f16 d, [f16 m], qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the
// high nibble of qs[j - 16]. Q4_0: value = d * (q - 8); Q4_1: value = d * q + m.
template <int kHeader, bool kMin>
struct Q4Legacy {
  static constexpr int kBlock = 32, kBytes = kHeader + 16, kGroup = 32;
  static constexpr bool kScaled = true, kBias = kMin;
  static constexpr int kOffset = kMin ? 0 : 8;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const uint8_t* q = b + kHeader + 4 * t;
    return make_uint2(exact_f16x2<kOffset>(nibble_pair(ld_u16(q), 4 * s)),
                      exact_f16x2<kOffset>(nibble_pair(ld_u16(q + 2), 4 * s)));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t* b, int) {
    return make_float2(ld_f16(b), kMin ? ld_f16(b + 2) : 0.0f);
  }
};
template <>
struct Weight<DType::q4_0> : Q4Legacy<2, false> {};
template <>
struct Weight<DType::q4_1> : Q4Legacy<4, true> {};

// Q5_0 / Q5_1: as Q4_0 / Q4_1 with a 32-bit qh before qs whose bit j is element j's 5th bit;
// Q5_0: value = d * (q - 16).
template <int kHeader, bool kMin>
struct Q5Legacy {
  static constexpr int kBlock = 32, kBytes = kHeader + 16, kGroup = 32;
  static constexpr bool kScaled = true, kBias = kMin;
  static constexpr int kOffset = kMin ? 0 : 16;
  static __device__ __forceinline__ uint32_t pair(const uint8_t* q, uint32_t qh, int s, int e) {
    const uint32_t high = ((qh >> e) & 1u) | (((qh >> (e + 1)) & 1u) << 16);
    return exact_f16x2<kOffset>(nibble_pair(ld_u16(q), 4 * s) | (high << 4));
  }
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const uint32_t qh = ld_u16(b + kHeader - 4) | (ld_u16(b + kHeader - 2) << 16);
    const uint8_t* q = b + kHeader + 4 * t;
    const int e = 16 * s + 4 * t;
    return make_uint2(pair(q, qh, s, e), pair(q + 2, qh, s, e + 2));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t* b, int) {
    return make_float2(ld_f16(b), kMin ? ld_f16(b + 2) : 0.0f);
  }
};
template <>
struct Weight<DType::q5_0> : Q5Legacy<6, false> {};
template <>
struct Weight<DType::q5_1> : Q5Legacy<8, true> {};

// The 6-bit scale and min of sub-block j (0..7) from the 12-byte Q4_K/Q5_K scales field.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* s, uint32_t& sc, uint32_t& m) {
  if (j < 4) {
    sc = s[j] & 63u;
    m = s[j + 4] & 63u;
  } else {
    sc = (s[j + 4] & 0x0fu) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: f16 d, f16 dmin, scales[12], [qh[32]], qs[128] for 256 elements. Element e of
// sub-block j = e / 32 is nibble j % 2 of qs[32 * (j / 2) + e % 32] (| bit j of qh[e % 32] << 4);
// value = (d * sc_j) * q - dmin * m_j.
template <bool kHigh>
struct QK45 {
  static constexpr int kBlock = 256, kBytes = kHigh ? 176 : 144, kGroup = 32;
  static constexpr bool kScaled = true, kBias = true;
  // Blocks are 16-byte aligned in shared memory (144 and 176 are multiples of 16, rows start
  // aligned), so a lane's four quant bytes are one 32-bit load.
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const int j = s >> 1, l = 16 * (s & 1) + 4 * t;
    const uint32_t q =
        (ld_u32(b + (kHigh ? 48 : 16) + 32 * (j >> 1) + l) >> (4 * (j & 1))) & 0x0f0f0f0fu;
    uint32_t lo = spread_half<0>(q), hi = spread_half<1>(q);
    if (kHigh) {
      const uint32_t h = (ld_u32(b + 16 + l) >> j) & 0x01010101u;
      lo |= spread_half<0>(h) << 4;
      hi |= spread_half<1>(h) << 4;
    }
    return make_uint2(exact_f16x2<0>(lo), exact_f16x2<0>(hi));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t* b, int j) {
    uint32_t sc, mn;
    scale_min_k4(j, b + 4, sc, mn);
    return make_float2(__fmul_rn(ld_f16(b), exact_float<0>(sc)),
                       -__fmul_rn(ld_f16(b + 2), exact_float<0>(mn)));
  }
};
template <>
struct Weight<DType::q4_k> : QK45<false> {};
template <>
struct Weight<DType::q5_k> : QK45<true> {};

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Element e = 128h + 32s + l: nibble s / 2 of
// ql[64h + 32(s % 2) + l], bits 2s..2s+1 of qh[32h + l]; value = (d * scales[e / 16]) * (q - 32).
template <>
struct Weight<DType::q6_k> {
  static constexpr int kBlock = 256, kBytes = 210, kGroup = 16;
  static constexpr bool kScaled = true, kBias = false;
  static __device__ __forceinline__ uint32_t pair(const uint8_t* lo, const uint8_t* hi, int s) {
    const uint32_t q = nibble_pair(ld_u16(lo), 4 * (s >> 1)) |
                       (((spread_bytes(ld_u16(hi)) >> (2 * s)) & 0x00030003u) << 4);
    return exact_f16x2<32>(q);
  }
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s16, int t) {
    const int h = s16 >> 3, s = (s16 >> 1) & 3;
    const int l = 16 * (s16 & 1) + 4 * t;
    const uint8_t* lo = b + 64 * h + 32 * (s & 1) + l;
    const uint8_t* hi = b + 128 + 32 * h + l;
    return make_uint2(pair(lo, hi, s), pair(lo + 2, hi + 2, s));
  }
  static __device__ __forceinline__ float2 scale(const uint8_t* b, int j) {
    return make_float2(__fmul_rn(ld_f16(b + 208), exact_float<128>(b[192 + j] ^ 0x80u)), 0.0f);
  }
};

// The A-fragment half-row for k16 step `step` of a run of whole blocks starting at `row`.
template <DType D>
__device__ __forceinline__ uint2 weight_frag(const uint8_t* row, int step, int t) {
  using W = Weight<D>;
  constexpr int kSteps = W::kBlock / 16;
  return W::frag(row + (step / kSteps) * W::kBytes, step % kSteps, t);
}

// {scale, bias} of the scale group holding k16 step `step` of a run of whole blocks at `row`.
template <DType D>
__device__ __forceinline__ float2 weight_scale(const uint8_t* row, int step) {
  using W = Weight<D>;
  constexpr int kSteps = W::kBlock / 16, kGroupSteps = W::kGroup / 16;
  return W::scale(row + (step / kSteps) * W::kBytes, (step % kSteps) / kGroupSteps);
}

// The canonical group step (matmul.cu) on an mma C fragment: p = fma(scale, s, p), then, for
// types with a bias, p = fma(bias, xsum, p). c[0], c[1] are row g (tokens 2t, 2t + 1), c[2], c[3]
// row g + 8; sc_g / sc_g8 are those rows' {scale, bias}, xs the two tokens' group sums.
template <bool kBias>
__device__ __forceinline__ void apply_group(float (&p)[4], const float (&s)[4], float2 sc_g,
                                            float2 sc_g8, float2 xs) {
  p[0] = fmaf(sc_g.x, s[0], p[0]);
  p[1] = fmaf(sc_g.x, s[1], p[1]);
  p[2] = fmaf(sc_g8.x, s[2], p[2]);
  p[3] = fmaf(sc_g8.x, s[3], p[3]);
  if constexpr (kBias) {
    p[0] = fmaf(sc_g.y, xs.x, p[0]);
    p[1] = fmaf(sc_g.y, xs.y, p[1]);
    p[2] = fmaf(sc_g8.y, xs.x, p[2]);
    p[3] = fmaf(sc_g8.y, xs.y, p[3]);
  }
}

// Bytes of shared memory per row holding `elems` elements of raw blocks copied in 16-byte pieces
// from a 2-byte aligned start (up to 14 bytes of lead-in). An odd number of 16-byte units, so the
// same offset in 8 consecutive rows falls in 8 different 4-bank groups (no conflicts when a warp's
// lanes g = 0..7 read rows g).
template <DType D>
constexpr int raw_slot_bytes(int elems) {
  return ((elems / Weight<D>::kBlock * Weight<D>::kBytes + 14 + 15) / 16 | 1) * 16;
}

}  // namespace memra::kernels::matmul_detail
