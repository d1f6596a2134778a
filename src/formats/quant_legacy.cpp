// The 32-element ggml block types Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: dequantizers and the
// reference quantizers, matching gguf-py's quants.py operation for operation in float32 (each
// multiply and add is its own rounded step, never fused, so the bytes agree exactly).
#include <algorithm>
#include <cmath>

#include "formats/quant_blocks.h"

namespace memra::quant::detail {

namespace {

// Nibbles of a 16-byte qs field: element j < 16 is the low nibble of byte j, element j + 16 the
// high nibble.
inline int nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}

// The 5th bit of element j from the 32-bit qh field.
inline int high_bit(const uint8_t* qh, int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1u);
}

// trunc(v) clamped to [0, hi] as quants.py does (astype(uint8) then clip). For finite input v is
// finite and non-negative; a tiny block's scale can make 1/d infinite, and numpy's cast then
// yields 0 on x86, which this reproduces (the f16 scale is 0 there, so the value decodes to 0).
inline uint8_t trunc_clamp(float v, int hi) {
  const float t = std::trunc(v);
  if (!std::isfinite(t) || !(t > 0.0f)) return 0;
  if (t >= static_cast<float>(hi)) return static_cast<uint8_t>(hi);
  return static_cast<uint8_t>(t);
}

// The element of largest magnitude with its sign (the first one on ties), as argmax(abs(x)).
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQk; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline float inverse_or_zero(float d) {
  return d == 0.0f ? 0.0f : 1.0f / d;
}

// Packs 32 values of 0..15 (or the low nibbles of 0..31) into 16 bytes.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

// Bit 4 of each of 32 values into a little-endian 32-bit mask.
void pack_high_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQk; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1u) << j;
  std::memcpy(qh, &bits, 4);
}

}  // namespace

void dequant_q4_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 18, dst += kQk) {
    const float d = load_f16(src);
    for (int j = 0; j < kQk; ++j) dst[j] = d * static_cast<float>(nibble(src + 2, j) - 8);
  }
}

void dequant_q4_1(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 20, dst += kQk) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    for (int j = 0; j < kQk; ++j) {
      const float scaled = d * static_cast<float>(nibble(src + 4, j));
      dst[j] = scaled + m;
    }
  }
}

void dequant_q5_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 22, dst += kQk) {
    const float d = load_f16(src);
    for (int j = 0; j < kQk; ++j) {
      const int q = nibble(src + 6, j) | (high_bit(src + 2, j) << 4);
      dst[j] = d * static_cast<float>(q - 16);
    }
  }
}

void dequant_q5_1(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 24, dst += kQk) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    for (int j = 0; j < kQk; ++j) {
      const int q = nibble(src + 8, j) | (high_bit(src + 4, j) << 4);
      const float scaled = d * static_cast<float>(q);
      dst[j] = scaled + m;
    }
  }
}

void dequant_q8_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 34, dst += kQk) {
    const float d = load_f16(src);
    const auto* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

void quant_q4_0(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t q[kQk];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk, dst += 18) {
    const float d = signed_absmax(src) / -8.0f;
    const float id = inverse_or_zero(d);
    for (int j = 0; j < kQk; ++j) {
      const float scaled = src[j] * id;
      q[j] = trunc_clamp(scaled + 8.5f, 15);
    }
    store_f16(dst, d);
    pack_nibbles(q, dst + 2);
  }
}

void quant_q4_1(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t q[kQk];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk, dst += 20) {
    const float max = *std::max_element(src, src + kQk);
    const float min = *std::min_element(src, src + kQk);
    const float d = (max - min) / 15.0f;
    const float id = inverse_or_zero(d);
    for (int j = 0; j < kQk; ++j) {
      const float scaled = (src[j] - min) * id;
      q[j] = trunc_clamp(scaled + 0.5f, 15);
    }
    store_f16(dst, d);
    store_f16(dst + 2, min);
    pack_nibbles(q, dst + 4);
  }
}

void quant_q5_0(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t q[kQk];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk, dst += 22) {
    const float d = signed_absmax(src) / -16.0f;
    const float id = inverse_or_zero(d);
    for (int j = 0; j < kQk; ++j) {
      const float scaled = src[j] * id;
      q[j] = trunc_clamp(scaled + 16.5f, 31);
    }
    store_f16(dst, d);
    pack_high_bits(q, dst + 2);
    pack_nibbles(q, dst + 6);
  }
}

void quant_q5_1(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t q[kQk];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk, dst += 24) {
    const float max = *std::max_element(src, src + kQk);
    const float min = *std::min_element(src, src + kQk);
    const float d = (max - min) / 31.0f;
    const float id = inverse_or_zero(d);
    for (int j = 0; j < kQk; ++j) {
      const float scaled = (src[j] - min) * id;
      q[j] = trunc_clamp(scaled + 0.5f, 31);
    }
    store_f16(dst, d);
    store_f16(dst + 2, min);
    pack_high_bits(q, dst + 4);
    pack_nibbles(q, dst + 8);
  }
}

void quant_q8_0(const float* src, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk, dst += 34) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    store_f16(dst, d);
    for (int j = 0; j < kQk; ++j) {
      // Round half away from zero (np_roundf / roundf); |x * id| <= 127 for finite input.
      // A non-finite product (1/d overflowed for a subnormal block) becomes 0 as numpy's cast does.
      const float r = std::round(src[j] * id);
      const float q = std::isfinite(r) ? std::clamp(r, -128.0f, 127.0f) : 0.0f;
      dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

}  // namespace memra::quant::detail
