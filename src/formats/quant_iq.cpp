// Dequantizers of the non-linear 4-bit types: IQ4_NL (32-element blocks: d f16, qs[16]) and
// IQ4_XS (256-element super-blocks: d f16, scales_h u16, scales_l[4], qs[128]). Each 4-bit index
// selects a value from a fixed 16-entry int8 table, scaled by d (IQ4_NL) or d * (6-bit scale - 32)
// per 32-element sub-block (IQ4_XS).
#include "formats/quant_blocks.h"

namespace memra::quant::detail {

namespace {

constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace

void dequant_iq4_nl(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 18, dst += kQk) {
    const float d = load_f16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4Values[qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
    }
  }
}

void dequant_iq4_xs(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 136, dst += kQkK) {
    const float d = load_f16(src);
    uint16_t scales_h;
    std::memcpy(&scales_h, src + 2, 2);
    const uint8_t* scales_l = src + 4;
    const uint8_t* qs = src + 8;
    for (int i = 0; i < 8; ++i) {  // sub-block i: low scale bits in a nibble, high bits in scales_h
      const int lo = (scales_l[i / 2] >> (4 * (i % 2))) & 0x0f;
      const int hi = (scales_h >> (2 * i)) & 0x03;
      const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
      const uint8_t* q = qs + 16 * i;
      float* y = dst + 32 * i;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(kIq4Values[q[l] & 0x0f]);
        y[l + 16] = dl * static_cast<float>(kIq4Values[q[l] >> 4]);
      }
    }
  }
}

}  // namespace memra::quant::detail
