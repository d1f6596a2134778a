// The CPU matmul's products over a tile of weight rows x activation rows, in the one order every
// matmul path sums a product in (a decode step's token kernels too, dequant_dot.h): element i goes
// to lane i % 8 of one 8-lane accumulator, run by run of 8 in order; then the accumulator's
// horizontal sum; then the elements past the last whole run, in order. Whatever the tile, a
// product's bits are the same, so a token's outputs do not depend on how many tokens share its
// step (the determinism contract).
//
// Computed together, each loaded run of a weight row serves every token of the tile and each run
// of x every row: four rows by three tokens keep twelve accumulators, three runs of x and one of
// w in AVX2's 16 registers (1.5-1.6x the multiply-add rate of two rows by two tokens with two
// accumulators a product, docs/PERFORMANCE.md, "CPU forward").
#pragma once

#include <cstdint>

namespace memra::cpu {

inline constexpr int kTileRows = 4, kTileTokens = 3;

// For r < n_rows (1..kTileRows) and t < n_tokens (1..kTileTokens): y[t * y_stride + r] = the
// product of the n floats at w + r * w_stride and at x + t * x_stride, in the order above.
void dot_f32_tile(const float* w, int64_t w_stride, int n_rows, const float* x, int64_t x_stride,
                  int n_tokens, int64_t n, float* y, int64_t y_stride);

}  // namespace memra::cpu
