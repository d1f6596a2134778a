// Dispatch of the quant codecs by dtype, the plain float types (F32, F16, BF16), and the checks
// every row passes first: whole blocks only, and finite input for the quantized encoders.
#include "formats/quant.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/half.h"
#include "formats/quant_blocks.h"

namespace memra::quant {

namespace {

using DequantFn = void (*)(const uint8_t*, float*, int64_t);
using QuantFn = void (*)(const float*, uint8_t*, int64_t);

DequantFn dequant_fn(DType dtype) {
  switch (dtype) {
    case DType::q4_0:
      return detail::dequant_q4_0;
    case DType::q4_1:
      return detail::dequant_q4_1;
    case DType::q5_0:
      return detail::dequant_q5_0;
    case DType::q5_1:
      return detail::dequant_q5_1;
    case DType::q8_0:
      return detail::dequant_q8_0;
    case DType::q2_k:
      return detail::dequant_q2_k;
    case DType::q3_k:
      return detail::dequant_q3_k;
    case DType::q4_k:
      return detail::dequant_q4_k;
    case DType::q5_k:
      return detail::dequant_q5_k;
    case DType::q6_k:
      return detail::dequant_q6_k;
    case DType::iq4_nl:
      return detail::dequant_iq4_nl;
    case DType::iq4_xs:
      return detail::dequant_iq4_xs;
    default:
      return nullptr;
  }
}

QuantFn quant_fn(DType dtype) {
  switch (dtype) {
    case DType::q4_0:
      return detail::quant_q4_0;
    case DType::q4_1:
      return detail::quant_q4_1;
    case DType::q5_0:
      return detail::quant_q5_0;
    case DType::q5_1:
      return detail::quant_q5_1;
    case DType::q8_0:
      return detail::quant_q8_0;
    case DType::q4_k:
      return detail::quant_q4_k;
    case DType::q5_k:
      return detail::quant_q5_k;
    case DType::q6_k:
      return detail::quant_q6_k;
    default:
      return nullptr;
  }
}

bool is_float_type(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

// Every f16 bit pattern's float value (256 KiB, built once): the exact conversion of
// core/half.h at table-lookup speed.
const std::array<float, 65536>& f16_table() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<float, 65536>>();
    for (uint32_t h = 0; h < 65536; ++h) (*t)[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return *table;
}

// f32 -> f16 as numpy's astype(float16), the gate's reference: like core/half.h except that a NaN
// keeps its payload's top bits unquieted (a signalling NaN stays signalling, never becoming Inf).
uint16_t to_f16_like_numpy(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) <= 0x7f800000u) return f32_to_f16(value);
  const uint32_t payload = std::max<uint32_t>(1, (bits & 0x007fffffu) >> 13);
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7c00u | payload);
}

int64_t checked_blocks(DType dtype, int64_t n, const char* what) {
  const DTypeTraits& traits = dtype_traits(dtype);
  if (n < 0 || n % traits.block_size != 0) {
    fail(ErrorCode::invalid_argument,
         "{}: row of {} elements is not a whole number of {} blocks of {}", what, n, traits.name,
         traits.block_size);
  }
  return n / traits.block_size;
}

}  // namespace

bool can_dequantize(DType dtype) {
  return is_float_type(dtype) || dequant_fn(dtype) != nullptr;
}

bool can_quantize(DType dtype) {
  return is_float_type(dtype) || quant_fn(dtype) != nullptr;
}

void dequantize_row(DType dtype, const void* src, float* dst, int64_t n) {
  if (!can_dequantize(dtype)) {
    fail(ErrorCode::unsupported, "dequantize: tensor type {} is not supported", dtype_name(dtype));
  }
  const int64_t n_blocks = checked_blocks(dtype, n, "dequantize");
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (dtype) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::f16: {
      const auto& table = f16_table();
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = table[h];
      }
      return;
    }
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    default:
      dequant_fn(dtype)(bytes, dst, n_blocks);
  }
}

void quantize_row(DType dtype, const float* src, void* dst, int64_t n) {
  if (!can_quantize(dtype)) {
    fail(ErrorCode::unsupported, "quantize: tensor type {} is not supported as a target",
         dtype_name(dtype));
  }
  const int64_t n_blocks = checked_blocks(dtype, n, "quantize");
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = to_f16_like_numpy(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    default:
      break;
  }
  // The block encoders' scales are undefined for NaN/Inf (the reference casts NaN to integers):
  // refuse instead of writing arbitrary bytes.
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) {
      fail(ErrorCode::invalid_argument,
           "quantize to {}: element {} is {} (only finite values can be quantized)",
           dtype_name(dtype), i, std::isnan(src[i]) ? "NaN" : "infinite");
    }
  }
  quant_fn(dtype)(src, bytes, n_blocks);
}

}  // namespace memra::quant
