// GGUF v3 writer: header, metadata in insertion order, tensor infos, padding to the alignment,
// then each tensor's data produced by its fill callback (one tensor in memory at a time). The file
// is written under a temporary name and renamed into place, so a failed write leaves no partial
// model behind.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/gguf.h"

namespace memra::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

class Bytes {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(0);
  }
  const std::vector<uint8_t>& data() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

uint64_t unsigned_of(const Value& v, uint64_t max, std::string_view what) {
  const auto* u = std::get_if<uint64_t>(&v.data);
  if (u == nullptr || *u > max) {
    fail(ErrorCode::invalid_argument, "{}: {} value is missing or out of range", what,
         value_type_name(v.type));
  }
  return *u;
}

int64_t signed_of(const Value& v, int64_t min, int64_t max, std::string_view what) {
  const auto* i = std::get_if<int64_t>(&v.data);
  if (i == nullptr || *i < min || *i > max) {
    fail(ErrorCode::invalid_argument, "{}: {} value is missing or out of range", what,
         value_type_name(v.type));
  }
  return *i;
}

template <typename T>
const T& held(const Value& v, std::string_view what) {
  const auto* p = std::get_if<T>(&v.data);
  if (p == nullptr) {
    fail(ErrorCode::invalid_argument, "{}: {} value holds the wrong kind of data", what,
         value_type_name(v.type));
  }
  return *p;
}

// Serializes a value's payload (not its type tag). Checks that the stored data fits the type.
void put_value(Bytes& out, const Value& v, std::string_view what) {
  switch (v.type) {
    case ValueType::u8:
      return out.put(static_cast<uint8_t>(unsigned_of(v, 0xff, what)));
    case ValueType::u16:
      return out.put(static_cast<uint16_t>(unsigned_of(v, 0xffff, what)));
    case ValueType::u32:
      return out.put(static_cast<uint32_t>(unsigned_of(v, 0xffffffffu, what)));
    case ValueType::u64:
      return out.put(unsigned_of(v, std::numeric_limits<uint64_t>::max(), what));
    case ValueType::i8:
      return out.put(static_cast<int8_t>(signed_of(v, -128, 127, what)));
    case ValueType::i16:
      return out.put(static_cast<int16_t>(signed_of(v, -32768, 32767, what)));
    case ValueType::i32:
      return out.put(static_cast<int32_t>(signed_of(v, std::numeric_limits<int32_t>::min(),
                                                    std::numeric_limits<int32_t>::max(), what)));
    case ValueType::i64:
      return out.put(signed_of(v, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max(), what));
    case ValueType::f32:
      return out.put(std::bit_cast<uint32_t>(static_cast<float>(held<double>(v, what))));
    case ValueType::f64:
      return out.put(std::bit_cast<uint64_t>(held<double>(v, what)));
    case ValueType::boolean:
      return out.put(static_cast<uint8_t>(held<bool>(v, what) ? 1 : 0));
    case ValueType::string:
      return out.put_string(held<std::string>(v, what));
    case ValueType::array: {
      const Array& a = held<Array>(v, what);
      out.put(static_cast<uint32_t>(a.element_type));
      out.put(static_cast<uint64_t>(a.items.size()));
      for (const Value& item : a.items) {
        if (item.type != a.element_type) {
          fail(ErrorCode::invalid_argument, "{}: ARRAY of {} holds a {} item", what,
               value_type_name(a.element_type), value_type_name(item.type));
        }
        put_value(out, item, what);
      }
      return;
    }
  }
  fail(ErrorCode::invalid_argument, "{}: unknown value type {}", what,
       static_cast<uint32_t>(v.type));
}

// The metadata as written: general.alignment present (UINT32) whenever it is not the default,
// and consistent with the writer's alignment when the caller set it.
Metadata metadata_to_write(const Metadata& md, uint64_t alignment) {
  Metadata out = md;
  if (const Value* v = md.find("general.alignment")) {
    if (v->type != ValueType::u32 || std::get_if<uint64_t>(&v->data) == nullptr ||
        std::get<uint64_t>(v->data) != alignment) {
      fail(ErrorCode::invalid_argument,
           "metadata key 'general.alignment' must be UINT32 {} to match the writer's alignment",
           alignment);
    }
  } else if (alignment != kDefaultAlignment) {
    out.set("general.alignment", Value::make_u32(static_cast<uint32_t>(alignment)));
  }
  return out;
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

void write_all(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n)
    fail(ErrorCode::io, "cannot write '{}': {}", path, std::strerror(errno));
}

}  // namespace

void Writer::add_tensor(std::string name, DType dtype, std::span<const uint64_t> ne, DataFn fill) {
  if (name.empty() || name.size() > ReadLimits{}.max_tensor_name_bytes)
    fail(ErrorCode::invalid_argument, "tensor name '{}' is empty or too long", name);
  for (const Pending& p : tensors_) {
    if (p.info.name == name) fail(ErrorCode::invalid_argument, "tensor '{}' added twice", name);
  }
  if (static_cast<uint32_t>(dtype) >= 1000 || !dtype_from_ggml(static_cast<uint32_t>(dtype)))
    fail(ErrorCode::unsupported, "tensor '{}': {} cannot be stored in GGUF", name,
         dtype_name(dtype));
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    fail(ErrorCode::invalid_argument, "tensor '{}': {} dims is not in 1..{}", name, ne.size(),
         kMaxDims);
  TensorInfo info;
  info.name = std::move(name);
  info.dtype = dtype;
  info.n_dims = static_cast<int>(ne.size());
  uint64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0) fail(ErrorCode::invalid_argument, "tensor '{}' dims[{}] is zero", info.name, d);
    info.ne[d] = ne[d];
    if (d > 0) rows = checked_mul(rows, ne[d], info.name);
  }
  const DTypeTraits& t = dtype_traits(dtype);
  if (ne[0] % t.block_size != 0) {
    fail(ErrorCode::invalid_argument,
         "tensor '{}' dims[0] = {} is not a multiple of the {} block "
         "size {}",
         info.name, ne[0], t.name, t.block_size);
  }
  info.n_bytes = checked_mul(dtype_row_bytes(dtype, ne[0], info.name), rows, info.name);
  tensors_.push_back({std::move(info), std::move(fill)});
}

void Writer::write(const std::string& path, const ProgressFn& progress) const {
  if (alignment_ == 0 || !std::has_single_bit(alignment_) ||
      alignment_ > ReadLimits{}.max_alignment)
    fail(ErrorCode::invalid_argument, "GGUF alignment {} is not a power of two in 1..{}",
         alignment_, ReadLimits{}.max_alignment);
  const Metadata md = metadata_to_write(metadata_, alignment_);

  Bytes head;
  head.put<uint32_t>(0x46554747u);  // "GGUF" read as a little-endian u32
  head.put<uint32_t>(kVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(md.entries().size());
  for (const KeyValue& kv : md.entries()) {
    if (kv.first.empty()) fail(ErrorCode::invalid_argument, "metadata key is empty");
    head.put_string(kv.first);
    head.put(static_cast<uint32_t>(kv.second.type));
    put_value(head, kv.second, fmt::format("metadata key '{}'", kv.first));
  }
  uint64_t offset = 0;
  uint64_t total_bytes = 0;
  for (const Pending& p : tensors_) {
    head.put_string(p.info.name);
    head.put(static_cast<uint32_t>(p.info.n_dims));
    for (int d = 0; d < p.info.n_dims; ++d) head.put<uint64_t>(p.info.ne[d]);
    head.put(static_cast<uint32_t>(p.info.dtype));
    head.put<uint64_t>(offset);
    offset =
        checked_align_up(checked_add(offset, p.info.n_bytes, p.info.name), alignment_, p.info.name);
    total_bytes += p.info.n_bytes;
  }
  head.pad_to(alignment_);

  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail(ErrorCode::io, "cannot create '{}': {}", tmp, std::strerror(errno));
  try {
    write_all(f.get(), head.data().data(), head.data().size(), tmp);
    std::vector<uint8_t> buffer;
    const std::vector<uint8_t> zeros(alignment_, 0);
    uint64_t written = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Pending& p = tensors_[i];
      buffer.assign(p.info.n_bytes, 0);
      if (p.fill) p.fill(std::span<uint8_t>(buffer));
      write_all(f.get(), buffer.data(), buffer.size(), tmp);
      written += p.info.n_bytes;
      const uint64_t pad = (alignment_ - p.info.n_bytes % alignment_) % alignment_;
      write_all(f.get(), zeros.data(), pad, tmp);  // the last tensor is padded too, as ggml does
      if (progress) progress(i + 1, tensors_.size(), written, total_bytes);
    }
    if (std::fflush(f.get()) != 0)
      fail(ErrorCode::io, "cannot write '{}': {}", tmp, std::strerror(errno));
    if (std::fclose(f.release()) != 0)
      fail(ErrorCode::io, "cannot close '{}': {}", tmp, std::strerror(errno));
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail(ErrorCode::io, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  } catch (...) {
    f.reset();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace memra::gguf
