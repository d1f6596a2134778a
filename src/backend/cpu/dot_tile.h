// dot_f32 over a tile of weight rows x activation rows: out(t, r) = dot_f32(w row r, x row t),
// the same bits, computed together so each loaded run of a weight row serves every token of the
// tile and each run of x every row (dot_f32 alone loads two floats per multiply-add). The
// multi-token matmul's inner loop (batched prefill).
#pragma once

#include <cstdint>

namespace memra::cpu {

inline constexpr int kTileRows = 2, kTileTokens = 2;

// For r < n_rows (1..kTileRows) and t < n_tokens (1..kTileTokens): y[t * y_stride + r] =
// dot_f32(w + r * w_stride, x + t * x_stride, n).
void dot_f32_tile(const float* w, int64_t w_stride, int n_rows, const float* x, int64_t x_stride,
                  int n_tokens, int64_t n, float* y, int64_t y_stride);

}  // namespace memra::cpu
