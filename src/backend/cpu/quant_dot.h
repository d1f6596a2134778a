// Dot products of one quantized weight row with activations quantized to 8-bit blocks (the
// ggml-style scheme that lets the inner loop run on int8 SIMD): Q4_0/Q5_0 weights pair with Q8
// blocks of 32, K-quants (Q4_K, Q6_K) with Q8K super-blocks of 256 that carry partial sums.
// F32/F16/BF16 and Q8_0 weights use f32 activations directly (Q8_0: see quant_dot.cpp for why).
// AVX2 when the build has it, scalar else.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace memra::cpu {

struct BlockQ8 {  // 32 activations: x ~= d * qs
  float d;
  int8_t qs[32];
};

struct BlockQ8K {  // 256 activations with sums of each 16 (for the K-quants' mins and offsets)
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

enum class ActFormat { f32, q8, q8k };

// Which activation format a weight dtype's fast dot takes; nullopt-like `f32` is also the
// fallback for dtypes with no dedicated kernel (their rows are dequantized then dotted).
ActFormat act_format_for(DType weight);
bool has_fast_dot(DType weight);

// Quantizes n activations (n a multiple of 32 / 256) into blocks.
void quantize_q8(const float* x, BlockQ8* out, int64_t n);
void quantize_q8k(const float* x, BlockQ8K* out, int64_t n);

// Dot of one weight row of n elements (row bytes in ggml layout) with prepared activations;
// `act` points at the format act_format_for(dtype) names. Only for has_fast_dot dtypes.
float dot_row(DType dtype, const void* row, const void* act, int64_t n);

// The same for n_acts (1..kMaxDotActs) activation rows at once: out[t] = row . acts[t]. The
// weight row is unpacked once for all of them (batched prefill).
inline constexpr int kMaxDotActs = 4;
void dot_rows(DType dtype, const void* row, const void* const* acts, int n_acts, int64_t n,
              float* out);

// AVX2 dequantization of one row of Q5_0, Q4_K or Q6_K to f32 (bit-identical to
// quant::dequantize_row up to float rounding of scale products); false when the dtype or the
// build has no such kernel.
bool dequant_row_fast(DType dtype, const void* row, float* out, int64_t n);

// The portable scalar form of dot_row (what non-AVX2 builds run); tests compare the SIMD kernels
// with it.
float dot_row_scalar(DType dtype, const void* row, const void* act, int64_t n);

// f32 dot with f32 accumulation in SIMD lanes.
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace memra::cpu
