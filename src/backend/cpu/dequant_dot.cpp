// Each kernel keeps one 8-lane accumulator a row, as dot_tile.h's products do, and takes the
// weights' floats from the steps block_simd.h shares with the row dequantizers. x's runs are
// loaded once for all the rows; each row's next blocks are prefetched (the rows are separate
// streams, which the hardware prefetcher alone served worse: decode 3-5% slower without).
#include "backend/cpu/dequant_dot.h"

#include "backend/cpu/block_simd.h"
#include "core/error.h"

namespace memra::cpu {

namespace {

using namespace detail;

#ifdef MEMRA_AVX2
constexpr int kPrefetchBytes = 512;  // ~3.5 Q4_K blocks, ~23 Q5_0 blocks ahead

// Per-row sums in dot_tile.h's order: one 8-lane accumulator a row, runs of 8 in order.
template <int R>
struct RowSums {
  __m256 acc[R];
  RowSums() {
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  }
  // The four runs of a 32-element group of row r, times x's four runs.
  void add_group(int r, const __m256* w, const __m256* x) {
    for (int i = 0; i < 4; ++i) acc[r] = _mm256_fmadd_ps(w[i], x[i], acc[r]);
  }
  void finish(float* out) const {
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
  }
};

inline void load_group(const float* x, __m256* xv) {
  for (int i = 0; i < 4; ++i) xv[i] = _mm256_loadu_ps(x + 8 * i);
}

template <int R>
void q4_k_rows(const uint8_t* w, uint64_t row_bytes, const float* x, int64_t nb, float* out) {
  RowSums<R> sums;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    float scale[R][8], offset[R][8];
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * kQ4_KBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + 64, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + 128, _MM_HINT_T0);
      const float d = load_f16(blk), dmin = load_f16(blk + 2);
      uint8_t sc[8], m[8];
      q4k_scales(blk + 4, sc, m);
      for (int j = 0; j < 8; ++j) {
        scale[r][j] = d * sc[j];
        offset[r][j] = dmin * m[j];
      }
    }
    for (int g = 0; g < 8; ++g) {  // 32-element groups: chunk g / 2, low nibbles when g is even
      __m256 xv[4];
      load_group(x + b * 256 + 32 * g, xv);
      for (int r = 0; r < R; ++r) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            w + r * row_bytes + b * kQ4_KBytes + 16 + 32 * (g / 2)));
        const __m256i q = _mm256_and_si256(g % 2 ? _mm256_srli_epi16(raw, 4) : raw, m4);
        const __m256 s = _mm256_set1_ps(scale[r][g]), o = _mm256_set1_ps(offset[r][g]);
        __m256 wv[4];
        for (int i = 0; i < 4; ++i) wv[i] = u8_affine(eighth(q, i), s, o);
        sums.add_group(r, wv, xv);
      }
    }
  }
  sums.finish(out);
}

template <int R>
void q5_0_rows(const uint8_t* w, uint64_t row_bytes, const float* x, int64_t nb, float* out) {
  RowSums<R> sums;
  for (int64_t b = 0; b < nb; ++b) {
    __m256 xv[4];
    load_group(x + b * 32, xv);
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * kQ5_0Bytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
      const __m256i q = unpack_q5_0(blk);
      const __m256 d = _mm256_set1_ps(load_f16(blk));
      __m256 wv[4];
      for (int i = 0; i < 4; ++i) wv[i] = q5_0_values(eighth(q, i), d);
      sums.add_group(r, wv, xv);
    }
  }
  sums.finish(out);
}

template <int R>
void rows_of(DType dtype, const uint8_t* w, uint64_t row_bytes, const float* x, int64_t n,
             float* out) {
  switch (dtype) {
    case DType::q4_k:
      return q4_k_rows<R>(w, row_bytes, x, n / 256, out);
    case DType::q5_0:
      return q5_0_rows<R>(w, row_bytes, x, n / 32, out);
    default:
      fail(ErrorCode::internal, "dot_token_rows: no kernel for {}", dtype_name(dtype));
  }
}
#endif

}  // namespace

bool has_token_rows_dot(DType dtype) {
#ifdef MEMRA_AVX2
  return dtype == DType::q4_k || dtype == DType::q5_0;
#else
  (void)dtype;
  return false;
#endif
}

void dot_token_rows(DType dtype, const uint8_t* rows, uint64_t row_bytes, int n_rows,
                    const float* x, int64_t n, float* out) {
#ifdef MEMRA_AVX2
  switch (n_rows) {
    case 1:
      return rows_of<1>(dtype, rows, row_bytes, x, n, out);
    case 2:
      return rows_of<2>(dtype, rows, row_bytes, x, n, out);
    case 3:
      return rows_of<3>(dtype, rows, row_bytes, x, n, out);
    case 4:
      return rows_of<4>(dtype, rows, row_bytes, x, n, out);
    default:
      break;
  }
#endif
  (void)rows, (void)row_bytes, (void)x, (void)n, (void)out;
  fail(ErrorCode::internal, "dot_token_rows: {} rows of {} (1..{}, with AVX2)", n_rows,
       dtype_name(dtype), kMaxTokenRows);
}

}  // namespace memra::cpu
