// Each output keeps dot_f32's two 8-lane accumulators (runs of 8 alternate between them), its
// horizontal sum of their sum and its scalar tail, so a tile's outputs are dot_f32's bits. Two
// rows by two tokens: eight accumulators, four runs of x and two of w fill 14 of AVX2's 16
// registers (a third row or token would spill).
#include "backend/cpu/dot_tile.h"

#include "backend/cpu/block_simd.h"
#include "backend/cpu/quant_dot.h"
#include "core/error.h"

namespace memra::cpu {

namespace {

#ifdef MEMRA_AVX2
template <int R, int T>
void tile(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t n, float* y,
          int64_t y_stride) {
  __m256 acc0[R][T], acc1[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc0[r][t] = acc1[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = _mm256_loadu_ps(x + t * x_stride + i);
      x1[t] = _mm256_loadu_ps(x + t * x_stride + i + 8);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 w0 = _mm256_loadu_ps(w + r * w_stride + i);
      const __m256 w1 = _mm256_loadu_ps(w + r * w_stride + i + 8);
      for (int t = 0; t < T; ++t) {
        acc0[r][t] = _mm256_fmadd_ps(w0, x0[t], acc0[r][t]);
        acc1[r][t] = _mm256_fmadd_ps(w1, x1[t], acc1[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float acc = detail::hsum(_mm256_add_ps(acc0[r][t], acc1[r][t]));
      for (int64_t j = i; j < n; ++j) acc += w[r * w_stride + j] * x[t * x_stride + j];
      y[t * y_stride + r] = acc;
    }
  }
}
#endif

}  // namespace

void dot_f32_tile(const float* w, int64_t w_stride, int n_rows, const float* x, int64_t x_stride,
                  int n_tokens, int64_t n, float* y, int64_t y_stride) {
  if (n_rows < 1 || n_rows > kTileRows || n_tokens < 1 || n_tokens > kTileTokens)
    fail(ErrorCode::internal, "dot_f32_tile: {} rows x {} tokens (at most {} x {})", n_rows,
         n_tokens, kTileRows, kTileTokens);
#ifdef MEMRA_AVX2
  if (n_rows == 2 && n_tokens == 2) return tile<2, 2>(w, w_stride, x, x_stride, n, y, y_stride);
  if (n_rows == 2) return tile<2, 1>(w, w_stride, x, x_stride, n, y, y_stride);
  if (n_tokens == 2) return tile<1, 2>(w, w_stride, x, x_stride, n, y, y_stride);
#endif
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < n_tokens; ++t)
      y[t * y_stride + r] = dot_f32(w + r * w_stride, x + t * x_stride, n);
}

}  // namespace memra::cpu
