// K-quant quantizers Q4_K, Q5_K and Q6_K: the algorithm of llama.cpp's reference path
// (quantize_row_qN_K_ref, used by llama-quantize without an importance matrix), written for memra.
// Q4_K/Q5_K fit a scale and a min per 32-element sub-block by a weighted least-squares search,
// then quantize the eight scales and mins to 6 bits against the block's d/dmin. Q6_K fits a signed
// scale per 16 elements by a weighted search, then stores the scales as int8 against d.
// Every float step is a separate rounded float32 operation (no fused multiply-add).
#include <algorithm>
#include <cmath>

#include "formats/quant_blocks.h"

namespace memra::quant::detail {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zeros

// Round to nearest, ties to even, through the float adder: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits. Exact for |v| < 2^22; larger values give a bounded wrong
// integer that callers clamp (as llama.cpp's nearest_int does).
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// Weighted search for scale and min of n values quantized to 0..nmax: x ~ scale * L - min_out.
// Returns the scale; L holds the levels and *min_out the (non-negative) min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                    float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = x[i] < min ? x[i] : min;
    max = x[i] > max ? x[i] : max;
    sum_w += w[i];
    const float wx = w[i] * x[i];
    sum_x += wx;
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *min_out = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::clamp(l, 0, nmax));
    const float approx = scale * static_cast<float>(L[i]);
    const float diff = approx + min - x[i];
    const float err = w[i] * (diff * diff);
    best_error += err;
  }
  uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    const float step = rdelta * static_cast<float>(is);
    iscale = (rmin + step + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      const float wll = wl * static_cast<float>(l);
      sum_l2 += wll;
      const float wlx = wl * x[i];
      sum_xl += wlx;
    }
    const float a = sum_w * sum_l2;
    const float det = a - sum_l * sum_l;
    if (!(det > 0)) continue;
    const float num_scale = sum_w * sum_xl;
    float this_scale = (num_scale - sum_x * sum_l) / det;
    const float num_min = sum_l2 * sum_x;
    float this_min = (num_min - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float cur_error = 0;
    for (int i = 0; i < n; ++i) {
      const float approx = this_scale * static_cast<float>(trial[i]);
      const float diff = approx + this_min - x[i];
      const float err = w[i] * (diff * diff);
      cur_error += err;
    }
    if (cur_error < best_error) {
      std::copy(trial, trial + n, L);
      best_error = cur_error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Q4_K/Q5_K sub-block j's 6-bit scale and min from the packed 12 bytes.
inline void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fills d, dmin, scales[12] at out and the levels
// L[256] (0..nmax) of one super-block.
void encode_scale_min_block(const float* x, int nmax, float rmin, int nstep, uint8_t* out,
                            uint8_t* L) {
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) {
      const float sq = xs[l] * xs[l];
      sum_x2 += sq;
    }
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* packed = out + 4;
  std::fill(packed, packed + kKScaleBytes, uint8_t{0});
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  store_f16(out, max_scale / 63.f);
  store_f16(out + 2, max_min / 63.f);
  // Re-quantize against the stored (rounded) scales; a zero scale keeps the fitted levels.
  const float d_all = load_f16(out);
  const float dmin_all = load_f16(out + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, packed, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = nearest_int((x[32 * j + l] + dm) / d);
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, nmax));
    }
  }
}

// Signed weighted fit of 16 values to -nmax..nmax-1 (weights x^2); L gets level + nmax.
float fit_signed_scale(const float* x, int nmax, int8_t* L) {
  constexpr int n = 16;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  // Sums of w*x*l and w*l*l for levels at inverse scale iscale, w = x^2.
  auto sums = [&](float iscale, float& sumlx, float& suml2, int8_t* levels) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      if (levels) levels[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      const float wx = w * x[i];
      const float wxl = wx * static_cast<float>(l);
      sumlx += wxl;
      const float wl = w * static_cast<float>(l);
      const float wll = wl * static_cast<float>(l);
      suml2 += wll;
    }
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2, L);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float step = 0.1f * static_cast<float>(is);
    iscale = -(static_cast<float>(nmax) + step) / max;
    sums(iscale, sumlx, suml2, nullptr);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      sums(iscale, sumlx, suml2, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void quant_q4_k(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t L[kQkK];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK, dst += 144) {
    encode_scale_min_block(src, 15, -1.0f, 20, dst, L);
    uint8_t* qs = dst + 16;
    for (int j = 0; j < kQkK; j += 64) {  // 64 elements per 32 bytes: low then high nibbles
      for (int l = 0; l < 32; ++l) qs[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      qs += 32;
    }
  }
}

void quant_q5_k(const float* src, uint8_t* dst, int64_t n_blocks) {
  uint8_t L[kQkK];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK, dst += 176) {
    encode_scale_min_block(src, 31, -0.5f, 15, dst, L);
    uint8_t* qh = dst + 16;
    uint8_t* qs = dst + 48;
    std::fill(qh, qh + 32, uint8_t{0});
    for (int j = 0; j < 8; j += 2) {  // sub-blocks j, j+1 share 32 bytes of qs; 5th bits j, j+1
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[32 * j + l];
        const int l2 = L[32 * (j + 1) + l];
        qh[l] |= static_cast<uint8_t>(((l1 >> 4) << j) | ((l2 >> 4) << (j + 1)));
        qs[l] = static_cast<uint8_t>((l1 & 0x0f) | ((l2 & 0x0f) << 4));
      }
      qs += 32;
    }
  }
}

void quant_q6_k(const float* src, uint8_t* dst, int64_t n_blocks) {
  int8_t L[kQkK];
  float scales[16];
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK, dst += 210) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_signed_scale(src + 16 * ib, 32, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    std::fill(dst, dst + 210, uint8_t{0});
    if (max_abs_scale < kGroupMaxEps) continue;  // all-zero block: every byte 0 (d = +0)
    const float iscale = -128.f / max_scale;
    store_f16(dst + 208, 1 / iscale);
    auto* block_scales = reinterpret_cast<int8_t*>(dst + 192);
    for (int ib = 0; ib < 16; ++ib) {
      block_scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    const float d_all = load_f16(dst + 208);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(block_scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(nearest_int(src[16 * j + l] / d), -32, 31);
        L[16 * j + l] = static_cast<int8_t>(q + 32);
      }
    }
    uint8_t* ql = dst;
    uint8_t* qh = dst + 128;
    for (int j = 0; j < kQkK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace memra::quant::detail
