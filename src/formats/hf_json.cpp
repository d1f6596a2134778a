// Strict JSON parsing on top of nlohmann::json's callback parser: the callback sees every key
// and container start with its depth, which is where duplicates and deep nesting are caught.
#include "formats/hf_json.h"

#include <set>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace memra {

nlohmann::json json_parse_strict(std::string_view text, std::string_view label, int max_depth) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys_per_object;  // one set per open object
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= max_depth)
          fail(ErrorCode::malformed_file, "{}: JSON nests deeper than {} levels", label, max_depth);
        if (event == json::parse_event_t::object_start) keys_per_object.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_per_object.empty()) keys_per_object.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys_per_object.empty() &&
            !keys_per_object.back().insert(parsed.get<std::string>()).second)
          fail(ErrorCode::malformed_file, "{}: duplicate JSON key '{}'", label,
               parsed.get<std::string>());
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail(ErrorCode::malformed_file, "{}: invalid JSON: {}", label, e.what());
  }
}

nlohmann::json json_read_file(const std::string& path, uint64_t max_bytes, int max_depth) {
  const MappedFile file(path);
  if (file.size() > max_bytes)
    fail(ErrorCode::malformed_file, "{}: {} bytes, over the {}-byte limit for this file", path,
         file.size(), max_bytes);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  return json_parse_strict(text, path, max_depth);
}

std::string_view json_type_name(const nlohmann::json& value) {
  return value.type_name();
}

}  // namespace memra
