#include "backend/cpu/dot_tile.h"

#include <cmath>

#include "backend/cpu/block_simd.h"
#include "core/error.h"

namespace memra::cpu {

namespace {

template <int R, int T>
void tile(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t n, float* y,
          int64_t y_stride) {
  int64_t i = 0;
  float sums[R][T] = {};
#ifdef MEMRA_AVX2
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    __m256 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * x_stride + i);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * w_stride + i);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) sums[r][t] = detail::hsum(acc[r][t]);
#else
  // The same order without SIMD: eight lanes, then their sum in hsum's order.
  float lanes[R][T][8] = {};
  for (; i + 8 <= n; i += 8)
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        for (int l = 0; l < 8; ++l)
          lanes[r][t][l] =
              std::fma(w[r * w_stride + i + l], x[t * x_stride + i + l], lanes[r][t][l]);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      const float* v = lanes[r][t];
      const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
      sums[r][t] = (a0 + a2) + (a1 + a3);
    }
#endif
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float acc = sums[r][t];
      for (int64_t j = i; j < n; ++j) acc += w[r * w_stride + j] * x[t * x_stride + j];
      y[t * y_stride + r] = acc;
    }
  }
}

template <int R>
void tile_rows(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int n_tokens,
               int64_t n, float* y, int64_t y_stride) {
  switch (n_tokens) {
    case 1:
      return tile<R, 1>(w, w_stride, x, x_stride, n, y, y_stride);
    case 2:
      return tile<R, 2>(w, w_stride, x, x_stride, n, y, y_stride);
    default:
      return tile<R, 3>(w, w_stride, x, x_stride, n, y, y_stride);
  }
}

}  // namespace

void dot_f32_tile(const float* w, int64_t w_stride, int n_rows, const float* x, int64_t x_stride,
                  int n_tokens, int64_t n, float* y, int64_t y_stride) {
  if (n_rows < 1 || n_rows > kTileRows || n_tokens < 1 || n_tokens > kTileTokens)
    fail(ErrorCode::internal, "dot_f32_tile: {} rows x {} tokens (at most {} x {})", n_rows,
         n_tokens, kTileRows, kTileTokens);
  switch (n_rows) {
    case 1:
      return tile_rows<1>(w, w_stride, x, x_stride, n_tokens, n, y, y_stride);
    case 2:
      return tile_rows<2>(w, w_stride, x, x_stride, n_tokens, n, y, y_stride);
    case 3:
      return tile_rows<3>(w, w_stride, x, x_stride, n_tokens, n, y, y_stride);
    default:
      return tile_rows<4>(w, w_stride, x, x_stride, n_tokens, n, y, y_stride);
  }
}

}  // namespace memra::cpu
