// CPU quant codecs in the standard ggml bit layouts. Rows hold n elements, n a multiple of the
// dtype's block size; src/dst hold n / block_size blocks of type_size bytes (core/dtype.h).
// Dequantization is bit-identical to the `gguf` Python package's reference; quantization is
// byte-identical to it where it implements the type (docs/TESTING.md lists any difference).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace memra::quant {

// True for dtypes dequantize_row handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool can_dequantize(DType dtype);
// True for dtypes quantize_row produces: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K.
bool can_quantize(DType dtype);

// Throws Error(unsupported) naming the dtype when it is not handled, Error(invalid_argument)
// when n is not a multiple of the block size. quantize_row to F32/F16/BF16 converts NaN and Inf
// as the reference does (F16/BF16 keep NaN quiet); to a block type it refuses a NaN or infinite
// element with Error(invalid_argument) naming its index. K-quant encoders follow llama.cpp's
// reference (no importance matrix) algorithm; docs/TESTING.md "Quant codecs gate" says how each
// encoder is checked.
void dequantize_row(DType dtype, const void* src, float* dst, int64_t n);
void quantize_row(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace memra::quant
