// Private to backend/cpu: the weight blocks' byte layouts (ggml, formats/quant_blocks.h) and the
// AVX2 steps that unpack them, shared by the dot products (quant_dot.cpp) and the rows dequantized
// in registers (dequant_dot.cpp). One definition of each step is what makes the two agree bit for
// bit: a weight dequantized in a register must be the float the row dequantizer writes.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define MEMRA_AVX2 1
#endif

namespace memra::cpu::detail {

// Byte sizes of the weight blocks.
constexpr int kQ4_0Bytes = 18;   // f16 d, 16 bytes of nibbles
constexpr int kQ5_0Bytes = 22;   // f16 d, 4 bytes of high bits, 16 bytes of nibbles
constexpr int kQ8_0Bytes = 34;   // f16 d, 32 int8
constexpr int kQ4_KBytes = 144;  // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 of nibbles
constexpr int kQ6_KBytes = 210;  // 128 low nibbles, 64 of 2-bit highs, 16 int8 scales, f16 d

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#ifdef MEMRA_AVX2
  return _cvtsh_ss(h);  // F16C: one instruction instead of the portable bit manipulation
#else
  return f16_to_f32(h);
#endif
}

// Q4_K packs 8 (scale, min) pairs of 6 bits into 12 bytes.
inline void q4k_scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = s[j] & 63;
      m[j] = s[j + 4] & 63;
    } else {
      sc[j] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
      m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
}

#ifdef MEMRA_AVX2
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 32 nibbles of a Q4_0/Q5_0 block in element order (low nibbles then high nibbles).
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 0xFF in byte j where bit j of bits is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i shuf =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(rep, mask), mask);
}

// A Q4_0 / Q5_0 block's 32 signed values.
inline __m256i unpack_q4_0(const uint8_t* w) {
  return _mm256_sub_epi8(nibbles_32(w + 2), _mm256_set1_epi8(8));
}
inline __m256i unpack_q5_0(const uint8_t* w) {
  uint32_t qh;
  std::memcpy(&qh, w + 2, 4);
  const __m256i high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
  return _mm256_sub_epi8(_mm256_or_si256(nibbles_32(w + 6), high), _mm256_set1_epi8(16));
}

// Bytes 8i..8i+7 of 32 as a 128-bit lane's low half (i in 0..3).
inline __m128i eighth(__m256i q, int i) {
  const __m128i half = i < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
  return (i & 1) ? _mm_srli_si128(half, 8) : half;
}

// Eight signed bytes of a Q5_0 block times its scale d: dequant's value.
inline __m256 q5_0_values(__m128i eight, __m256 d) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight)));
}

// Eight unsigned bytes (Q4_K's nibbles) times scale minus offset: dequant's value.
inline __m256 u8_affine(__m128i eight, __m256 scale, __m256 offset) {
  return _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight)), scale, offset);
}

// Q6_K: the 6-bit values (0..63) of half h of a block, as four runs of 32 bytes: run k holds
// elements 128h + 32k .. 128h + 32k + 31.
inline void q6k_runs(const uint8_t* block, int h, __m256i* q) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
  const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
}

// Eight Q6_K values (unsigned 0..63) minus 32, times their 16-element group's scale d * s:
// dequant's value (the subtraction is exact, so the product is the one rounding).
inline __m256 q6k_values(__m128i eight, __m256 scale) {
  const __m256 centred =
      _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight)), _mm256_set1_ps(32.0f));
  return _mm256_mul_ps(centred, scale);
}
#endif

}  // namespace memra::cpu::detail
