// Quantized dot products for the CPU fast path. Weight blocks are read in the ggml byte layouts
// (docs: formats/quant.h); each kernel has a scalar form and, when the build targets AVX2, an
// int8 SIMD form (maddubs of unsigned by signed bytes, widened with madd). Integer partial sums
// are exact, so the scalar and SIMD forms differ only in float summation order.
#include "backend/cpu/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/block_simd.h"
#include "core/error.h"
#include "core/half.h"

namespace memra::cpu {

namespace {

using namespace detail;  // the block layouts and their SIMD unpacking (block_simd.h)

// Q5_0/Q4_0 element j of a block as a signed int.
inline int q4_0_value(const uint8_t* b, int j) {
  const uint8_t byte = b[2 + (j & 15)];
  return (j < 16 ? byte & 0xF : byte >> 4) - 8;
}
inline int q5_0_value(const uint8_t* b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t byte = b[6 + (j & 15)];
  const int lo = j < 16 ? byte & 0xF : byte >> 4;
  return (lo | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
}

#ifdef MEMRA_AVX2
// Signed int8 x int8 dot of 32 lanes, as 8 int32 partial sums.
inline __m256i dot_i8(__m256i w, __m256i a) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Unsigned (0..63) x signed dot of 32 lanes, as 16 int16 pair sums.
inline __m256i dot_u8_pairs(__m256i w, __m256i a) {
  return _mm256_maddubs_epi16(w, a);
}

// Multi-token kernels: each weight block is unpacked once and dotted with NT activation rows, so
// batched prefill pays the unpacking once per weight row instead of once per token.

// Accumulates one legacy (32-element) weight block, already unpacked to signed bytes, into NT
// per-token float accumulators.
template <int NT>
inline void legacy_block(__m256i wq, float dw, const BlockQ8* const* a, int64_t b, __m256* acc) {
  const __m256i wabs = _mm256_sign_epi8(wq, wq);
  for (int t = 0; t < NT; ++t) {
    const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(aq, wq)),
                                        _mm256_set1_epi16(1));
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(p), acc[t]);
  }
}

// Q4_0 / Q5_0 / Q8_0 over nb blocks; Unpack(block) returns the block's 32 signed values.
template <int NT, int kBlockBytes, typename Unpack>
void dot_legacy_avx2(const uint8_t* w, const BlockQ8* const* a, int64_t nb, float* out,
                     Unpack unpack) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += kBlockBytes)
    legacy_block<NT>(unpack(w), load_f16(w), a, b, acc);
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

template <int NT>
void dot_q4_k_avx2(const uint8_t* w, const BlockQ8K* const* a, int64_t nb, float* out) {
  __m256 acc[NT];
  float mins[NT] = {};
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b, w += kQ4_KBytes) {
    const float dw = load_f16(w), dmin = load_f16(w + 2);
    uint8_t sc[8], m[8];
    q4k_scales(w + 4, sc, m);
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) {
      int32_t min_sum = 0;
      for (int s = 0; s < 8; ++s)
        min_sum += m[s] * (a[t][b].bsums[2 * s] + a[t][b].bsums[2 * s + 1]);
      mins[t] += dmin * a[t][b].d * static_cast<float>(min_sum);
      sumi[t] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 + 32 * c));
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int t = 0; t < NT; ++t) {
        const int8_t* aq = a[t][b].qs + 64 * c;
        const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));
        const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1);
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p0, p1));
      }
    }
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]) - mins[t];
}

template <int NT>
void dot_q6_k_avx2(const uint8_t* w, const BlockQ8K* const* a, int64_t nb, float* out) {
  __m256 acc[NT];
  float bias_total[NT] = {};
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += kQ6_KBytes) {
    const int8_t* scales = reinterpret_cast<const int8_t*>(w + 192);
    const float dw = load_f16(w + 208);
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) {
      int32_t bias = 0;  // weights are stored +32: subtract 32 * sum(scale * activation)
      for (int g = 0; g < 16; ++g) bias += scales[g] * a[t][b].bsums[g];
      bias_total[t] += dw * a[t][b].d * static_cast<float>(32 * bias);
      sumi[t] = _mm256_setzero_si256();
    }
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      q6k_runs(w, h, q);
      for (int k = 0; k < 4; ++k) {
        const int8_t* sc = scales + 8 * h + 2 * k;
        const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
        for (int t = 0; t < NT; ++t) {
          const __m256i av =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs + 128 * h + 32 * k));
          sumi[t] =
              _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], av), sv));
        }
      }
    }
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]) - bias_total[t];
}

// Q8_0 weights with f32 activations: the int8 weights are widened to floats in registers. Used
// for Q8_0 because it is the dtype of Gemma's tied 262144-row output projection, whose input
// (the final norm's output) has outlier dimensions of ~30 next to values of ~1: rounding that
// to 8-bit blocks flips near-tied next-token choices (teacher-forced agreement with transformers
// fell from 100% to 93%), while the widened weights cost little in a memory-bound matmul.
template <int NT>
void dot_q8_0_f32_avx2(const uint8_t* w, const float* const* x, int64_t nb, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += kQ8_0Bytes) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 18));
    __m256 wf[4];
    wf[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0));
    wf[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)));
    wf[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1));
    wf[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)));
    const __m256 d = _mm256_set1_ps(load_f16(w));
    for (int t = 0; t < NT; ++t) {
      const float* xb = x[t] + b * 32;
      __m256 sum = _mm256_mul_ps(wf[0], _mm256_loadu_ps(xb));
      sum = _mm256_fmadd_ps(wf[1], _mm256_loadu_ps(xb + 8), sum);
      sum = _mm256_fmadd_ps(wf[2], _mm256_loadu_ps(xb + 16), sum);
      sum = _mm256_fmadd_ps(wf[3], _mm256_loadu_ps(xb + 24), sum);
      acc[t] = _mm256_fmadd_ps(d, sum, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// Row dequantization to f32 for the f32-activation path: weights are expanded once per row and
// dotted with every token's f32 activations (see act_format_for for why not 8-bit activations).
void dequant_q5_0_row(const uint8_t* w, float* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, w += kQ5_0Bytes, out += 32) {
    const __m256i q = unpack_q5_0(w);
    const __m256 d = _mm256_set1_ps(load_f16(w));
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * i, q5_0_values(eighth(q, i), d));
  }
}

// 32 unsigned bytes times scale minus offset, as floats.
inline void store_u8_affine(__m256i q, float scale, float offset, float* out) {
  const __m256 s = _mm256_set1_ps(scale), o = _mm256_set1_ps(offset);
  for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * i, u8_affine(eighth(q, i), s, o));
}

void dequant_q4_k_row(const uint8_t* w, float* out, int64_t nb) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b, w += kQ4_KBytes, out += 256) {
    const float d = load_f16(w), dmin = load_f16(w + 2);
    uint8_t sc[8], m[8];
    q4k_scales(w + 4, sc, m);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 + 32 * c));
      store_u8_affine(_mm256_and_si256(q, m4), d * sc[2 * c], dmin * m[2 * c], out + 64 * c);
      store_u8_affine(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), d * sc[2 * c + 1],
                      dmin * m[2 * c + 1], out + 64 * c + 32);
    }
  }
}

void dequant_q6_k_row(const uint8_t* w, float* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, w += kQ6_KBytes, out += 256) {
    const auto* scales = reinterpret_cast<const int8_t*>(w + 192);
    const float d = load_f16(w + 208);
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      q6k_runs(w, h, q);
      for (int k = 0; k < 4; ++k) {
        float* o = out + 128 * h + 32 * k;
        const __m256 s0 = _mm256_set1_ps(d * scales[8 * h + 2 * k]);
        const __m256 s1 = _mm256_set1_ps(d * scales[8 * h + 2 * k + 1]);
        for (int i = 0; i < 4; ++i)
          _mm256_storeu_ps(o + 8 * i, q6k_values(eighth(q[k], i), i < 2 ? s0 : s1));
      }
    }
  }
}

template <int NT>
void dot_quant_avx2(DType dtype, const uint8_t* w, const void* const* acts, int64_t n, float* out) {
  const auto* a8 = reinterpret_cast<const BlockQ8* const*>(acts);
  const auto* ak = reinterpret_cast<const BlockQ8K* const*>(acts);
  switch (dtype) {
    case DType::q4_0:
      return dot_legacy_avx2<NT, kQ4_0Bytes>(w, a8, n / 32, out, unpack_q4_0);
    case DType::q5_0:
      return dot_legacy_avx2<NT, kQ5_0Bytes>(w, a8, n / 32, out, unpack_q5_0);
    case DType::q8_0:
      return dot_q8_0_f32_avx2<NT>(w, reinterpret_cast<const float* const*>(acts), n / 32, out);
    case DType::q4_k:
      return dot_q4_k_avx2<NT>(w, ak, n / 256, out);
    case DType::q6_k:
      return dot_q6_k_avx2<NT>(w, ak, n / 256, out);
    default:
      fail(ErrorCode::internal, "dot_quant_avx2: no kernel for {}", dtype_name(dtype));
  }
}
#endif

float dot_q8_0_scalar(const uint8_t* w, const float* x, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b, w += kQ8_0Bytes) {
    float sum = 0;
    for (int j = 0; j < 32; ++j)
      sum += static_cast<float>(static_cast<int8_t>(w[2 + j])) * x[32 * b + j];
    acc += load_f16(w) * sum;
  }
  return acc;
}

float dot_q4_0_scalar(const uint8_t* w, const BlockQ8* a, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b, w += kQ4_0Bytes) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q4_0_value(w, j) * a[b].qs[j];
    acc += load_f16(w) * a[b].d * static_cast<float>(sum);
  }
  return acc;
}

float dot_q5_0_scalar(const uint8_t* w, const BlockQ8* a, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b, w += kQ5_0Bytes) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q5_0_value(w, j) * a[b].qs[j];
    acc += load_f16(w) * a[b].d * static_cast<float>(sum);
  }
  return acc;
}

float dot_q4_k_scalar(const uint8_t* w, const BlockQ8K* a, int64_t nb) {
  float acc_total = 0;
  for (int64_t b = 0; b < nb; ++b, w += kQ4_KBytes) {
    const float d = load_f16(w) * a[b].d;
    const float dmin = load_f16(w + 2) * a[b].d;
    uint8_t sc[8], m[8];
    q4k_scales(w + 4, sc, m);
    int32_t min_sum = 0;
    for (int s = 0; s < 8; ++s) min_sum += m[s] * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
    acc_total -= dmin * static_cast<float>(min_sum);
    const uint8_t* qs = w + 16;
    int32_t sumi = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 32; ++l) {
        s0 += (qs[32 * c + l] & 0xF) * a[b].qs[64 * c + l];
        s1 += (qs[32 * c + l] >> 4) * a[b].qs[64 * c + 32 + l];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    acc_total += d * static_cast<float>(sumi);
  }
  return acc_total;
}

float dot_q6_k_scalar(const uint8_t* w, const BlockQ8K* a, int64_t nb) {
  float acc_total = 0;
  for (int64_t b = 0; b < nb; ++b, w += kQ6_KBytes) {
    const uint8_t* ql = w;
    const uint8_t* qh = w + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(w + 192);
    const float d = load_f16(w + 208) * a[b].d;
    int32_t bias = 0;  // weights are stored +32; subtract 32 * sum(scale * activation)
    for (int g = 0; g < 16; ++g) bias += scales[g] * a[b].bsums[g];
    int32_t sumi = 0;
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lbyte = ql[64 * h + 32 * (k & 1) + l];
      const int lo = k < 2 ? lbyte & 0xF : lbyte >> 4;
      const int hi = (qh[32 * h + l] >> (2 * k)) & 3;
      sumi += scales[e / 16] * (lo | (hi << 4)) * a[b].qs[e];
    }
    acc_total += d * static_cast<float>(sumi - 32 * bias);
  }
  return acc_total;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  int64_t i = 0;
  float acc_tail = 0;
#ifdef MEMRA_AVX2
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), acc);
  }
  acc_tail = hsum(acc);
#endif
  for (; i < n; ++i) acc_tail += f16_to_f32(w[i]) * x[i];
  return acc_tail;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  int64_t i = 0;
  float acc_tail = 0;
#ifdef MEMRA_AVX2
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256i wi =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    const __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(wi, 16));
    acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), acc);
  }
  acc_tail = hsum(acc);
#endif
  for (; i < n; ++i) acc_tail += bf16_to_f32(w[i]) * x[i];
  return acc_tail;
}

template <typename Block>
void quantize_blocks(const float* x, Block* out, int64_t n_blocks, int block) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * block;
    float amax = 0;
    for (int j = 0; j < block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d > 0 ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int j = 0; j < block; ++j) {
      const float q = std::nearbyint(xb[j] * id);
      out[b].qs[j] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

}  // namespace

ActFormat act_format_for(DType weight) {
  switch (weight) {
    case DType::q4_0:
    case DType::q5_0:
      return ActFormat::q8;
    case DType::q4_k:
    case DType::q6_k:
      return ActFormat::q8k;
    default:
      return ActFormat::f32;
  }
}

bool has_fast_dot(DType weight) {
  switch (weight) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q4_0:
    case DType::q5_0:
    case DType::q8_0:
    case DType::q4_k:
    case DType::q6_k:
      return true;
    default:
      return false;
  }
}

void quantize_q8(const float* x, BlockQ8* out, int64_t n) {
  quantize_blocks(x, out, n / 32, 32);
}

void quantize_q8k(const float* x, BlockQ8K* out, int64_t n) {
  quantize_blocks(x, out, n / 256, 256);
  for (int64_t b = 0; b < n / 256; ++b) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += out[b].qs[16 * g + j];
      out[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float acc_tail = 0;
#ifdef MEMRA_AVX2
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  acc_tail = hsum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) acc_tail += a[i] * b[i];
  return acc_tail;
}

bool dequant_row_fast(DType dtype, const void* row, float* out, int64_t n) {
#ifdef MEMRA_AVX2
  const auto* w = static_cast<const uint8_t*>(row);
  switch (dtype) {
    case DType::q5_0:
      dequant_q5_0_row(w, out, n / 32);
      return true;
    case DType::q4_k:
      dequant_q4_k_row(w, out, n / 256);
      return true;
    case DType::q6_k:
      dequant_q6_k_row(w, out, n / 256);
      return true;
    default:
      return false;
  }
#else
  (void)dtype, (void)row, (void)out, (void)n;
  return false;
#endif
}

float dot_row_scalar(DType dtype, const void* row, const void* act, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(row);
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      float out = 0;
      dot_rows(dtype, row, &act, 1, n, &out);
      return out;
    }
    case DType::q4_0:
      return dot_q4_0_scalar(w, static_cast<const BlockQ8*>(act), n / 32);
    case DType::q5_0:
      return dot_q5_0_scalar(w, static_cast<const BlockQ8*>(act), n / 32);
    case DType::q8_0:
      return dot_q8_0_scalar(w, static_cast<const float*>(act), n / 32);
    case DType::q4_k:
      return dot_q4_k_scalar(w, static_cast<const BlockQ8K*>(act), n / 256);
    case DType::q6_k:
      return dot_q6_k_scalar(w, static_cast<const BlockQ8K*>(act), n / 256);
    default:
      fail(ErrorCode::internal, "dot_row: no fast dot for {}", dtype_name(dtype));
  }
}

float dot_row(DType dtype, const void* row, const void* act, int64_t n) {
  float out = 0;
  dot_rows(dtype, row, &act, 1, n, &out);
  return out;
}

void dot_rows(DType dtype, const void* row, const void* const* acts, int n_acts, int64_t n,
              float* out) {
  const auto* w = static_cast<const uint8_t*>(row);
  if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16) {
    for (int t = 0; t < n_acts; ++t) {
      const auto* x = static_cast<const float*>(acts[t]);
      if (dtype == DType::f32)
        out[t] = dot_f32(static_cast<const float*>(row), x, n);
      else if (dtype == DType::f16)
        out[t] = dot_f16(static_cast<const uint16_t*>(row), x, n);
      else
        out[t] = dot_bf16(static_cast<const uint16_t*>(row), x, n);
    }
    return;
  }
#ifdef MEMRA_AVX2
  switch (n_acts) {
    case 1:
      return dot_quant_avx2<1>(dtype, w, acts, n, out);
    case 2:
      return dot_quant_avx2<2>(dtype, w, acts, n, out);
    case 3:
      return dot_quant_avx2<3>(dtype, w, acts, n, out);
    case 4:
      return dot_quant_avx2<4>(dtype, w, acts, n, out);
    default:
      fail(ErrorCode::internal, "dot_rows: {} activation rows (1..{})", n_acts, kMaxDotActs);
  }
#else
  for (int t = 0; t < n_acts; ++t) out[t] = dot_row_scalar(dtype, w, acts[t], n);
#endif
}

}  // namespace memra::cpu
