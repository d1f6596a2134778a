// Read-only memory map of a whole file (RAII). Model weights are used in place from the mapping,
// so loading a model costs page faults, not copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace memra {

class MappedFile {
 public:
  // Maps path read-only; throws Error(not_found / io) naming the path.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace memra
