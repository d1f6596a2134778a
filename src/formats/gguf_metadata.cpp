// GGUF metadata: value type names and the typed, checked lookups of Metadata. A getter never
// reinterprets a value as another type (the "scores declared UINT8, read as float" bug class):
// a stored type that does not fit the request is an error naming the key.
#include <limits>

#include "core/error.h"
#include "formats/gguf.h"

namespace memra::gguf {
namespace {

bool is_unsigned_int(ValueType t) {
  return t == ValueType::u8 || t == ValueType::u16 || t == ValueType::u32 || t == ValueType::u64;
}
bool is_signed_int(ValueType t) {
  return t == ValueType::i8 || t == ValueType::i16 || t == ValueType::i32 || t == ValueType::i64;
}
bool is_int(ValueType t) {
  return is_unsigned_int(t) || is_signed_int(t);
}
bool is_float(ValueType t) {
  return t == ValueType::f32 || t == ValueType::f64;
}

[[noreturn]] void wrong_type(std::string_view key, const Value& v, std::string_view wanted) {
  fail(ErrorCode::malformed_file, "metadata key '{}' has type {}, expected {}", key,
       value_type_name(v.type), wanted);
}

// The integer held by v (an integer-typed value), range-checked into int64_t.
int64_t int_of(std::string_view key, const Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(ErrorCode::malformed_file, "metadata key '{}' value {} does not fit in int64", key, *u);
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v.data)) return *i;
  fail(ErrorCode::internal, "metadata key '{}': integer value without integer storage", key);
}

double float_of(std::string_view key, const Value& v) {
  if (is_float(v.type)) {
    if (const auto* d = std::get_if<double>(&v.data)) return *d;
    fail(ErrorCode::internal, "metadata key '{}': float value without float storage", key);
  }
  return static_cast<double>(int_of(key, v));
}

const Array& array_of(std::string_view key, const Value& v, std::string_view wanted) {
  const auto* a = std::get_if<Array>(&v.data);
  if (v.type != ValueType::array || a == nullptr) wrong_type(key, v, wanted);
  return *a;
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::u8:
      return "UINT8";
    case ValueType::i8:
      return "INT8";
    case ValueType::u16:
      return "UINT16";
    case ValueType::i16:
      return "INT16";
    case ValueType::u32:
      return "UINT32";
    case ValueType::i32:
      return "INT32";
    case ValueType::f32:
      return "FLOAT32";
    case ValueType::boolean:
      return "BOOL";
    case ValueType::string:
      return "STRING";
    case ValueType::array:
      return "ARRAY";
    case ValueType::u64:
      return "UINT64";
    case ValueType::i64:
      return "INT64";
    case ValueType::f64:
      return "FLOAT64";
  }
  return "UNKNOWN";
}

const Value* Metadata::find(std::string_view key) const {
  for (const KeyValue& kv : entries_) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Metadata::set(std::string key, Value value) {
  for (KeyValue& kv : entries_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

std::optional<std::string> Metadata::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const auto* s = std::get_if<std::string>(&v->data);
  if (v->type != ValueType::string || s == nullptr) wrong_type(key, *v, "STRING");
  return *s;
}

std::optional<int64_t> Metadata::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_int(v->type)) wrong_type(key, *v, "an integer");
  return int_of(key, *v);
}

std::optional<double> Metadata::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_int(v->type) && !is_float(v->type)) wrong_type(key, *v, "a number");
  return float_of(key, *v);
}

std::optional<bool> Metadata::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const auto* b = std::get_if<bool>(&v->data);
  if (v->type != ValueType::boolean || b == nullptr) wrong_type(key, *v, "BOOL");
  return *b;
}

std::optional<std::vector<std::string>> Metadata::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const Array& a = array_of(key, *v, "ARRAY of STRING");
  if (a.element_type != ValueType::string) {
    fail(ErrorCode::malformed_file, "metadata key '{}' is an ARRAY of {}, expected ARRAY of STRING",
         key, value_type_name(a.element_type));
  }
  std::vector<std::string> out;
  out.reserve(a.items.size());
  for (const Value& item : a.items) {
    const auto* s = std::get_if<std::string>(&item.data);
    if (s == nullptr) wrong_type(key, item, "STRING items");
    out.push_back(*s);
  }
  return out;
}

std::optional<std::vector<int64_t>> Metadata::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const Array& a = array_of(key, *v, "ARRAY of integers");
  if (!is_int(a.element_type)) {
    fail(ErrorCode::malformed_file, "metadata key '{}' is an ARRAY of {}, expected integers", key,
         value_type_name(a.element_type));
  }
  std::vector<int64_t> out;
  out.reserve(a.items.size());
  for (const Value& item : a.items) out.push_back(int_of(key, item));
  return out;
}

std::optional<std::vector<double>> Metadata::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const Array& a = array_of(key, *v, "ARRAY of numbers");
  if (!is_int(a.element_type) && !is_float(a.element_type)) {
    fail(ErrorCode::malformed_file, "metadata key '{}' is an ARRAY of {}, expected numbers", key,
         value_type_name(a.element_type));
  }
  std::vector<double> out;
  out.reserve(a.items.size());
  for (const Value& item : a.items) out.push_back(float_of(key, item));
  return out;
}

std::string Metadata::require_string(std::string_view key) const {
  auto v = get_string(key);
  if (!v) fail(ErrorCode::not_found, "metadata key '{}' is missing", key);
  return std::move(*v);
}

int64_t Metadata::require_int(std::string_view key) const {
  auto v = get_int(key);
  if (!v) fail(ErrorCode::not_found, "metadata key '{}' is missing", key);
  return *v;
}

double Metadata::require_float(std::string_view key) const {
  auto v = get_float(key);
  if (!v) fail(ErrorCode::not_found, "metadata key '{}' is missing", key);
  return *v;
}

}  // namespace memra::gguf
