// Parsing of Hermes/Qwen tagged tool calls and Llama-3 JSON tool calls; see tool_calls.h.
#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace memra::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// {"name": str, "arguments"|"parameters": object|str} -> a call; false when it is not one.
bool call_from_json(std::string_view text, ParsedToolCall& out) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string())
    return false;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  nlohmann::json args = j.contains(key) ? j[key] : nlohmann::json::object();
  if (args.is_string()) {
    nlohmann::json parsed = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) args = parsed;
  }
  if (!args.is_object()) return false;
  out.name = j["name"].get<std::string>();
  out.arguments = json_dump(args);
  return true;
}

bool parse_hermes(std::string_view text, ToolCallParse& out) {
  size_t at = text.find(kOpen);
  if (at == std::string_view::npos) return false;
  std::string content(text.substr(0, at));
  while (at != std::string_view::npos) {
    size_t body = at + kOpen.size();
    size_t end = text.find(kClose, body);
    ParsedToolCall call;
    if (!call_from_json(
            trim(text.substr(body, end == std::string_view::npos ? text.npos : end - body)),
            call)) {
      // An unterminated last call (max_tokens cut it) stays content; the calls before it stand.
      // A malformed call that was closed makes the whole reply content.
      if (end != std::string_view::npos || out.calls.empty()) return false;
      content += text.substr(at);
      break;
    }
    out.calls.push_back(std::move(call));
    if (end == std::string_view::npos) break;
    size_t next = text.find(kOpen, end + kClose.size());
    content += text.substr(end + kClose.size(),
                           next == std::string_view::npos ? text.npos : next - end - kClose.size());
    at = next;
  }
  out.content = std::string(trim(content));
  return true;
}

bool parse_llama3(std::string_view text, ToolCallParse& out) {
  std::string_view s = trim(text);
  if (s.substr(0, kPythonTag.size()) == kPythonTag) s = trim(s.substr(kPythonTag.size()));
  if (s.empty() || s.front() != '{') return false;
  std::vector<ParsedToolCall> calls;
  // Split on ';' or newlines between top-level objects.
  int depth = 0;
  bool in_str = false;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    char c = i < s.size() ? s[i] : ';';
    if (in_str) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c == '"')
      in_str = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']')
      --depth;
    else if (depth == 0 && (c == ';' || c == '\n')) {
      std::string_view piece = trim(s.substr(start, i - start));
      start = i + 1;
      if (piece.empty()) continue;
      ParsedToolCall call;
      if (!call_from_json(piece, call)) return false;
      calls.push_back(std::move(call));
    }
  }
  if (calls.empty()) return false;
  out.calls = std::move(calls);
  return true;
}

}  // namespace

ToolCallFormat tool_call_format_of(std::string_view source) {
  if (source.find(kOpen) != std::string_view::npos) return ToolCallFormat::hermes;
  // Llama 3.1-3.3 describe the reply as {"name": function name, "parameters": ...}.
  if (source.find(kPythonTag) != std::string_view::npos &&
      source.find("\"parameters\"") != std::string_view::npos)
    return ToolCallFormat::llama3_json;
  return ToolCallFormat::none;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes:
      return "hermes";
    case ToolCallFormat::llama3_json:
      return "llama3-json";
    case ToolCallFormat::none:
      break;
  }
  return "none";
}

ToolCallParse parse_tool_calls(std::string_view text) {
  ToolCallParse out;
  if (parse_hermes(text, out) || parse_llama3(text, out)) return out;
  return ToolCallParse{std::string(text), {}};
}

std::string ToolCallStreamer::push(std::string_view text) {
  held_ += text;
  if (in_call_) return "";
  if (!started_) {
    std::string_view t = trim(held_);
    if (t.empty()) return "";
    started_ = true;
    // A reply opening with '{' or the python tag may be a Llama-3 call: hold it all.
    if (t.front() == '{' || kPythonTag.substr(0, std::min(t.size(), kPythonTag.size())) ==
                                t.substr(0, std::min(t.size(), kPythonTag.size()))) {
      in_call_ = true;
      return "";
    }
  }
  size_t tag = held_.find(kOpen);
  if (tag != std::string::npos) {
    std::string out = held_.substr(0, tag);
    held_.erase(0, tag);
    in_call_ = true;
    return out;
  }
  // Keep back a suffix that could be the start of "<tool_call>".
  size_t keep = 0;
  for (size_t k = std::min(held_.size(), kOpen.size() - 1); k > 0; --k) {
    if (std::string_view(held_).substr(held_.size() - k) == kOpen.substr(0, k)) {
      keep = k;
      break;
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

ToolCallParse ToolCallStreamer::finish() {
  ToolCallParse out = parse_tool_calls(held_);
  held_.clear();
  return out;
}

}  // namespace memra::server
