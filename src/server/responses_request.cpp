// Responses API request validation; see responses_request.h. Ranges follow OpenAI's reference
// (temperature 0..2, top_p 0..1, metadata up to 16 string pairs).
#include "server/responses_request.h"

#include <limits>

#include "server/api_error.h"
#include "server/generate.h"
#include "server/json_fields.h"

namespace memra::server {

namespace {

// Text of a message's content: a string, or input_text / output_text / refusal parts.
std::string content_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(where, "'{}' must be a string or an array of content parts", where);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad_request(at, "'{}' must be an object with a string 'type'", at);
    const std::string type = part["type"].get<std::string>();
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "refusal")
      unsupported_field(at + ".type",
                        "content part type '{}' is not supported (input_text, output_text)", type);
    if (!part.contains(key) || !part[key].is_string())
      bad_request(at + "." + key, "'{}.{}' must be a string", at, key);
    if (!text.empty()) text += "\n";
    text += part[key].get<std::string>();
  }
  return text;
}

std::string required_string(const ojson& item, const char* name, const std::string& at) {
  const ojson* v = field(item, name);
  if (!v || !v->is_string()) bad_request(at + "." + name, "'{}.{}' must be a string", at, name);
  return v->get<std::string>();
}

std::string item_id(const ojson& item, const char* prefix) {
  const ojson* id = field(item, "id");
  return id && id->is_string() ? id->get<std::string>() : make_completion_id(prefix);
}

void add_message_item(const ojson& item, const std::string& at, ojson& messages, ojson& items) {
  const std::string role = required_string(item, "role", at);
  if (role != "user" && role != "assistant" && role != "system" && role != "developer")
    bad_request(at + ".role", "'{}.role' must be user, assistant, system or developer", at);
  const ojson* content = field(item, "content");
  if (!content) bad_request(at + ".content", "'{}.content' is required", at);
  const std::string text = content_text(*content, at + ".content");
  messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
  const char* part = role == "assistant" ? "output_text" : "input_text";
  ojson part_json = {{"type", part}, {"text", text}};
  if (role == "assistant") part_json["annotations"] = ojson::array();
  items.push_back({{"type", "message"},
                   {"id", item_id(item, "msg_")},
                   {"role", role},
                   {"status", "completed"},
                   {"content", ojson::array({part_json})}});
}

// A call joins the assistant turn before it (several calls of one turn stay together).
void add_function_call(const ojson& item, const std::string& at, ojson& messages, ojson& items) {
  const std::string call_id = required_string(item, "call_id", at);
  const std::string name = required_string(item, "name", at);
  const std::string arguments = required_string(item, "arguments", at);
  ojson args = ojson::parse(arguments, nullptr, false);  // templates tojson a mapping
  if (args.is_discarded()) args = arguments;
  ojson call = {
      {"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
  if (messages.empty() || messages.back()["role"] != "assistant")
    messages.push_back({{"role", "assistant"}, {"content", ""}});
  ojson& turn = messages.back();
  if (!turn.contains("tool_calls")) turn["tool_calls"] = ojson::array();
  turn["tool_calls"].push_back(call);
  items.push_back({{"type", "function_call"},
                   {"id", item_id(item, "fc_")},
                   {"call_id", call_id},
                   {"name", name},
                   {"arguments", arguments},
                   {"status", "completed"}});
}

void add_function_output(const ojson& item, const std::string& at, ojson& messages, ojson& items) {
  const std::string call_id = required_string(item, "call_id", at);
  const ojson* output = field(item, "output");
  if (!output) bad_request(at + ".output", "'{}.output' is required", at);
  const std::string text = content_text(*output, at + ".output");
  messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}});
  items.push_back({{"type", "function_call_output"},
                   {"id", item_id(item, "fco_")},
                   {"call_id", call_id},
                   {"output", text},
                   {"status", "completed"}});
}

// tools: [{type: function, name, description, parameters, strict}] -> chat function tools.
void parse_tools(const ojson& body, ResponsesRequest& req) {
  const ojson* tools = field(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const ojson& t = (*tools)[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
      bad_request(at + ".type", "'{}' must be an object with a string 'type'", at);
    const std::string type = t["type"].get<std::string>();
    if (type != "function")
      unsupported_field(at + ".type",
                        "tool type '{}' is not supported by memra (built-in tools are not "
                        "available); only 'function' tools are",
                        type);
    ojson fn = {{"name", required_string(t, "name", at)}};
    if (const ojson* d = field(t, "description"); d && d->is_string()) fn["description"] = *d;
    if (const ojson* p = field(t, "parameters")) {
      if (!p->is_object()) bad_request(at + ".parameters", "'{}.parameters' must be an object", at);
      fn["parameters"] = *p;
    }
    boolean(t, "strict", true);  // type-checked; forced calls always follow the schema
    req.chat.tools.push_back({{"type", "function"}, {"function", fn}});
    req.tools.push_back(t);
  }
}

void parse_tool_choice(const ojson& body, ResponsesRequest& req) {
  ChatRequest& chat = req.chat;
  chat.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);
  const ojson* choice = field(body, "tool_choice");
  if (!choice) return;
  req.tool_choice = *choice;
  if (*choice == "none") {
    chat.tool_choice = ToolChoice::none;
  } else if (*choice == "auto") {
    chat.tool_choice = ToolChoice::automatic;
  } else if (*choice == "required") {
    chat.tool_choice = ToolChoice::required;
  } else if (const ojson* type = choice->is_object() ? field(*choice, "type") : nullptr;
             type && *type == "function") {
    chat.tool_choice = ToolChoice::function;
    chat.forced_tool = required_string(*choice, "name", "tool_choice");
  } else if (choice->is_object()) {
    unsupported_field("tool_choice.type",
                      "'tool_choice' must be none, auto, required or a function "
                      "({{\"type\": \"function\", \"name\": ...}}); other kinds are not supported");
  } else {
    bad_request("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or an object");
  }
  check_tool_choice(chat, "tool_choice");
}

// text: {format: {type: text | json_object | json_schema, name, schema, strict}, verbosity}.
void parse_text(const ojson& body, ResponsesRequest& req) {
  const ojson* text = field(body, "text");
  if (!text) return;
  if (!text->is_object()) bad_request("text", "'text' must be an object");
  if (const ojson* v = field(*text, "verbosity"); v && *v != "medium")
    unsupported_field("text.verbosity", "'text.verbosity' other than 'medium' is not supported");
  const ojson* format = field(*text, "format");
  if (!format) return;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    bad_request("text.format", "'text.format' must be an object with a string 'type'");
  const std::string type = (*format)["type"].get<std::string>();
  GenerationParams& g = req.chat.gen;
  req.text_format = *format;
  if (type == "text") return;
  if (type == "json_object") {
    g.response_format = ResponseFormat::json_object;
    return;
  }
  if (type != "json_schema")
    bad_request("text.format.type", "'text.format.type' must be text, json_object or json_schema");
  const ojson* name = field(*format, "name");
  if (!name || !name->is_string() || name->get<std::string>().empty() ||
      name->get<std::string>().size() > 64)
    bad_request("text.format.name", "'text.format.name' must be a string of 1 to 64 characters");
  boolean(*format, "strict", false);
  const ojson* schema = field(*format, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad_request("text.format.schema", "'text.format.schema' must be a JSON schema object");
  g.response_format = ResponseFormat::json_schema;
  g.json_schema = *schema;
}

void parse_metadata(const ojson& body, ResponsesRequest& req) {
  const ojson* m = field(body, "metadata");
  if (!m) return;
  if (!m->is_object() || m->size() > 16)
    bad_request("metadata", "'metadata' must be an object of at most 16 string values");
  for (const auto& [key, value] : m->items())
    if (key.size() > 64 || !value.is_string() || value.get<std::string>().size() > 512)
      bad_request("metadata",
                  "'metadata' keys are at most 64 characters and values strings of at most 512");
  req.metadata = *m;
}

// Known fields memra does not implement: refused by name rather than ignored.
void refuse_unsupported(const ojson& body) {
  if (boolean(body, "background", false))
    unsupported_field("background", "background responses are not supported by memra");
  for (const char* name : {"conversation", "prompt", "max_tool_calls", "top_logprobs"})
    if (field(body, name)) unsupported_field(name, "'{}' is not supported by memra", name);
  if (const ojson* include = field(body, "include"); include && !include->empty())
    unsupported_field("include", "'include' is not supported by memra");
  if (const ojson* t = field(body, "truncation"); t && *t != "disabled")
    unsupported_field("truncation", "only truncation 'disabled' is supported");
  if (const ojson* r = field(body, "reasoning")) {
    if (!r->is_object()) bad_request("reasoning", "'reasoning' must be an object");
    if (field(*r, "effort"))
      unsupported_field("reasoning.effort", "'reasoning.effort' is not supported by memra");
  }
}

}  // namespace

void responses_input_messages(const ojson& input, const std::string& where, ojson& messages,
                              ojson& items) {
  if (input.is_string()) {
    add_message_item({{"role", "user"}, {"content", input}}, where, messages, items);
    return;
  }
  if (!input.is_array() || input.empty())
    bad_request(where, "'{}' must be a string or a non-empty array of items", where);
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!item.is_object()) bad_request(at, "'{}' must be an object", at);
    const ojson* type = field(item, "type");
    if (type && !type->is_string()) bad_request(at + ".type", "'{}.type' must be a string", at);
    const std::string kind = type ? type->get<std::string>() : "message";
    if (kind == "message") {
      add_message_item(item, at, messages, items);
    } else if (kind == "function_call") {
      add_function_call(item, at, messages, items);
    } else if (kind == "function_call_output") {
      add_function_output(item, at, messages, items);
    } else if (kind == "reasoning") {
      ojson kept = item;  // earlier thinking: listed, but templates drop it from the prompt
      kept["id"] = item_id(item, "rs_");
      items.push_back(std::move(kept));
    } else {
      unsupported_field(at + ".type", "input item type '{}' is not supported by memra", kind);
    }
  }
}

ResponsesRequest parse_responses_request(const ojson& body, const RequestLimits& limits) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  refuse_unsupported(body);
  ResponsesRequest req;
  GenerationParams& g = req.chat.gen;
  g.model = string_field(body, "model");
  g.sampling.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, 1));
  g.sampling.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1));
  if (field(body, "top_p") && g.sampling.top_p <= 0)
    bad_request("top_p", "'top_p' must be above 0");
  if (field(body, "max_output_tokens")) {
    g.max_tokens_given = true;
    g.stop.max_tokens = static_cast<int32_t>(
        integer_in(body, "max_output_tokens", 1, std::numeric_limits<int32_t>::max(), 16));
  }
  g.stream = boolean(body, "stream", false);
  if (const ojson* so = field(body, "stream_options"); so && !g.stream)
    bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
  g.user = string_field(body, "user");
  req.store = boolean(body, "store", true);
  req.previous_response_id = string_field(body, "previous_response_id");
  req.instructions = string_field(body, "instructions");
  parse_metadata(body, req);
  parse_text(body, req);
  parse_tools(body, req);
  parse_tool_choice(body, req);
  if (req.chat.tool_call_forced() && g.response_format != ResponseFormat::text)
    bad_request("text.format", "'text.format' cannot be combined with a forced tool_choice");
  const ojson* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  if (input->is_array() && static_cast<int32_t>(input->size()) > limits.max_messages)
    bad_request("input", "'input' has {} items, the limit is {}", input->size(),
                limits.max_messages);
  responses_input_messages(*input, "input", req.chat.messages, req.input_items);
  return req;
}

}  // namespace memra::server
