// safetensors header validation and tensor views (format rules: huggingface/safetensors
// README and tensor.rs). Every size derived from the header is overflow-checked and compared
// with the file before a view is handed out.
#include "formats/safetensors.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <nlohmann/json.hpp>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/hf_json.h"

namespace memra::safetensors {
namespace {

// Root object -> entry object -> shape array: three levels; one spare.
constexpr int kMaxHeaderDepth = 4;

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr std::array kDTypes = {
    DTypeName{"F64", DType::f64},         DTypeName{"F32", DType::f32},
    DTypeName{"F16", DType::f16},         DTypeName{"BF16", DType::bf16},
    DTypeName{"F8_E4M3", DType::f8_e4m3}, DTypeName{"I64", DType::i64},
    DTypeName{"I32", DType::i32},         DTypeName{"I16", DType::i16},
    DTypeName{"I8", DType::i8},           DTypeName{"U8", DType::u8},
};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t require_uint(const nlohmann::json& v, std::string_view label, std::string_view what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v >= 0))
    fail(ErrorCode::malformed_file, "{}: {} must be a non-negative integer, got {} {}", label, what,
         json_type_name(v), v.dump());
  return v.get<uint64_t>();
}

std::vector<std::pair<std::string, std::string>> parse_metadata(const nlohmann::json& v,
                                                                std::string_view label) {
  if (!v.is_object())
    fail(ErrorCode::malformed_file, "{}: __metadata__ must be an object of strings, got {}", label,
         json_type_name(v));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string())
      fail(ErrorCode::malformed_file, "{}: __metadata__['{}'] must be a string, got {}", label, key,
           json_type_name(value));
    out.emplace_back(key, value.get<std::string>());
  }
  return out;
}

Entry parse_entry(const std::string& name, const nlohmann::json& v, std::string_view label) {
  const std::string where = fmt::format("{}: tensor '{}'", label, name);
  if (!v.is_object())
    fail(ErrorCode::malformed_file, "{} must be an object, got {}", where, json_type_name(v));
  for (const auto& [key, value] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(ErrorCode::malformed_file, "{}: unknown field '{}'", where, key);
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) fail(ErrorCode::malformed_file, "{}: missing field '{}'", where, field);
  }
  Entry e;
  e.name = name;
  const auto& dtype = v["dtype"];
  if (!dtype.is_string())
    fail(ErrorCode::malformed_file, "{}: dtype must be a string, got {}", where,
         json_type_name(dtype));
  e.dtype = dtype_from_safetensors(dtype.get<std::string>(), name);

  const auto& shape = v["shape"];
  if (!shape.is_array())
    fail(ErrorCode::malformed_file, "{}: shape must be an array, got {}", where,
         json_type_name(shape));
  uint64_t n_elements = 1;
  for (const auto& dim : shape) {
    e.shape.push_back(require_uint(dim, where, "shape entry"));
    n_elements = checked_mul(n_elements, e.shape.back(), where + " shape element count");
  }
  const auto& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail(ErrorCode::malformed_file, "{}: data_offsets must be an array [begin, end], got {}", where,
         offsets.dump());
  e.begin = require_uint(offsets[0], where, "data_offsets begin");
  e.end = require_uint(offsets[1], where, "data_offsets end");
  if (e.end < e.begin)
    fail(ErrorCode::malformed_file, "{}: data_offsets end {} is before begin {}", where, e.end,
         e.begin);
  const uint64_t n_bytes = checked_mul(n_elements, dtype_traits(e.dtype).type_size,
                                       where + " byte size (shape x dtype size)");
  if (e.end - e.begin != n_bytes)
    fail(ErrorCode::malformed_file,
         "{}: data_offsets span {} bytes but shape x dtype size is {} bytes", where,
         e.end - e.begin, n_bytes);
  return e;
}

// Sorted by offset, the tensors must tile the data buffer exactly: no holes, no overlaps, no
// trailing bytes (which would let a file be something else as well, a polyglot).
void check_coverage(const std::vector<Entry>& entries, uint64_t buffer_size,
                    std::string_view label) {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  for (const Entry* e : sorted) {
    if (e->begin != expected)
      fail(ErrorCode::malformed_file,
           "{}: tensor '{}' data_offsets begin at {} but the previous tensor ends at {} ({})",
           label, e->name, e->begin, expected, e->begin < expected ? "overlap" : "gap");
    expected = e->end;
  }
  if (expected != buffer_size)
    fail(ErrorCode::malformed_file,
         "{}: data_offsets cover {} bytes but the data buffer holds {} bytes", label, expected,
         buffer_size);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

DType dtype_from_safetensors(std::string_view name, std::string_view tensor) {
  for (const DTypeName& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  fail(ErrorCode::unsupported,
       "tensor '{}': safetensors dtype '{}' is not supported (supported: F64, F32, F16, BF16, "
       "F8_E4M3, I64, I32, I16, I8, U8)",
       tensor, name);
}

File File::parse(std::span<const uint8_t> bytes, std::string label) {
  File f;
  f.bytes_ = bytes;
  f.label_ = std::move(label);
  const std::string_view lb = f.label_;
  if (bytes.size() < 8)
    fail(ErrorCode::malformed_file,
         "{}: header size: the file has {} bytes, fewer than the 8-byte header size field", lb,
         bytes.size());
  const uint64_t header_size = read_u64_le(bytes.data());
  if (header_size > kMaxHeaderBytes)
    fail(ErrorCode::malformed_file, "{}: header size {} exceeds the {}-byte limit", lb, header_size,
         kMaxHeaderBytes);
  if (header_size > bytes.size() - 8)
    fail(ErrorCode::malformed_file,
         "{}: header size {} runs past the end of the file ({} bytes after the size field)", lb,
         header_size, bytes.size() - 8);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_size);
  if (text.empty() || text.front() != '{')
    fail(ErrorCode::malformed_file, "{}: header must start with '{{' (a JSON object)", lb);
  const nlohmann::json header = json_parse_strict(text, lb, kMaxHeaderDepth);
  if (!header.is_object()) fail(ErrorCode::malformed_file, "{}: header must be a JSON object", lb);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      f.metadata_ = parse_metadata(value, lb);
    } else {
      f.entries_.push_back(parse_entry(key, value, lb));
    }
  }
  f.data_start_ = 8 + header_size;
  check_coverage(f.entries_, bytes.size() - f.data_start_, lb);
  return f;
}

File File::open(const std::string& path) {
  auto mapping = std::make_shared<const MappedFile>(path);
  File f = parse(mapping->bytes(), path);
  f.mapping_ = std::move(mapping);
  return f;
}

const Entry* File::find(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::span<const uint8_t> File::data(const Entry& entry) const {
  return bytes_.subspan(data_start_ + entry.begin, entry.end - entry.begin);
}

TensorView File::view(const Entry& entry) const {
  if (entry.shape.size() > static_cast<size_t>(kMaxDims))
    fail(ErrorCode::unsupported, "{}: tensor '{}' has {} dimensions; at most {} are supported",
         label_, entry.name, entry.shape.size(), kMaxDims);
  TensorView v;
  v.name = entry.name;
  v.dtype = entry.dtype;
  v.n_dims = static_cast<int>(entry.shape.size());
  for (int i = 0; i < v.n_dims; ++i) v.ne[i] = entry.shape[entry.shape.size() - 1 - i];
  const auto bytes = data(entry);
  v.data = bytes.data();
  v.n_bytes = bytes.size();
  return v;
}

bool is_pickle_name(std::string_view file_name) {
  const std::string name = lower(file_name);
  for (std::string_view ext : {".bin", ".pt", ".pth", ".ckpt"}) {
    if (name.size() > ext.size() && name.ends_with(ext)) return true;
  }
  return false;
}

void refuse_pickle(const std::string& path) {
  fail(ErrorCode::unsupported,
       "'{}' is a pickle checkpoint (.bin/.pt/.pth/.ckpt); memra never reads pickle because "
       "unpickling runs arbitrary code. Use a safetensors checkpoint or a GGUF file instead",
       path);
}

}  // namespace memra::safetensors
