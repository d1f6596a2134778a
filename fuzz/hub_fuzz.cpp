// libFuzzer target for what the hub client takes from the network or the user: the input is
// split at NUL bytes into an hf: source, a file listing (one name per line), a quant, a
// safetensors index and a redirect Location. Each must be accepted or refused with a HubError;
// an accepted file name or shard must be a safe relative path.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hub/hub_error.h"
#include "hub/hub_http.h"
#include "hub/hub_select.h"
#include "hub/hub_source.h"

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

template <typename F>
void refused_or_ok(F&& f) {
  try {
    f();
  } catch (const memra::hub::HubError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memra::hub;
  std::vector<std::string> parts =
      split(std::string(reinterpret_cast<const char*>(data), size), '\0');
  parts.resize(5);
  refused_or_ok([&] { (void)hub_source_parse(parts[0]); });
  std::vector<std::string> files;
  for (const std::string& f : split(parts[1], '\n'))
    if (hub_valid_file_path(f)) files.push_back(f);
  refused_or_ok([&] {
    const Selection sel = hub_select(files, parts[2], "o/m", "fuzz");
    for (const std::string& f : sel.files)
      if (!hub_valid_file_path(f)) __builtin_trap();
  });
  (void)hub_quants(files);
  refused_or_ok([&] {
    for (const std::string& shard : hub_index_shards(parts[3], "index"))
      if (!hub_valid_file_path(shard) || shard.find('/') != std::string::npos) __builtin_trap();
  });
  refused_or_ok([&] { (void)http_join("https://hub.example/a/b", parts[4]); });
  uint64_t n = 0;
  (void)http_parse_size(parts[4], n);
  (void)hub_split_part(parts[4]);
  return 0;
}
