// The hub's content hashes, computed while a blob downloads (OpenSSL EVP): sha256 for LFS files
// (a 64-hex etag) and git's blob sha1 ("blob <size>\0" + bytes) for regular files (a 40-hex etag).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace memra::hub {

class BlobHasher {
 public:
  // HubError(bad_response) when the etag is neither form: memra verifies every blob.
  BlobHasher(const std::string& etag, uint64_t size);
  ~BlobHasher();
  BlobHasher(const BlobHasher&) = delete;
  BlobHasher& operator=(const BlobHasher&) = delete;

  void update(const void* data, size_t size);
  // Starts over (a server that ignored a Range request sends the whole file again).
  void reset();
  // The lowercase hex digest of everything passed to update().
  std::string hex_digest();
  const char* algorithm() const { return sha256_ ? "sha256" : "git sha1"; }

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  bool sha256_;
  uint64_t size_;
};

}  // namespace memra::hub
