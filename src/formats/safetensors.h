// safetensors reading: one file (8-byte little-endian header size, a JSON header, a data buffer)
// or a sharded checkpoint (model.safetensors.index.json naming shard files in the same folder).
// Files are untrusted: the header is capped, every entry is checked (dtype, shape, offsets with
// overflow-checked sizes) and the data buffer must be covered exactly, sorted, contiguous, with
// no gaps or overlaps and no bytes past the last tensor, as huggingface/safetensors requires.
// Pickle checkpoints (.bin/.pt/.pth/.ckpt) are refused by name: unpickling runs code.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace memra::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE
inline constexpr uint64_t kMaxIndexBytes = 64u << 20;     // model.safetensors.index.json

// One header entry. `shape` is as written (row-major, outermost first); data_offsets are
// relative to the start of the data buffer, [begin, end).
struct Entry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The safetensors dtype spelling -> memra dtype. Accepted: F64, F32, F16, BF16, F8_E4M3, I64,
// I32, I16, I8, U8. Everything else (BOOL, U16..U64, F8_E5M2, F4, ...) throws
// Error(unsupported) naming the dtype and the tensor.
DType dtype_from_safetensors(std::string_view name, std::string_view tensor);

class File {
 public:
  // Maps and validates path; errors name the file and the field.
  static File open(const std::string& path);
  // Validates bytes that outlive the File (tests, fuzzing). `label` names it in errors.
  static File parse(std::span<const uint8_t> bytes, std::string label = "<memory>");

  const std::string& label() const { return label_; }
  const std::vector<Entry>& entries() const { return entries_; }  // in header order
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const Entry* find(std::string_view name) const;
  uint64_t data_start() const { return data_start_; }  // file offset of the data buffer
  std::span<const uint8_t> data(const Entry& entry) const;
  // A view with dims reversed into ggml order (ne[0] = innermost). Rank > 4 is refused by name.
  TensorView view(const Entry& entry) const;
  std::shared_ptr<const MappedFile> mapping() const { return mapping_; }

 private:
  std::shared_ptr<const MappedFile> mapping_;  // null when parsed from caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string label_;
  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  uint64_t data_start_ = 0;
};

// A checkpoint folder: model.safetensors.index.json (sharded) if present, else model.safetensors,
// else the folder's single *.safetensors file. Every tensor name is unique across shards.
struct Checkpoint {
  struct Ref {
    size_t shard;  // index into shards
    size_t entry;  // index into shards[shard].entries()
  };
  std::vector<File> shards;
  std::vector<std::pair<std::string, Ref>> tensors;  // shard order, then header order
};

// Reads the sharded index at index_path; shard names must be plain file names in its folder.
Checkpoint open_index(const std::string& index_path);
// Opens the checkpoint in folder as described above; refuses a folder holding only pickles.
Checkpoint open_folder(const std::string& folder);

// True for names of pickle checkpoints: *.bin, *.pt, *.pth, *.ckpt (case-insensitive).
bool is_pickle_name(std::string_view file_name);
// Throws Error(unsupported) explaining why pickle checkpoints are never read.
[[noreturn]] void refuse_pickle(const std::string& path);

}  // namespace memra::safetensors
