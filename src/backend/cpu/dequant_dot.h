// One token's activations dotted with several quantized weight rows at once: a decode step's
// matmul, each weight dequantized in a register instead of through a row in memory.
//
// The results are bit for bit what the multi-token path computes for the same row and token
// (dequant_row_fast's floats, quant_dot.h, summed in dot_tile.h's order), so a token's outputs do
// not depend on how many tokens shared its step (the determinism contract). The row's round trip
// through memory goes, and several rows at once share x's loads and give the core independent
// chains. Q4_K and Q5_0 only: the same form measured slower for Q6_K (its unpacked runs do not
// fit the registers for four rows) and for Q8_0, whose one-row kernel (dot_rows) stays
// (docs/PERFORMANCE.md, "CPU forward").
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace memra::cpu {

inline constexpr int kMaxTokenRows = 4;

// Whether dot_token_rows has a kernel for weight rows of this dtype in this build.
bool has_token_rows_dot(DType dtype);

// out[r] = row r . x for r in [0, n_rows), n_rows in 1..kMaxTokenRows, row r at rows + r *
// row_bytes in the dtype's ggml layout, n elements (a multiple of the dtype's block). Only for
// has_token_rows_dot dtypes.
void dot_token_rows(DType dtype, const uint8_t* rows, uint64_t row_bytes, int n_rows,
                    const float* x, int64_t n, float* out);

}  // namespace memra::cpu
