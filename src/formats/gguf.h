// GGUF (v2 and v3) reading and writing. The reader maps the file and validates every count,
// length, offset and size against the file before use (the file is untrusted input); a malformed
// file throws Error(malformed_file) naming the field and its byte offset. Tensor data is used in
// place from the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace memra::gguf {

// GGUF metadata value types, numbered as in the file format.
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

std::string_view value_type_name(ValueType type);

struct Value;
struct Array {
  ValueType element_type = ValueType::u8;
  std::vector<Value> items;  // arrays may nest (element_type == array)
};

// One metadata value. Integers are widened to uint64_t/int64_t and floats to double; `type`
// keeps the exact on-disk type so the writer reproduces it.
struct Value {
  ValueType type = ValueType::u8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value make_u32(uint32_t v) { return {ValueType::u32, uint64_t{v}}; }
  static Value make_i32(int32_t v) { return {ValueType::i32, int64_t{v}}; }
  static Value make_u64(uint64_t v) { return {ValueType::u64, v}; }
  static Value make_f32(float v) { return {ValueType::f32, double{v}}; }
  static Value make_bool(bool v) { return {ValueType::boolean, v}; }
  static Value make_string(std::string v) { return {ValueType::string, std::move(v)}; }
  static Value make_array(ValueType element_type, std::vector<Value> items) {
    return {ValueType::array, Array{element_type, std::move(items)}};
  }
};

using KeyValue = std::pair<std::string, Value>;

// Metadata in file order with typed, checked lookups. Getters throw Error(malformed_file) naming
// the key when the value exists with an incompatible type; `require_*` also throws (not_found)
// when the key is absent.
class Metadata {
 public:
  Metadata() = default;
  explicit Metadata(std::vector<KeyValue> entries) : entries_(std::move(entries)) {}

  const std::vector<KeyValue>& entries() const { return entries_; }
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place

  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;   // any integer type
  std::optional<double> get_float(std::string_view key) const;  // any float or integer type
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;

  std::string require_string(std::string_view key) const;
  int64_t require_int(std::string_view key) const;
  double require_float(std::string_view key) const;

 private:
  std::vector<KeyValue> entries_;
};

// One tensor info. Every dim is >= 1: a zero dim is refused as malformed (no model tensor is
// empty, and zero dims are a known path to division by zero in size checks).
struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  int n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};
  uint64_t offset = 0;   // from the start of the tensor data section
  uint64_t n_bytes = 0;  // exact size of the tensor's data
};

// Caps applied while parsing, before anything is allocated.
struct ReadLimits {
  uint64_t max_kv_count = 1u << 20;
  uint64_t max_tensor_count = 1u << 20;
  uint64_t max_string_bytes = 1u << 26;  // one metadata string (templates can be large)
  uint64_t max_array_items = 1u << 24;   // one metadata array (vocabularies are ~256k)
  uint64_t max_total_items = 1u << 24;   // all values, nested arrays included: each costs ~48 B
  uint32_t max_array_depth = 8;
  uint64_t max_alignment = 1u << 20;
  uint64_t max_key_bytes = 65535;        // the GGUF spec's key length limit
  uint64_t max_tensor_name_bytes = 256;  // llama.cpp allows 63; leave room, but stay bounded
};

class File {
 public:
  // Maps and parses path. Throws Error(not_found/io) for the OS, Error(malformed_file) for content.
  static File open(const std::string& path, const ReadLimits& limits = {});
  // Parses bytes that outlive the File (no mapping is taken). For tests and the fuzzer.
  static File parse(std::span<const uint8_t> bytes, const ReadLimits& limits = {});

  uint32_t version() const { return version_; }
  const Metadata& metadata() const { return metadata_; }
  // Moves the metadata out, leaving it empty here: a caller that keeps its own copy (a model
  // archive) saves holding two (a 262k-token vocabulary is ~36 MiB). Tensor views need only the
  // mapping and the tensor table.
  Metadata release_metadata() { return std::move(metadata_); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section
  std::span<const uint8_t> bytes() const { return bytes_; }
  // A view of the tensor's bytes inside the file.
  TensorView view(const TensorInfo& info) const;

 private:
  std::shared_ptr<MappedFile> mapping_;  // null when parsed from caller-owned bytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
};

// Writes a GGUF v3 file. Tensor data is produced on demand by a callback so a converter can
// quantize one tensor at a time without holding the whole model in memory.
class Writer {
 public:
  using DataFn = std::function<void(std::span<uint8_t> out)>;  // fill exactly n_bytes

  void set_alignment(uint64_t alignment) { alignment_ = alignment; }
  Metadata& metadata() { return metadata_; }
  // n_bytes is computed from dtype and ne (checked); data may be filled later by `fill`.
  void add_tensor(std::string name, DType dtype, std::span<const uint64_t> ne, DataFn fill);
  // Progress: (tensors written, tensors total, bytes written, bytes total).
  using ProgressFn = std::function<void(size_t, size_t, uint64_t, uint64_t)>;
  void write(const std::string& path, const ProgressFn& progress = {}) const;

 private:
  struct Pending {
    TensorInfo info;
    DataFn fill;
  };
  uint64_t alignment_ = 32;
  Metadata metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace memra::gguf
