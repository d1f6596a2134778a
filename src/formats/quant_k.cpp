// Dequantizers of the 256-element K-quant super-blocks Q2_K..Q6_K. Layouts (bytes):
//   Q2_K 84:  scales[16] (lo nibble scale, hi nibble min), qs[64] 2-bit, d f16, dmin f16
//   Q3_K 110: hmask[32] high bits, qs[64] 2-bit, scales[12] packed 6-bit signed, d f16
//   Q4_K 144: d, dmin, scales[12] packed 6-bit scale+min pairs, qs[128] 4-bit
//   Q5_K 176: d, dmin, scales[12], qh[32] 5th bits, qs[128]
//   Q6_K 210: ql[128] low 4 bits, qh[64] high 2 bits, scales[16] int8, d f16
// Each value is computed as gguf-py's quants.py does: sub-block scale = d * sc in float32, then
// scale * q (- min) as separate float32 steps.
#include "formats/quant_blocks.h"

namespace memra::quant::detail {

namespace {

// The 6-bit scale and min of sub-block j (0..7) from the 12-byte Q4_K/Q5_K scales field.
inline void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

void dequant_q2_k(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 84, dst += kQkK) {
    const uint8_t* scales = src;
    const uint8_t* qs = src + 16;
    const float d = load_f16(src + 80);
    const float dmin = load_f16(src + 82);
    // Element e = 128h + 32s + l takes bits 2s..2s+1 of qs[32h + l]; sub-block e / 16.
    for (int h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 4; ++sh) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[8 * h + 2 * sh + half];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* q = qs + 32 * h + 16 * half;
          float* y = dst + 128 * h + 32 * sh + 16 * half;
          for (int l = 0; l < 16; ++l) {
            const float scaled = dl * static_cast<float>((q[l] >> (2 * sh)) & 3);
            y[l] = scaled - ml;
          }
        }
      }
    }
  }
}

void dequant_q3_k(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 110, dst += kQkK) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const uint8_t* packed = src + 96;
    const float d = load_f16(src + 108);
    float dl[16];
    for (int i = 0; i < 16; ++i) {
      const int lo = (packed[i % 8] >> (4 * (i / 8))) & 0x0f;
      const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
      dl[i] = d * static_cast<float>((lo | (hi << 4)) - 32);
    }
    // Element e = 128h + 32s + l: bits 2s..2s+1 of qs[32h + l], high bit e / 32 of hmask[l]; a
    // set high bit means "no offset", a clear one subtracts 4.
    for (int h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 4; ++sh) {
        const int bit = 4 * h + sh;
        for (int half = 0; half < 2; ++half) {
          const float scale = dl[8 * h + 2 * sh + half];
          float* y = dst + 128 * h + 32 * sh + 16 * half;
          for (int l = 0; l < 16; ++l) {
            const int idx = 16 * half + l;
            const int low = (qs[32 * h + idx] >> (2 * sh)) & 3;
            const int high = (hmask[idx] >> bit) & 1;
            y[l] = scale * static_cast<float>(low - ((high ^ 1) << 2));
          }
        }
      }
    }
  }
}

void dequant_q4_k(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 144, dst += kQkK) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + 16;
    for (int j = 0; j < 8; ++j) {  // sub-blocks of 32: bytes 32*(j/2), nibble j%2
      int sc, m;
      scale_min_k4(j, scales, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const float scaled = dl * static_cast<float>((q[l] >> shift) & 0x0f);
        dst[32 * j + l] = scaled - ml;
      }
    }
  }
}

void dequant_q5_k(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 176, dst += kQkK) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int j = 0; j < 8; ++j) {  // sub-block j takes bit j of qh
      int sc, m;
      scale_min_k4(j, scales, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
        const float scaled = dl * static_cast<float>(v);
        dst[32 * j + l] = scaled - ml;
      }
    }
  }
}

void dequant_q6_k(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 210, dst += kQkK) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(src + 192);
    const float d = load_f16(src + 208);
    // Element e = 128h + 32s + l: nibble s / 2 of ql[64h + 32(s % 2) + l], bits 2s..2s+1 of
    // qh[32h + l]; sub-block e / 16.
    for (int h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 4; ++sh) {
        const uint8_t* lo_bytes = ql + 64 * h + 32 * (sh % 2);
        const uint8_t* hi_bytes = qh + 32 * h;
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(scales[8 * h + 2 * sh + half]);
          float* y = dst + 128 * h + 32 * sh + 16 * half;
          for (int l = 0; l < 16; ++l) {
            const int idx = 16 * half + l;
            const int lo = (lo_bytes[idx] >> (4 * (sh / 2))) & 0x0f;
            const int hi = (hi_bytes[idx] >> (2 * sh)) & 0x03;
            y[l] = dl * static_cast<float>((lo | (hi << 4)) - 32);
          }
        }
      }
    }
  }
}

}  // namespace memra::quant::detail
