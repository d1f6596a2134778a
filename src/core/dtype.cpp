// The dtype table: names, block sizes and block byte sizes in the standard ggml layouts.
#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/checked_math.h"
#include "core/error.h"

namespace memra {
namespace {

struct Entry {
  DType dtype;
  DTypeTraits traits;
};

constexpr std::array kTable = {
    Entry{DType::f32, {"F32", 1, 4, false}},
    Entry{DType::f16, {"F16", 1, 2, false}},
    Entry{DType::q4_0, {"Q4_0", 32, 18, true}},
    Entry{DType::q4_1, {"Q4_1", 32, 20, true}},
    Entry{DType::q5_0, {"Q5_0", 32, 22, true}},
    Entry{DType::q5_1, {"Q5_1", 32, 24, true}},
    Entry{DType::q8_0, {"Q8_0", 32, 34, true}},
    Entry{DType::q8_1, {"Q8_1", 32, 36, true}},
    Entry{DType::q2_k, {"Q2_K", 256, 84, true}},
    Entry{DType::q3_k, {"Q3_K", 256, 110, true}},
    Entry{DType::q4_k, {"Q4_K", 256, 144, true}},
    Entry{DType::q5_k, {"Q5_K", 256, 176, true}},
    Entry{DType::q6_k, {"Q6_K", 256, 210, true}},
    Entry{DType::q8_k, {"Q8_K", 256, 292, true}},
    Entry{DType::iq2_xxs, {"IQ2_XXS", 256, 66, true}},
    Entry{DType::iq2_xs, {"IQ2_XS", 256, 74, true}},
    Entry{DType::iq3_xxs, {"IQ3_XXS", 256, 98, true}},
    Entry{DType::iq1_s, {"IQ1_S", 256, 50, true}},
    Entry{DType::iq4_nl, {"IQ4_NL", 32, 18, true}},
    Entry{DType::iq3_s, {"IQ3_S", 256, 110, true}},
    Entry{DType::iq2_s, {"IQ2_S", 256, 82, true}},
    Entry{DType::iq4_xs, {"IQ4_XS", 256, 136, true}},
    Entry{DType::i8, {"I8", 1, 1, false}},
    Entry{DType::i16, {"I16", 1, 2, false}},
    Entry{DType::i32, {"I32", 1, 4, false}},
    Entry{DType::i64, {"I64", 1, 8, false}},
    Entry{DType::f64, {"F64", 1, 8, false}},
    Entry{DType::iq1_m, {"IQ1_M", 256, 56, true}},
    Entry{DType::bf16, {"BF16", 1, 2, false}},
    Entry{DType::tq1_0, {"TQ1_0", 256, 54, true}},
    Entry{DType::tq2_0, {"TQ2_0", 256, 66, true}},
    Entry{DType::mxfp4, {"MXFP4", 32, 17, true}},
    Entry{DType::f8_e4m3, {"F8_E4M3", 1, 1, false}},
    Entry{DType::u8, {"U8", 1, 1, false}},
};

bool equal_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const DTypeTraits& dtype_traits(DType dtype) {
  for (const Entry& e : kTable) {
    if (e.dtype == dtype) return e.traits;
  }
  fail(ErrorCode::internal, "dtype {} has no traits entry", static_cast<uint32_t>(dtype));
}

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const Entry& e : kTable) {
    if (static_cast<uint32_t>(e.dtype) == ggml_type && ggml_type < 1000) return e.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Entry& e : kTable) {
    if (equal_ignore_case(e.traits.name, name)) return e.dtype;
  }
  return std::nullopt;
}

std::optional<DType> kv_dtype_from_name(std::string_view name) {
  if (equal_ignore_case(name, "fp8")) return DType::f8_e4m3;
  return dtype_from_name(name);
}

uint64_t dtype_row_bytes(DType dtype, uint64_t n_elements, std::string_view what) {
  const DTypeTraits& t = dtype_traits(dtype);
  if (n_elements % t.block_size != 0) {
    fail(ErrorCode::malformed_file, "{}: {} elements is not a multiple of the {} block size {}",
         what, n_elements, t.name, t.block_size);
  }
  return checked_mul(n_elements / t.block_size, t.type_size, what);
}

}  // namespace memra
