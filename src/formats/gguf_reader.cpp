// GGUF reader: parses the header, metadata and tensor infos of an untrusted file. Every count,
// length, dimension and offset is checked against ReadLimits and against the bytes that remain
// before anything is allocated; every error names the field and the byte offset it was read at.
// Layout (little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count, kv pairs,
// tensor infos, padding to general.alignment, tensor data.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/gguf.h"

namespace memra::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a LE host");

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key length, key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, ne[0], type, off

// Untrusted text for an error message: non-printable bytes escaped, long text cut.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

// Describes the field being read for error messages; formatted only when an error is raised, so
// reading a 256k-entry vocabulary builds no strings.
struct Field {
  std::string_view prefix;  // "metadata key 'general.name'", "tensor 'output.weight'"
  std::string_view part;    // "type", "length", "value", "dims[1]"
  int64_t index = -1;       // array item, when reading inside an array

  std::string str() const {
    std::string s(prefix);
    if (index >= 0) s += fmt::format(" item {}", index);
    if (!part.empty()) s += fmt::format(" {}", part);
    return s;
  }
};

uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
      return 8;
    case ValueType::string:
      return 8;  // the length prefix; the text may be empty
    case ValueType::array:
      return 12;  // element type and count; the array may be empty
  }
  return 1;
}

bool known_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::f64);
}

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const ReadLimits& limits)
      : bytes_(bytes), limits_(limits) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, const Field& f) const {
    if (n > remaining()) {
      fail(ErrorCode::malformed_file,
           "{} at offset {}: file truncated (needs {} bytes, {} remain of {})", f.str(), pos_, n,
           remaining(), bytes_.size());
    }
  }

  template <typename T>
  T read(const Field& f) {
    need(sizeof(T), f);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const Field& length_field, uint64_t max_bytes) {
    const uint64_t at = pos_;
    const uint64_t n = read<uint64_t>(length_field);
    if (n > max_bytes) {
      fail(ErrorCode::malformed_file, "{} at offset {}: {} bytes exceeds the limit of {}",
           length_field.str(), at, n, max_bytes);
    }
    need(n, length_field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  // Reads a value of the given (already validated) type. depth = number of enclosing arrays.
  Value read_value(ValueType type, const Field& f, uint32_t depth) {
    switch (type) {
      case ValueType::u8:
        return {type, uint64_t{read<uint8_t>(f)}};
      case ValueType::i8:
        return {type, int64_t{read<int8_t>(f)}};
      case ValueType::u16:
        return {type, uint64_t{read<uint16_t>(f)}};
      case ValueType::i16:
        return {type, int64_t{read<int16_t>(f)}};
      case ValueType::u32:
        return {type, uint64_t{read<uint32_t>(f)}};
      case ValueType::i32:
        return {type, int64_t{read<int32_t>(f)}};
      case ValueType::u64:
        return {type, read<uint64_t>(f)};
      case ValueType::i64:
        return {type, read<int64_t>(f)};
      case ValueType::f32:
        return {type, double{std::bit_cast<float>(read<uint32_t>(f))}};
      case ValueType::f64:
        return {type, std::bit_cast<double>(read<uint64_t>(f))};
      case ValueType::boolean:
        return {type, read_bool(f)};
      case ValueType::string: {
        const std::string part = f.part.empty() ? "length" : std::string(f.part) + " length";
        return {type, read_string(Field{f.prefix, part, f.index}, limits_.max_string_bytes)};
      }
      case ValueType::array:
        return {type, read_array(f, depth + 1)};
    }
    fail(ErrorCode::internal, "{}: unhandled value type", f.str());
  }

  ValueType read_value_type(const Field& f) {
    const uint64_t at = pos_;
    const uint32_t t = read<uint32_t>(f);
    if (!known_value_type(t))
      fail(ErrorCode::malformed_file, "{} at offset {}: unknown value type {}", f.str(), at, t);
    return static_cast<ValueType>(t);
  }

  Metadata read_metadata(uint64_t kv_count);
  std::vector<TensorInfo> read_tensor_infos(uint64_t tensor_count, uint64_t alignment);

  // File offset where each tensor's `offset` field was read (for overlap/range errors).
  const std::vector<uint64_t>& tensor_offset_positions() const { return offset_at_; }
  uint64_t alignment_value_pos() const { return alignment_at_; }

 private:
  bool read_bool(const Field& f) {
    const uint64_t at = pos_;
    const uint8_t b = read<uint8_t>(f);
    if (b > 1) {
      fail(ErrorCode::malformed_file, "{} at offset {}: BOOL byte is {}, not 0 or 1", f.str(), at,
           b);
    }
    return b == 1;
  }

  Array read_array(const Field& f, uint32_t depth);
  TensorInfo read_tensor_info(uint64_t index, uint64_t alignment);

  std::span<const uint8_t> bytes_;
  const ReadLimits& limits_;
  uint64_t pos_ = 0;
  uint64_t total_items_ = 0;
  uint64_t alignment_at_ = 0;
  std::vector<uint64_t> offset_at_;
};

Array Parser::read_array(const Field& f, uint32_t depth) {
  const std::string_view p = f.prefix;
  const Field type_field{p, "array element type", f.index};
  const Field count_field{p, "array count", f.index};
  if (depth > limits_.max_array_depth) {
    fail(ErrorCode::malformed_file, "{} at offset {}: arrays nested {} deep exceed the limit of {}",
         f.str(), pos_, depth, limits_.max_array_depth);
  }
  Array out;
  out.element_type = read_value_type(type_field);
  const uint64_t count_at = pos_;
  const uint64_t count = read<uint64_t>(count_field);
  if (count > limits_.max_array_items) {
    fail(ErrorCode::malformed_file, "{} at offset {}: {} items exceeds the limit of {}",
         count_field.str(), count_at, count, limits_.max_array_items);
  }
  if (count > remaining() / scalar_size(out.element_type)) {
    fail(ErrorCode::malformed_file,
         "{} at offset {}: {} items of {} cannot fit in the {} bytes that remain",
         count_field.str(), count_at, count, value_type_name(out.element_type), remaining());
  }
  total_items_ += count;  // cannot overflow: each count is capped and backed by file bytes
  if (total_items_ > limits_.max_total_items) {
    fail(ErrorCode::malformed_file,
         "{} at offset {}: metadata holds more than {} array items in total", count_field.str(),
         count_at, limits_.max_total_items);
  }
  out.items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    out.items.push_back(read_value(out.element_type, Field{p, "", static_cast<int64_t>(i)}, depth));
  }
  return out;
}

Metadata Parser::read_metadata(uint64_t kv_count) {
  std::vector<KeyValue> entries;
  entries.reserve(kv_count);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string entry = fmt::format("metadata entry #{}", i);
    const uint64_t key_at = pos_;
    std::string key = read_string(Field{entry, "key length"}, limits_.max_key_bytes);
    if (key.empty())
      fail(ErrorCode::malformed_file, "{} key at offset {}: key is empty", entry, key_at);
    const std::string prefix = fmt::format("metadata key '{}'", printable(key));
    if (!seen.insert(key).second)
      fail(ErrorCode::malformed_file, "{} at offset {}: duplicate key", prefix, key_at);
    const ValueType type = read_value_type(Field{prefix, "type"});
    if (key == "general.alignment") alignment_at_ = pos_;
    Value value = read_value(type, Field{prefix, "value"}, 0);
    entries.emplace_back(std::move(key), std::move(value));
  }
  return Metadata(std::move(entries));
}

TensorInfo Parser::read_tensor_info(uint64_t index, uint64_t alignment) {
  TensorInfo t;
  const std::string entry = fmt::format("tensor #{}", index);
  const uint64_t name_at = pos_;
  t.name = read_string(Field{entry, "name length"}, limits_.max_tensor_name_bytes);
  if (t.name.empty())
    fail(ErrorCode::malformed_file, "{} name at offset {}: name is empty", entry, name_at);
  const std::string prefix = fmt::format("tensor '{}'", printable(t.name));

  const uint64_t dims_at = pos_;
  const uint32_t n_dims = read<uint32_t>(Field{prefix, "n_dims"});
  if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
    fail(ErrorCode::malformed_file, "{} n_dims at offset {}: {} is not in 1..{}", prefix, dims_at,
         n_dims, kMaxDims);
  }
  t.n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    const std::string part = fmt::format("dims[{}]", d);
    const uint64_t at = pos_;
    const uint64_t ne = read<uint64_t>(Field{prefix, part});
    // Zero-sized dims are refused: no model tensor is empty, and ne == 0 is a known path to
    // division-by-zero in size checks (reliability-and-conventions.md A1.2).
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(ErrorCode::malformed_file, "{} {} at offset {}: {} is not in 1..2^63-1", prefix, part,
           at, ne);
    }
    t.ne[d] = ne;
  }

  const uint64_t type_at = pos_;
  const uint32_t ggml_type = read<uint32_t>(Field{prefix, "type"});
  const std::optional<DType> dtype = dtype_from_ggml(ggml_type);
  if (!dtype) {
    fail(ErrorCode::unsupported, "{} type at offset {}: unknown GGML type id {}", prefix, type_at,
         ggml_type);
  }
  t.dtype = *dtype;
  const DTypeTraits& traits = dtype_traits(t.dtype);
  if (t.ne[0] % traits.block_size != 0) {
    fail(ErrorCode::malformed_file,
         "{} dims[0] at offset {}: {} elements is not a multiple of the {} block size {}", prefix,
         dims_at + 4, t.ne[0], traits.name, traits.block_size);
  }
  const std::string size_what = fmt::format("{} size (dims at offset {})", prefix, dims_at);
  const uint64_t n_elements =
      checked_mul(checked_mul(checked_mul(t.ne[0], t.ne[1], size_what), t.ne[2], size_what),
                  t.ne[3], size_what);
  if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(ErrorCode::malformed_file, "{}: {} elements exceeds 2^63-1", size_what, n_elements);
  }
  const uint64_t row_bytes = checked_mul(t.ne[0] / traits.block_size, traits.type_size, size_what);
  t.n_bytes = checked_mul(row_bytes, t.ne[1] * t.ne[2] * t.ne[3], size_what);

  const uint64_t offset_at = pos_;
  t.offset = read<uint64_t>(Field{prefix, "offset"});
  if (t.offset % alignment != 0) {
    fail(ErrorCode::malformed_file,
         "{} offset at offset {}: data offset {} is not a multiple of the alignment {}", prefix,
         offset_at, t.offset, alignment);
  }
  offset_at_.push_back(offset_at);
  return t;
}

std::vector<TensorInfo> Parser::read_tensor_infos(uint64_t tensor_count, uint64_t alignment) {
  std::vector<TensorInfo> tensors;
  tensors.reserve(tensor_count);
  offset_at_.reserve(tensor_count);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const uint64_t at = pos_;
    TensorInfo t = read_tensor_info(i, alignment);
    if (!seen.insert(t.name).second) {
      fail(ErrorCode::malformed_file, "tensor #{} name at offset {}: duplicate tensor name '{}'", i,
           at, printable(t.name));
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Reads magic and version; refuses version 1 (u32 counts) and big-endian files by name.
uint32_t read_version(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    std::string found =
        bytes.empty()
            ? std::string("an empty file")
            : fmt::format("'{}'",
                          printable(std::string_view(reinterpret_cast<const char*>(bytes.data()),
                                                     std::min<size_t>(bytes.size(), 4))));
    fail(ErrorCode::malformed_file, "magic at offset 0: expected 'GGUF', found {}", found);
  }
  if (bytes.size() < 8) {
    fail(ErrorCode::malformed_file,
         "version at offset 4: file truncated (needs 4 bytes, {} remain of {})", bytes.size() - 4,
         bytes.size());
  }
  uint32_t version;
  std::memcpy(&version, bytes.data() + 4, 4);
  const uint32_t swapped = __builtin_bswap32(version);
  if ((version & 0xffffu) == 0 && swapped >= 1 && swapped <= 3) {
    fail(ErrorCode::unsupported,
         "version at offset 4: big-endian GGUF (version {} byte-swapped) is not supported",
         swapped);
  }
  if (version == 1) {
    fail(ErrorCode::unsupported,
         "version at offset 4: GGUF version 1 (32-bit counts) is not supported; re-convert the "
         "model to version 3");
  }
  if (version != 2 && version != 3) {
    fail(ErrorCode::unsupported,
         "version at offset 4: GGUF version {} is not supported (versions 2 and 3 are)", version);
  }
  return version;
}

// min_bytes = 0 skips the bound from the bytes that remain (checked later by the caller).
uint64_t read_count(Parser& p, const std::string& name, uint64_t limit, uint64_t min_bytes) {
  const uint64_t at = p.pos();
  const uint64_t n = p.read<uint64_t>(Field{name, ""});
  if (n > limit) {
    fail(ErrorCode::malformed_file, "{} at offset {}: {} exceeds the limit of {}", name, at, n,
         limit);
  }
  if (min_bytes > 0 && n > p.remaining() / min_bytes) {
    fail(ErrorCode::malformed_file,
         "{} at offset {}: {} entries cannot fit in the {} bytes that remain", name, at, n,
         p.remaining());
  }
  return n;
}

uint64_t checked_alignment(const Metadata& md, uint64_t value_at, const ReadLimits& limits) {
  const Value* v = md.find("general.alignment");
  if (v == nullptr) return kDefaultAlignment;
  if (v->type != ValueType::u32) {
    fail(ErrorCode::malformed_file,
         "metadata key 'general.alignment' at offset {}: type {} is not UINT32", value_at,
         value_type_name(v->type));
  }
  const uint64_t a = std::get<uint64_t>(v->data);
  if (a == 0 || !std::has_single_bit(a) || a > limits.max_alignment) {
    fail(ErrorCode::malformed_file,
         "metadata key 'general.alignment' at offset {}: {} is not a power of two in 1..{}",
         value_at, a, limits.max_alignment);
  }
  return a;
}

// Every tensor's data lies inside the file and no two tensors share bytes.
void check_tensor_ranges(const std::vector<TensorInfo>& tensors,
                         const std::vector<uint64_t>& offset_at, uint64_t data_offset,
                         uint64_t file_size) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i : order) {
    const TensorInfo& t = tensors[i];
    const std::string what =
        fmt::format("tensor '{}' offset at offset {}", printable(t.name), offset_at[i]);
    const uint64_t end = checked_add(checked_add(data_offset, t.offset, what), t.n_bytes, what);
    if (end > file_size) {
      fail(ErrorCode::malformed_file,
           "{}: data [{}, {}) ({} bytes) extends past the end of the file ({} bytes)", what,
           data_offset + t.offset, end, t.n_bytes, file_size);
    }
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors[order[k - 1]];
    const TensorInfo& cur = tensors[order[k]];
    if (cur.offset < prev.offset + prev.n_bytes) {
      fail(ErrorCode::malformed_file,
           "tensor '{}' offset at offset {}: data [{}, {}) overlaps tensor '{}' [{}, {})",
           printable(cur.name), offset_at[order[k]], cur.offset, cur.offset + cur.n_bytes,
           printable(prev.name), prev.offset, prev.offset + prev.n_bytes);
    }
  }
}

}  // namespace

File File::parse(std::span<const uint8_t> bytes, const ReadLimits& limits) {
  File f;
  f.bytes_ = bytes;
  f.version_ = read_version(bytes);
  Parser p(bytes, limits);
  p.read<uint64_t>(Field{"magic and version", ""});
  const uint64_t tensor_count =
      read_count(p, "tensor_count", limits.max_tensor_count, 0);  // bounded after the metadata
  const uint64_t kv_count = read_count(p, "kv_count", limits.max_kv_count, kMinKvBytes);
  f.metadata_ = p.read_metadata(kv_count);
  f.alignment_ = checked_alignment(f.metadata_, p.alignment_value_pos(), limits);
  if (tensor_count > p.remaining() / kMinTensorInfoBytes) {
    fail(ErrorCode::malformed_file,
         "tensor_count at offset 8: {} tensor infos cannot fit in the {} bytes after the "
         "metadata (offset {})",
         tensor_count, p.remaining(), p.pos());
  }
  f.tensors_ = p.read_tensor_infos(tensor_count, f.alignment_);
  f.data_offset_ = checked_align_up(p.pos(), f.alignment_, "tensor data section start");
  check_tensor_ranges(f.tensors_, p.tensor_offset_positions(), f.data_offset_, bytes.size());
  return f;
}

File File::open(const std::string& path, const ReadLimits& limits) {
  auto mapping = std::make_shared<MappedFile>(path);
  try {
    File f = parse(mapping->bytes(), limits);
    f.mapping_ = std::move(mapping);
    return f;
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
  }
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TensorView File::view(const TensorInfo& info) const {
  // info normally comes from tensors(); re-check so a foreign TensorInfo cannot read outside.
  const uint64_t start = checked_add(data_offset_, info.offset, "tensor view");
  if (start > bytes_.size() || info.n_bytes > bytes_.size() - start) {
    fail(ErrorCode::internal, "tensor '{}' [{}, +{}) is outside this file", info.name, start,
         info.n_bytes);
  }
  TensorView v;
  v.name = info.name;
  v.dtype = info.dtype;
  v.n_dims = info.n_dims;
  v.ne = info.ne;
  v.data = bytes_.data() + start;
  v.n_bytes = info.n_bytes;
  return v;
}

}  // namespace memra::gguf
