// API-key authentication. Keys come from MEMRA_API_KEYS (comma-separated) and/or a key file (one
// per line, '#' comments). Only SHA-256 digests are kept; a presented key is hashed and compared
// with every digest in constant time, so timing reveals neither which key nor how much matched.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memra::server {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::string_view data);

class ApiKeys {
 public:
  void add(std::string_view key);
  void add_from_list(std::string_view comma_separated);
  void add_from_file(const std::string& path);  // throws Error(not_found/io) naming the file
  bool enabled() const { return !digests_.empty(); }
  bool accepts(std::string_view key) const;
  size_t size() const { return digests_.size(); }

 private:
  std::vector<Digest> digests_;
};

// The key a request presents: "Authorization: Bearer <key>" or "x-api-key: <key>"; empty if none.
std::string_view presented_key(const std::string* authorization, const std::string* x_api_key);

}  // namespace memra::server
