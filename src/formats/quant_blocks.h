// Internal to the quant codecs: ggml block sizes, little-endian field access and the per-type
// row functions that quant.cpp dispatches to. Each function takes whole blocks (n_blocks of the
// type's block_size elements); bytes are read field by field, so no struct packing is assumed.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "core/half.h"

static_assert(std::endian::native == std::endian::little, "ggml blocks are little-endian");

namespace memra::quant::detail {

constexpr int kQk = 32;           // elements per block of the legacy types (Q4_0..Q8_0, IQ4_NL)
constexpr int kQkK = 256;         // elements per super-block of the K-quants and IQ4_XS
constexpr int kKScaleBytes = 12;  // packed 6-bit scales + mins of Q4_K/Q5_K

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline void store_f16(uint8_t* p, float value) {
  const uint16_t h = f32_to_f16(value);
  std::memcpy(p, &h, 2);
}

// Dequantizers: n_blocks blocks from src to n_blocks * block_size floats at dst.
void dequant_q4_0(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q4_1(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q5_0(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q5_1(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q8_0(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q2_k(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q3_k(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q4_k(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q5_k(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_q6_k(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_iq4_nl(const uint8_t* src, float* dst, int64_t n_blocks);
void dequant_iq4_xs(const uint8_t* src, float* dst, int64_t n_blocks);

// Quantizers: n_blocks * block_size finite floats to n_blocks blocks. quant.cpp has checked the
// input is finite before calling.
void quant_q4_0(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q4_1(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q5_0(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q5_1(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q8_0(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q4_k(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q5_k(const float* src, uint8_t* dst, int64_t n_blocks);
void quant_q6_k(const float* src, uint8_t* dst, int64_t n_blocks);

}  // namespace memra::quant::detail
