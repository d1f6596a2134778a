// Private to kernels/matmul: weight decoders, one per dtype. Each turns raw ggml block bytes
// (in shared memory) into the bf16 pairs of one mma A-fragment row, as a pure function of those
// bytes, so the decode and prefill kernels see bit-identical weights. Values follow memra's CPU
// dequantizers (src/formats/quant_k.cpp, quant_legacy.cpp) operation for operation in f32; every
// product there is exact (an f16 scale has 11 significant bits, a 6-bit sub-scale 6, a quant <= 6),
// so one fmaf equals the CPU's separate multiply and add. The f32 value is then rounded to bf16.
#pragma once

#include "core/dtype.h"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

// Bits [8 * byte + shift, + width) of a little-endian 16-bit word.
template <int kWidth>
__device__ __forceinline__ uint32_t bits(uint32_t word, int byte, int shift) {
  return (word >> (8 * byte + shift)) & ((1u << kWidth) - 1u);
}

// Each Weight<D>::frag(blk, s, t) returns the bf16 pairs of elements {16s + 2t, +1} (.x) and
// {16s + 2t + 8, +9} (.y) of the quant block at blk: one row's half of an A fragment for the k16
// slice s. blk is at least 2-byte aligned (all block sizes are even); F16/BF16 rows are 16-aligned.
template <DType D>
struct Weight;

template <>
struct Weight<DType::f16> {
  static constexpr int kBlock = 16, kBytes = 32;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int, int t) {
    const uint32_t p0 = ld_u32(b + 4 * t), p1 = ld_u32(b + 16 + 4 * t);
    const float2 f0 = __half22float2(*reinterpret_cast<const __half2*>(&p0));
    const float2 f1 = __half22float2(*reinterpret_cast<const __half2*>(&p1));
    return make_uint2(pack_bf16(f0.x, f0.y), pack_bf16(f1.x, f1.y));
  }
};

template <>
struct Weight<DType::bf16> {
  static constexpr int kBlock = 16, kBytes = 32;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int, int t) {
    return make_uint2(ld_u32(b + 4 * t), ld_u32(b + 16 + 4 * t));
  }
};

// Q8_0: f16 d, int8 qs[32]; value = q * d.
template <>
struct Weight<DType::q8_0> {
  static constexpr int kBlock = 32, kBytes = 34;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const float d = ld_f16(b);
    const uint8_t* q = b + 2 + 16 * s + 2 * t;
    const uint32_t w0 = ld_u16(q) ^ 0x8080u, w1 = ld_u16(q + 8) ^ 0x8080u;  // int8 + 128
    auto v = [&](uint32_t w, int i) { return __fmul_rn(exact_float<128>(bits<8>(w, i, 0)), d); };
    return make_uint2(pack_bf16(v(w0, 0), v(w0, 1)), pack_bf16(v(w1, 0), v(w1, 1)));
  }
};

// Q4_0: f16 d, qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of
// qs[j - 16]; value = d * (q - 8).
template <>
struct Weight<DType::q4_0> {
  static constexpr int kBlock = 32, kBytes = 18;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const float d = ld_f16(b);
    const uint8_t* q = b + 2 + 2 * t;
    const uint32_t w0 = ld_u16(q), w1 = ld_u16(q + 8);
    auto v = [&](uint32_t w, int i) { return __fmul_rn(d, exact_float<8>(bits<4>(w, i, 4 * s))); };
    return make_uint2(pack_bf16(v(w0, 0), v(w0, 1)), pack_bf16(v(w1, 0), v(w1, 1)));
  }
};

// Q4_1: f16 d, f16 m, qs[16]; value = d * q + m.
template <>
struct Weight<DType::q4_1> {
  static constexpr int kBlock = 32, kBytes = 20;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t* q = b + 4 + 2 * t;
    const uint32_t w0 = ld_u16(q), w1 = ld_u16(q + 8);
    auto v = [&](uint32_t w, int i) { return fmaf(d, exact_float<0>(bits<4>(w, i, 4 * s)), m); };
    return make_uint2(pack_bf16(v(w0, 0), v(w0, 1)), pack_bf16(v(w1, 0), v(w1, 1)));
  }
};

// Q5_0 / Q5_1: as Q4_0 / Q4_1 with a 32-bit qh whose bit j is element j's 5th bit.
template <int kHeader, bool kMin>
struct Q5Legacy {
  static constexpr int kBlock = 32, kBytes = kHeader + 16;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const float d = ld_f16(b);
    const float m = kMin ? ld_f16(b + 2) : 0.0f;
    const uint32_t qh = ld_u16(b + kHeader - 4) | (ld_u16(b + kHeader - 2) << 16);
    const uint8_t* q = b + kHeader + 2 * t;
    const uint32_t w0 = ld_u16(q), w1 = ld_u16(q + 8);
    auto v = [&](uint32_t w, int i, int e) {
      const uint32_t x = bits<4>(w, i, 4 * s) | (((qh >> e) & 1u) << 4);
      return kMin ? fmaf(d, exact_float<0>(x), m) : __fmul_rn(d, exact_float<16>(x));
    };
    const int e = 16 * s + 2 * t;
    return make_uint2(pack_bf16(v(w0, 0, e), v(w0, 1, e + 1)),
                      pack_bf16(v(w1, 0, e + 8), v(w1, 1, e + 9)));
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
// value = (d * sc) * q - dmin * m.
template <bool kHigh>
struct QK45 {
  static constexpr int kBlock = 256, kBytes = kHigh ? 176 : 144;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s, int t) {
    const int j = s >> 1;
    const int l = 16 * (s & 1) + 2 * t;
    uint32_t sc, mn;
    scale_min_k4(j, b + 4, sc, mn);
    const float dl = __fmul_rn(ld_f16(b), exact_float<0>(sc));
    const float ml = __fmul_rn(ld_f16(b + 2), exact_float<0>(mn));
    const uint8_t* q = b + (kHigh ? 48 : 16) + 32 * (j >> 1) + l;
    const uint32_t w0 = ld_u16(q), w1 = ld_u16(q + 8);
    const uint32_t h0 = kHigh ? ld_u16(b + 16 + l) : 0u, h1 = kHigh ? ld_u16(b + 24 + l) : 0u;
    auto v = [&](uint32_t w, uint32_t h, int i) {
      uint32_t x = bits<4>(w, i, 4 * (j & 1));
      if (kHigh) x |= bits<1>(h, i, j) << 4;
      return fmaf(dl, exact_float<0>(x), -ml);
    };
    return make_uint2(pack_bf16(v(w0, h0, 0), v(w0, h0, 1)), pack_bf16(v(w1, h1, 0), v(w1, h1, 1)));
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
  static constexpr int kBlock = 256, kBytes = 210;
  static __device__ __forceinline__ uint2 frag(const uint8_t* b, int s16, int t) {
    const int h = s16 >> 3, s = (s16 >> 1) & 3;
    const int l = 16 * (s16 & 1) + 2 * t;
    const float dl = __fmul_rn(ld_f16(b + 208), exact_float<128>(b[192 + s16] ^ 0x80u));
    const uint8_t* lo = b + 64 * h + 32 * (s & 1) + l;
    const uint8_t* hi = b + 128 + 32 * h + l;
    const uint32_t w0 = ld_u16(lo), w1 = ld_u16(lo + 8);
    const uint32_t h0 = ld_u16(hi), h1 = ld_u16(hi + 8);
    auto v = [&](uint32_t w, uint32_t hb, int i) {
      const uint32_t x = bits<4>(w, i, 4 * (s >> 1)) | (bits<2>(hb, i, 2 * s) << 4);
      return __fmul_rn(dl, exact_float<32>(x));
    };
    return make_uint2(pack_bf16(v(w0, h0, 0), v(w0, h0, 1)), pack_bf16(v(w1, h1, 0), v(w1, h1, 1)));
  }
};

// The A-fragment half-row for k16 step `step` of a run of whole blocks starting at `row`.
template <DType D>
__device__ __forceinline__ uint2 weight_frag(const uint8_t* row, int step, int t) {
  using W = Weight<D>;
  constexpr int kSteps = W::kBlock / 16;
  return W::frag(row + (step / kSteps) * W::kBytes, step % kSteps, t);
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
