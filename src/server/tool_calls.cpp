// Parsing of tagged tool calls (Hermes/Qwen JSON or XML, DeepSeek V3.1, Kimi K2) and Llama-3
// JSON tool calls; see tool_calls.h.
#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace memra::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kXmlFunction = "<function=";
constexpr std::string_view kXmlParameter = "<parameter=";
constexpr std::string_view kDeepseekSection = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepseekSectionEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepseekOpen = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepseekClose = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepseekSep = "<｜tool▁sep｜>";
constexpr std::string_view kKimiSection = "<|tool_calls_section_begin|>";
constexpr std::string_view kKimiSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kKimiOpen = "<|tool_call_begin|>";
constexpr std::string_view kKimiClose = "<|tool_call_end|>";
constexpr std::string_view kKimiArgs = "<|tool_call_argument_begin|>";
// Markers that start a call in some format: the streamer holds text back from any of them.
constexpr std::string_view kCallStarts[] = {kOpen, kDeepseekSection, kDeepseekOpen, kKimiSection,
                                            kKimiOpen};

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

// Arguments as JSON: the whole text when it is an object (or a string holding one).
bool arguments_from_json(std::string_view text, std::string& out) {
  nlohmann::json args = nlohmann::json::parse(text, nullptr, false);
  if (!args.is_discarded() && args.is_string())
    args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
  if (args.is_discarded() || !args.is_object()) return false;
  out = json_dump(args);
  return true;
}

// Qwen3-Coder/Qwen3.5: <function=NAME>\n<parameter=K>\nVALUE\n</parameter>...</function>. The
// template writes strings raw and other values as JSON, so a value that parses as JSON is taken
// as JSON, anything else as a string (without the tools' schemas at hand, "42" becomes 42).
bool call_from_xml(std::string_view body, ParsedToolCall& out) {
  if (body.substr(0, kXmlFunction.size()) != kXmlFunction) return false;
  size_t name_end = body.find('>');
  size_t fn_end = body.rfind("</function>");
  if (name_end == std::string_view::npos || fn_end == std::string_view::npos || fn_end < name_end)
    return false;
  out.name = std::string(trim(body.substr(kXmlFunction.size(), name_end - kXmlFunction.size())));
  std::string_view rest = body.substr(name_end + 1, fn_end - name_end - 1);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  for (size_t at = rest.find(kXmlParameter); at != std::string_view::npos;
       at = rest.find(kXmlParameter, at)) {
    size_t key_end = rest.find('>', at);
    size_t value_end = rest.find("</parameter>", key_end);
    if (key_end == std::string_view::npos || value_end == std::string_view::npos) return false;
    std::string key(
        trim(rest.substr(at + kXmlParameter.size(), key_end - at - kXmlParameter.size())));
    std::string_view value = rest.substr(key_end + 1, value_end - key_end - 1);
    // The template puts one newline on each side of the value.
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(value, nullptr, false);
    args[key] = parsed.is_discarded() ? nlohmann::ordered_json(std::string(value)) : parsed;
    at = value_end;
  }
  if (out.name.empty()) return false;
  out.arguments = args.dump();
  return true;
}

// DeepSeek V3.1: NAME<｜tool▁sep｜>{...}
bool call_from_deepseek(std::string_view body, ParsedToolCall& out) {
  size_t sep = body.find(kDeepseekSep);
  if (sep == std::string_view::npos) return false;
  out.name = std::string(trim(body.substr(0, sep)));
  return !out.name.empty() &&
         arguments_from_json(trim(body.substr(sep + kDeepseekSep.size())), out.arguments);
}

// Kimi K2: functions.NAME:INDEX<|tool_call_argument_begin|>{...}
bool call_from_kimi(std::string_view body, ParsedToolCall& out) {
  size_t sep = body.find(kKimiArgs);
  if (sep == std::string_view::npos) return false;
  std::string_view id = trim(body.substr(0, sep));
  if (id.substr(0, 10) == "functions.") id.remove_prefix(10);
  if (size_t colon = id.rfind(':'); colon != std::string_view::npos) id = id.substr(0, colon);
  out.name = std::string(id);
  return !out.name.empty() &&
         arguments_from_json(trim(body.substr(sep + kKimiArgs.size())), out.arguments);
}

bool call_from_tagged(std::string_view body, ParsedToolCall& out) {
  return call_from_json(body, out) || call_from_xml(body, out);
}

// Calls between `open` and `close` markers, anywhere in the text; `section` markers around them
// are dropped from the content.
struct Tagged {
  std::string_view open, close, section, section_end;
  bool (*one)(std::string_view body, ParsedToolCall& out);
};
constexpr Tagged kTaggedFormats[] = {
    {kOpen, kClose, {}, {}, call_from_tagged},
    {kDeepseekOpen, kDeepseekClose, kDeepseekSection, kDeepseekSectionEnd, call_from_deepseek},
    {kKimiOpen, kKimiClose, kKimiSection, kKimiSectionEnd, call_from_kimi},
};

void erase_all(std::string& s, std::string_view marker) {
  if (marker.empty()) return;
  for (size_t at = s.find(marker); at != std::string::npos; at = s.find(marker, at))
    s.erase(at, marker.size());
}

bool parse_tagged(std::string_view text, const Tagged& f, ToolCallParse& out) {
  size_t at = text.find(f.open);
  if (at == std::string_view::npos) return false;
  std::string content(text.substr(0, at));
  while (at != std::string_view::npos) {
    size_t body = at + f.open.size();
    size_t end = text.find(f.close, body);
    ParsedToolCall call;
    if (!f.one(trim(text.substr(body, end == std::string_view::npos ? text.npos : end - body)),
               call)) {
      // An unterminated last call (max_tokens cut it) stays content; the calls before it stand.
      // A malformed call that was closed makes the whole reply content.
      if (end != std::string_view::npos || out.calls.empty()) return false;
      content += text.substr(at);
      break;
    }
    out.calls.push_back(std::move(call));
    if (end == std::string_view::npos) break;
    size_t next = text.find(f.open, end + f.close.size());
    content +=
        text.substr(end + f.close.size(),
                    next == std::string_view::npos ? text.npos : next - end - f.close.size());
    at = next;
  }
  erase_all(content, f.section);
  erase_all(content, f.section_end);
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
  using F = ToolCallFormat;
  auto has = [&](std::string_view marker) { return source.find(marker) != source.npos; };
  // Most specific markers first: several formats wrap calls in <tool_call>.
  if (has("｜DSML｜")) return F::deepseek_dsml;
  if (has(kDeepseekOpen)) return has("```json") ? F::deepseek_r1 : F::deepseek_v31;
  if (has(kKimiOpen) && has(kKimiArgs)) return F::kimi_k2;
  if (has("<|tool_call>")) return F::gemma4;
  if (has("<|channel|>") && has("<|call|>")) return F::harmony;
  if (has("[TOOL_CALLS]")) return F::mistral;
  if (has("<minimax:tool_call>") || has("<invoke name=")) return F::minimax_xml;
  if (has("<seed:tool_call>")) return F::seed_oss;
  if (has("<tool_calls>[")) return F::apriel;  // its prose may also name <tool_call> tags
  if (has(kOpen)) {
    if (has(kXmlFunction)) return F::qwen3_xml;
    if (has("<arg_key>")) return F::glm_xml;
    return F::hermes;
  }
  // Llama 3.1-3.3 describe the reply as {"name": function name, "parameters": ...}.
  if (has(kPythonTag) && has("\"parameters\"")) return F::llama3_json;
  return F::none;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::none:
      return "none";
    case ToolCallFormat::hermes:
      return "hermes";
    case ToolCallFormat::llama3_json:
      return "llama3-json";
    case ToolCallFormat::deepseek_v31:
      return "deepseek-v3.1";
    case ToolCallFormat::kimi_k2:
      return "kimi-k2";
    case ToolCallFormat::qwen3_xml:
      return "qwen3-xml";
    case ToolCallFormat::glm_xml:
      return "glm-xml";
    case ToolCallFormat::deepseek_r1:
      return "deepseek-r1";
    case ToolCallFormat::deepseek_dsml:
      return "deepseek-dsml";
    case ToolCallFormat::gemma4:
      return "gemma4";
    case ToolCallFormat::harmony:
      return "gpt-oss-harmony";
    case ToolCallFormat::mistral:
      return "mistral";
    case ToolCallFormat::minimax_xml:
      return "minimax-xml";
    case ToolCallFormat::seed_oss:
      return "seed-oss";
    case ToolCallFormat::apriel:
      return "apriel";
  }
  return "unknown";
}

bool tool_call_format_forcible(ToolCallFormat format) {
  return format == ToolCallFormat::hermes || format == ToolCallFormat::llama3_json ||
         format == ToolCallFormat::deepseek_v31 || format == ToolCallFormat::kimi_k2;
}

ToolCallParse parse_tool_calls(std::string_view text) {
  for (const Tagged& f : kTaggedFormats) {
    ToolCallParse out;  // fresh per format: a failed attempt may have kept some calls
    if (parse_tagged(text, f, out)) return out;
  }
  ToolCallParse out;
  if (parse_llama3(text, out)) return out;
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
  size_t tag = std::string::npos;
  for (std::string_view start : kCallStarts) tag = std::min(tag, held_.find(start));
  if (tag != std::string::npos) {
    std::string out = held_.substr(0, tag);
    held_.erase(0, tag);
    in_call_ = true;
    return out;
  }
  // Keep back a suffix that could be the start of a call marker.
  size_t keep = 0;
  for (std::string_view start : kCallStarts) {
    for (size_t k = std::min(held_.size(), start.size() - 1); k > keep; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == start.substr(0, k)) {
        keep = k;
        break;
      }
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
