// Strict JSON reading for checkpoint side files (safetensors headers, index.json, config.json):
// the text is untrusted, so sizes and nesting are capped and duplicate object keys, which
// parsers resolve differently, are refused. Errors name the file and what was wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace memra {

// Parses text as one JSON value. Throws Error(malformed_file) naming label on invalid JSON or
// UTF-8, a duplicate key (naming it), or nesting deeper than max_depth.
nlohmann::json json_parse_strict(std::string_view text, std::string_view label, int max_depth);

// Reads and parses the file at path (at most max_bytes; larger is refused, not truncated).
// Throws Error(not_found) when the file does not exist.
nlohmann::json json_read_file(const std::string& path, uint64_t max_bytes, int max_depth);

// "object", "array", "string", "number", ... for error messages.
std::string_view json_type_name(const nlohmann::json& value);

}  // namespace memra
