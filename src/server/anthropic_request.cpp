// Anthropic Messages request validation; see anthropic_request.h. Ranges follow Anthropic's
// reference (temperature 0..1, max_tokens >= 1, stop_sequences as strings).
#include "server/anthropic_request.h"

#include <limits>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace memra::server {

namespace {

// Text of a string or an array of {"type": "text", "text": ...} blocks (system, tool_result).
std::string text_of(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(where, "'{}' must be a string or an array of text blocks", where);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& block = content[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    if (!block.is_object() || !block.contains("type") || block["type"] != "text")
      unsupported_field(at + ".type", "'{}' must be a text block (only text is supported)", at);
    if (!block.contains("text") || !block["text"].is_string())
      bad_request(at + ".text", "'{}.text' must be a string", at);
    if (!text.empty()) text += "\n";
    text += block["text"].get<std::string>();
  }
  return text;
}

// One Anthropic message -> template-ready messages (a user turn carrying tool_result blocks
// becomes one tool message per result, then the user's own text, if any).
void add_message(const ojson& m, size_t i, ojson& out) {
  const std::string at = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request(at, "'{}' must be an object", at);
  const std::string role =
      m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
  if (role != "user" && role != "assistant")
    bad_request(at + ".role", "'{}.role' must be 'user' or 'assistant'", at);
  const ojson* content = field(m, "content");
  if (!content) bad_request(at + ".content", "'{}.content' is required", at);
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array())
    bad_request(at + ".content", "'{}.content' must be a string or an array of blocks", at);
  std::string text, reasoning;
  ojson calls = ojson::array();
  for (size_t j = 0; j < content->size(); ++j) {
    const ojson& block = (*content)[j];
    const std::string bat = fmt::format("{}.content[{}]", at, j);
    if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
      bad_request(bat, "'{}' must be an object with a string 'type'", bat);
    const std::string type = block["type"].get<std::string>();
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string())
        bad_request(bat + ".text", "'{}.text' must be a string", bat);
      if (!text.empty()) text += "\n";
      text += block["text"].get<std::string>();
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      // Earlier thinking, sent back as Anthropic's clients do: the template decides whether the
      // prompt shows it (as reasoning_content).
      if (type == "thinking" && block.contains("thinking") && block["thinking"].is_string())
        reasoning += block["thinking"].get<std::string>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!block.contains("id") || !block["id"].is_string() || !block.contains("name") ||
          !block["name"].is_string())
        bad_request(bat, "'{}' needs a string 'id' and 'name'", bat);
      const ojson input = block.contains("input") ? block["input"] : ojson::object();
      if (!input.is_object()) bad_request(bat + ".input", "'{}.input' must be an object", bat);
      calls.push_back({{"id", block["id"]},
                       {"type", "function"},
                       {"function", {{"name", block["name"]}, {"arguments", input}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!block.contains("tool_use_id") || !block["tool_use_id"].is_string())
        bad_request(bat + ".tool_use_id", "'{}.tool_use_id' must be a string", bat);
      const ojson* result = field(block, "content");
      std::string result_text = result ? text_of(*result, bat + ".content") : "";
      if (boolean(block, "is_error", false)) result_text = "Error: " + result_text;
      out.push_back(
          {{"role", "tool"}, {"tool_call_id", block["tool_use_id"]}, {"content", result_text}});
    } else {
      unsupported_field(bat + ".type", "content block type '{}' is not supported in a {} message",
                        type, role);
    }
  }
  if (role == "assistant") {
    ojson message = {{"role", "assistant"}, {"content", text}};
    if (!calls.empty()) message["tool_calls"] = calls;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    out.push_back(message);
  } else if (!text.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

// tools: [{name, description, input_schema}] -> OpenAI function tools; tool_choice likewise.
void parse_tools(const ojson& body, ChatRequest& req) {
  if (const ojson* tools = field(body, "tools")) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object()) bad_request(at, "'{}' must be an object", at);
      if (t.contains("type") && t["type"] != "custom")
        unsupported_field(at + ".type", "'{}' is a server tool; only custom tools are supported",
                          at);
      if (!t.contains("name") || !t["name"].is_string())
        bad_request(at + ".name", "'{}.name' must be a string", at);
      ojson fn = {{"name", t["name"]}};
      if (t.contains("description") && t["description"].is_string())
        fn["description"] = t["description"];
      const ojson* schema = field(t, "input_schema");
      if (!schema || !schema->is_object())
        bad_request(at + ".input_schema", "'{}.input_schema' must be a JSON schema object", at);
      fn["parameters"] = *schema;
      req.tools.push_back({{"type", "function"}, {"function", fn}});
    }
  }
  const ojson* choice = field(body, "tool_choice");
  if (!choice) return;
  if (!choice->is_object() || !choice->contains("type") || !(*choice)["type"].is_string())
    bad_request("tool_choice", "'tool_choice' must be an object with a string 'type'");
  const std::string type = (*choice)["type"].get<std::string>();
  if (type == "auto") {
    req.tool_choice = ToolChoice::automatic;
  } else if (type == "none") {
    req.tool_choice = ToolChoice::none;
  } else if (type == "any") {
    req.tool_choice = ToolChoice::required;
  } else if (type == "tool") {
    req.tool_choice = ToolChoice::function;
    req.forced_tool = string_field(*choice, "name");
  } else {
    bad_request("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
  }
  check_tool_choice(req, "tool_choice");
  req.parallel_tool_calls = !boolean(*choice, "disable_parallel_tool_use", false);
}

// temperature / top_p / top_k left Anthropic's current API; older clients still send them, so
// they keep their old meaning here.
void parse_sampling(const ojson& body, const RequestLimits& limits, GenerationParams& g) {
  g.sampling.temperature = static_cast<float>(number_in(body, "temperature", 0, 1, 1));
  g.sampling.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1));
  if (field(body, "top_p") && g.sampling.top_p <= 0)
    bad_request("top_p", "'top_p' must be above 0");
  g.sampling.top_k = static_cast<int32_t>(integer_in(body, "top_k", 0, 1 << 20, 0));
  if (const ojson* stops = field(body, "stop_sequences")) {
    if (!stops->is_array() || static_cast<int32_t>(stops->size()) > limits.max_stop)
      bad_request("stop_sequences", "'stop_sequences' must be an array of at most {} strings",
                  limits.max_stop);
    for (const ojson& s : *stops) {
      if (!s.is_string() || s.get<std::string>().empty() ||
          s.get<std::string>().size() > limits.max_stop_bytes)
        bad_request("stop_sequences",
                    "'stop_sequences' entries must be non-empty strings of at most {} bytes",
                    limits.max_stop_bytes);
      g.stop.stop_strings.push_back(s.get<std::string>());
    }
  }
}

// Known request fields memra cannot honour are refused by name; hints that change nothing here
// (cache_control: prefix caching is automatic; service_tier, diagnostics, workspace and profile
// ids) are accepted.
void refuse_unsupported(const ojson& body) {
  for (const char* name : {"mcp_servers", "container", "context_management", "inference_geo"})
    if (field(body, name)) unsupported_field(name, "'{}' is not supported by memra", name);
  if (const ojson* speed = field(body, "speed"); speed && *speed != "standard")
    unsupported_field("speed", "only speed 'standard' is supported");
}

// thinking: enabled (with budget_tokens, which ends the span by forcing its close tag; refused
// later for a model with no thinking format), disabled (the template's enable_thinking off), or
// adaptive (the model decides).
void parse_thinking(const ojson& body, bool count_only, ChatRequest& req) {
  const ojson* thinking = field(body, "thinking");
  if (!thinking) return;
  const ojson* type = thinking->is_object() ? field(*thinking, "type") : nullptr;
  if (!type || !type->is_string())
    bad_request("thinking", "'thinking' must be an object with a string 'type'");
  if (*type == "disabled") {
    req.template_kwargs["enable_thinking"] = false;
  } else if (*type == "enabled") {
    const int64_t budget =
        integer_in(*thinking, "budget_tokens", 1024, std::numeric_limits<int32_t>::max(), -1);
    if (budget < 0) bad_request("thinking.budget_tokens", "'thinking.budget_tokens' is required");
    if (!count_only && budget >= req.gen.stop.max_tokens)
      bad_request("thinking.budget_tokens",
                  "'thinking.budget_tokens' must be less than 'max_tokens'");
    req.template_kwargs["enable_thinking"] = true;
    req.max_thinking_tokens = static_cast<int32_t>(budget);
    req.thinking_param = "thinking";
  } else if (*type != "adaptive") {
    bad_request("thinking.type", "'thinking.type' must be enabled, disabled or adaptive");
  }
}

// output_config: {"format": {"type": "json_schema", "schema": {...}}} is enforced by
// constrained decoding; effort levels have no meaning for memra's models.
void parse_output_config(const ojson& body, GenerationParams& g) {
  const ojson* config = field(body, "output_config");
  if (!config) return;
  if (!config->is_object()) bad_request("output_config", "'output_config' must be an object");
  if (field(*config, "effort"))
    unsupported_field("output_config.effort", "'output_config.effort' is not supported by memra");
  const ojson* format = field(*config, "format");
  if (!format) return;
  if (!format->is_object() || !format->contains("type") || (*format)["type"] != "json_schema")
    bad_request("output_config.format", "'output_config.format.type' must be 'json_schema'");
  const ojson* schema = field(*format, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad_request("output_config.format.schema",
                "'output_config.format.schema' must be a JSON schema object");
  g.response_format = ResponseFormat::json_schema;
  g.json_schema = *schema;
}

}  // namespace

ChatRequest parse_messages_request(const ojson& body, const RequestLimits& limits,
                                   bool count_only) {
  refuse_unsupported(body);
  ChatRequest req;
  GenerationParams& g = req.gen;
  g.model = string_field(body, "model");
  if (!count_only) {
    if (!field(body, "max_tokens")) bad_request("max_tokens", "'max_tokens' is required");
    g.max_tokens_given = true;
    g.stop.max_tokens = static_cast<int32_t>(
        integer_in(body, "max_tokens", 1, std::numeric_limits<int32_t>::max(), 1));
    g.stream = boolean(body, "stream", false);
    parse_sampling(body, limits, g);
    parse_output_config(body, g);
  }
  parse_thinking(body, count_only, req);
  if (const ojson* metadata = field(body, "metadata")) {
    if (!metadata->is_object()) bad_request("metadata", "'metadata' must be an object");
    g.user = string_field(*metadata, "user_id");
  }
  if (const ojson* system = field(body, "system"))
    req.messages.push_back({{"role", "system"}, {"content", text_of(*system, "system")}});
  const ojson* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array");
  if (static_cast<int32_t>(messages->size()) > limits.max_messages)
    bad_request("messages", "'messages' has {} entries, the limit is {}", messages->size(),
                limits.max_messages);
  for (size_t i = 0; i < messages->size(); ++i) add_message((*messages)[i], i, req.messages);
  parse_tools(body, req);
  return req;
}

}  // namespace memra::server
