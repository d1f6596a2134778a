// Element types of tensors. The enum values of ggml types equal their GGUF type ids, so a GGUF
// tensor type converts by a checked cast (dtype_from_ggml). Quantized types store blocks of
// block_size elements in type_size bytes each; a row of n elements takes n / block_size blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace memra {

enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
  // Types that exist only outside GGUF (safetensors); ids chosen above the ggml range.
  f8_e4m3 = 1000,
  u8 = 1001,
};

struct DTypeTraits {
  std::string_view name;  // ggml spelling, e.g. "Q4_K", "BF16"
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t type_size;     // bytes per block
  bool quantized;
};

// Traits of a dtype; every enumerator has an entry.
const DTypeTraits& dtype_traits(DType dtype);
inline std::string_view dtype_name(DType dtype) {
  return dtype_traits(dtype).name;
}

// The dtype for a GGUF tensor type id, or nullopt for ids memra does not know.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
// Case-insensitive lookup by ggml name ("q4_k", "BF16").
std::optional<DType> dtype_from_name(std::string_view name);
// A KV cache type as users spell it (--kv-dtype): any dtype name, or "fp8" (case-insensitive)
// for F8_E4M3, the one FP8 layout a KV cache takes. Whether a backend keeps it is its own check.
std::optional<DType> kv_dtype_from_name(std::string_view name);

// Bytes of a row of n_elements, checked: n_elements must be a multiple of the block size.
// Throws Error(malformed_file) naming `what` on a partial block or overflow.
uint64_t dtype_row_bytes(DType dtype, uint64_t n_elements, std::string_view what);

}  // namespace memra
