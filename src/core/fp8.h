// FP8 E4M3 (OCP "E4M3FN", NVIDIA's __nv_fp8_e4m3) <-> float on the host, bit-exact with CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) and the cvt.rn.satfinite.e4m3x2.f32
// instruction: round to nearest even, magnitudes past the largest finite value (448, Inf
// included) saturate to +-448, NaN becomes the canonical NaN 0x7f. The reference side of the FP8
// KV cache's checks (the kernels write the same bits on the device).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace memra {

// Layout: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (m x 2^-9);
// S.1111.111 is NaN, there is no Inf. Largest finite 0x7e = 448, smallest subnormal 2^-9.
inline float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0xf, mant = b & 0x7;
  float mag;
  if (exp == 0xf && mant == 0x7) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -9);
  } else {
    mag = std::ldexp(static_cast<float>(8 + mant), exp - 10);
  }
  return (b & 0x80) ? -mag : mag;
}

inline uint8_t f32_to_e4m3(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;  // NaN: canonical, sign dropped (as CUDA's conversion)
  // 464 is halfway between 448 and the next step (480, which E4M3 spends on NaN): it rounds to
  // 448's even mantissa, and anything larger saturates (Inf too).
  if (abs >= 0x43e80000u) return sign | 0x7eu;
  if (abs <= 0x3a800000u) return sign;  // at most half the smallest subnormal (2^-10): zero
  const uint32_t e = abs >> 23;         // biased f32 exponent, >= 117 here
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift, q;
  if (e >= 121) {  // normal in E4M3 (>= 2^-6): keep 3 of the 23 mantissa bits
    shift = 20;
    q = ((e - 120) << 3) | ((m >> shift) & 0x7u);
  } else {            // subnormal: value / 2^-9 = m x 2^(e - 141)
    shift = 141 - e;  // 21..24
    q = m >> shift;
  }
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // a carry moves to the next binade: right
  return static_cast<uint8_t>(sign | q);
}

}  // namespace memra
