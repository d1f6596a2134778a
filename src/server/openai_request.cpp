// Validation of OpenAI request fields into GenerationParams / ChatRequest / CompletionRequest.
// Ranges follow the OpenAI reference (temperature 0..2, penalties -2..2, logit_bias -100..100).
#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace memra::server {

namespace {

void parse_stop(const ojson& body, const RequestLimits& limits, StopConditions& stop) {
  const ojson* v = field(body, "stop");
  if (!v) return;
  auto add = [&](const ojson& s) {
    if (!s.is_string()) bad_request("stop", "'stop' entries must be strings, got {}", type_name(s));
    std::string text = s.get<std::string>();
    if (text.empty()) bad_request("stop", "'stop' strings must not be empty");
    if (text.size() > limits.max_stop_bytes)
      bad_request("stop", "'stop' strings are limited to {} bytes", limits.max_stop_bytes);
    stop.stop_strings.push_back(std::move(text));
  };
  if (v->is_string()) {
    add(*v);
  } else if (v->is_array()) {
    if (static_cast<int32_t>(v->size()) > limits.max_stop)
      bad_request("stop", "'stop' has {} entries, the limit is {}", v->size(), limits.max_stop);
    for (const ojson& s : *v) add(s);
  } else {
    bad_request("stop", "'stop' must be a string or an array of strings, got {}", type_name(*v));
  }
}

void parse_logit_bias(const ojson& body, const RequestLimits& limits, SamplingParams& sampling) {
  const ojson* v = field(body, "logit_bias");
  if (!v) return;
  if (!v->is_object()) bad_request("logit_bias", "'logit_bias' must be an object");
  if (static_cast<int32_t>(v->size()) > limits.max_logit_bias)
    bad_request("logit_bias", "'logit_bias' has {} entries, the limit is {}", v->size(),
                limits.max_logit_bias);
  for (const auto& [key, value] : v->items()) {
    // Keys are token ids written as decimal strings; the range check against the vocabulary
    // happens once the model is known (handlers).
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
      bad_request("logit_bias", "'logit_bias' key '{}' is not a token id", key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100)
      bad_request("logit_bias", "'logit_bias[{}]' must be a number between -100 and 100", key);
    sampling.logit_bias.emplace_back(std::stoi(key), value.get<float>());
  }
}

// Known OpenAI fields memra does not implement: refused by name rather than ignored.
void refuse_unsupported(const ojson& body) {
  for (const char* name :
       {"functions", "function_call", "audio", "prediction", "web_search_options", "suffix",
        "guided_json", "guided_regex", "guided_grammar", "grammar"}) {
    if (field(body, name)) unsupported_field(name, "'{}' is not supported by memra", name);
  }
  if (const ojson* m = field(body, "modalities")) {
    if (!m->is_array()) bad_request("modalities", "'modalities' must be an array");
    for (const ojson& x : *m)
      if (x != "text") unsupported_field("modalities", "only the 'text' modality is supported");
  }
}

// {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict",
// "description"}} as OpenAI defines it.
void parse_response_format(const ojson& body, GenerationParams& g) {
  const ojson* rf = field(body, "response_format");
  if (!rf) return;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    bad_request("response_format", "'response_format' must be an object with a string 'type'");
  std::string type = (*rf)["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    g.response_format = ResponseFormat::json_object;
    return;
  }
  if (type != "json_schema")
    bad_request("response_format.type",
                "unknown response_format type '{}' (expected text, json_object or json_schema)",
                type);
  const ojson* spec = field(*rf, "json_schema");
  if (!spec || !spec->is_object())
    bad_request("response_format.json_schema",
                "'response_format.json_schema' must be an object with a 'name' and a 'schema'");
  const ojson* name = field(*spec, "name");
  if (!name || !name->is_string() || name->get<std::string>().empty() ||
      name->get<std::string>().size() > 64)
    bad_request("response_format.json_schema.name",
                "'response_format.json_schema.name' must be a string of 1 to 64 characters");
  boolean(*spec, "strict", false);  // type-checked; memra always enforces the schema
  const ojson* schema = field(*spec, "schema");
  if (schema && !schema->is_object() && !schema->is_boolean())
    bad_request("response_format.json_schema.schema",
                "'response_format.json_schema.schema' must be a JSON schema object");
  g.response_format = ResponseFormat::json_schema;
  g.json_schema = schema ? *schema : ojson::object();
}

GenerationParams parse_common(const ojson& body, const RequestLimits& limits) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  refuse_unsupported(body);
  GenerationParams g;
  parse_response_format(body, g);
  g.model = string_field(body, "model");
  SamplingParams& s = g.sampling;
  s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, 1));
  s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1));
  if (field(body, "top_p") && s.top_p <= 0) bad_request("top_p", "'top_p' must be above 0");
  int64_t top_k = integer_in(body, "top_k", -1, 1 << 20, 0);
  s.top_k = static_cast<int32_t>(top_k < 0 ? 0 : top_k);  // -1 = off (vLLM convention)
  s.min_p = static_cast<float>(number_in(body, "min_p", 0, 1, 0));
  s.presence_penalty = static_cast<float>(number_in(body, "presence_penalty", -2, 2, 0));
  s.frequency_penalty = static_cast<float>(number_in(body, "frequency_penalty", -2, 2, 0));
  s.repetition_penalty = static_cast<float>(number_in(body, "repetition_penalty", 0.01, 10, 1));
  if (const ojson* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad_request("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  parse_logit_bias(body, limits, s);
  parse_stop(body, limits, g.stop);
  g.stop.ignore_eos = boolean(body, "ignore_eos", false);
  const char* max_name =
      field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (field(body, max_name)) {
    g.max_tokens_given = true;
    g.stop.max_tokens = static_cast<int32_t>(
        integer_in(body, max_name, 1, std::numeric_limits<int32_t>::max(), 16));
  }
  g.n = static_cast<int32_t>(integer_in(body, "n", 1, limits.max_n, 1));
  g.stream = boolean(body, "stream", false);
  if (const ojson* so = field(body, "stream_options")) {
    if (!g.stream)
      bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    g.include_usage = boolean(*so, "include_usage", false);
  }
  g.user = string_field(body, "user");
  return g;
}

std::string message_content(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(where, "'{}' must be a string or an array of content parts", where);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    std::string at = fmt::format("{}[{}]", where, j);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad_request(at, "'{}' must be an object with a string 'type'", at);
    std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "refusal")
      unsupported_field(at + ".type", "content part type '{}' is not supported (text only)", type);
    const char* key = type == "text" ? "text" : "refusal";
    if (!part.contains(key) || !part[key].is_string())
      bad_request(at, "'{}.{}' must be a string", at, key);
    if (!text.empty()) text += "\n";
    text += part[key].get<std::string>();
  }
  return text;
}

ojson parse_tool_calls(const ojson& calls, const std::string& where) {
  if (!calls.is_array()) bad_request(where, "'{}' must be an array", where);
  ojson out = ojson::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const ojson& c = calls[j];
    std::string at = fmt::format("{}[{}]", where, j);
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      bad_request(at, "'{}' must be an object with a 'function' object", at);
    const ojson& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      bad_request(at + ".function.name", "'{}.function.name' must be a string", at);
    ojson args = ojson::object();
    if (f.contains("arguments") && f["arguments"].is_string()) {
      // Templates expect a mapping (they tojson it themselves); keep the text if it is not JSON.
      args = ojson::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (args.is_discarded()) args = f["arguments"];
    } else if (f.contains("arguments") && f["arguments"].is_object()) {
      args = f["arguments"];
    }
    const bool has_id = c.contains("id") && c["id"].is_string();  // value() throws otherwise
    ojson call = {{"id", has_id ? c["id"] : ojson(fmt::format("call_{}", j))},
                  {"type", "function"},
                  {"function", {{"name", f["name"]}, {"arguments", args}}}};
    out.push_back(std::move(call));
  }
  return out;
}

ojson parse_message(const ojson& m, size_t i) {
  std::string at = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request(at, "'{}' must be an object", at);
  if (!m.contains("role") || !m["role"].is_string())
    bad_request(at + ".role", "'{}.role' must be a string", at);
  std::string role = m["role"].get<std::string>();
  if (role == "developer") role = "system";  // templates know system; OpenAI treats them alike
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    bad_request(at + ".role",
                "'{}.role' '{}' is not one of system, developer, user, assistant, tool", at, role);
  ojson out = {{"role", role}};
  const ojson* content = field(m, "content");
  bool has_calls = role == "assistant" && field(m, "tool_calls");
  if (!content && !has_calls) bad_request(at + ".content", "'{}.content' is required", at);
  out["content"] = content ? ojson(message_content(*content, at + ".content")) : ojson();
  if (has_calls) out["tool_calls"] = parse_tool_calls(m["tool_calls"], at + ".tool_calls");
  if (role == "tool") {
    const ojson* id = field(m, "tool_call_id");
    if (!id || !id->is_string())
      bad_request(at + ".tool_call_id", "'{}.tool_call_id' must be a string", at);
    out["tool_call_id"] = *id;
  }
  if (const ojson* name = field(m, "name"); name && name->is_string()) out["name"] = *name;
  return out;
}

void parse_tools(const ojson& body, ChatRequest& req) {
  if (const ojson* tools = field(body, "tools")) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || !t.contains("type") || t["type"] != "function")
        unsupported_field(at + ".type", "'{}.type' must be 'function'", at);
      if (!t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad_request(at + ".function.name", "'{}.function.name' must be a string", at);
      req.tools.push_back(t);
    }
  }
  if (const ojson* choice = field(body, "tool_choice")) {
    if (*choice == "none") {
      req.tool_choice = ToolChoice::none;
    } else if (*choice == "auto") {
      req.tool_choice = ToolChoice::automatic;
    } else if (*choice == "required") {
      req.tool_choice = ToolChoice::required;
    } else if (choice->is_object()) {
      // {"type": "function", "function": {"name": "..."}}
      const ojson* fn = field(*choice, "function");
      if (!choice->contains("type") || (*choice)["type"] != "function" || !fn || !fn->is_object() ||
          !fn->contains("name") || !(*fn)["name"].is_string())
        bad_request("tool_choice",
                    "'tool_choice' object must be {{\"type\": \"function\", \"function\": "
                    "{{\"name\": ...}}}}");
      req.tool_choice = ToolChoice::function;
      req.forced_tool = (*fn)["name"].get<std::string>();
    } else {
      bad_request("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or an object");
    }
    check_tool_choice(req, "tool_choice");
  }
  req.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);
}

}  // namespace

void check_tool_choice(const ChatRequest& req, const std::string& param) {
  if (req.tool_call_forced() && req.tools.empty())
    bad_request(param, "a forced tool_choice needs a non-empty 'tools' list");
  if (req.tool_choice != ToolChoice::function) return;
  for (const ojson& t : req.tools)
    if (t["function"]["name"] == req.forced_tool) return;
  bad_request(param, "tool_choice names '{}', which is not in 'tools'", req.forced_tool);
}

ojson parse_template_kwargs(const ojson& value, const std::string& param) {
  if (!value.is_object() || value.size() > 32)
    bad_request(param, "'{}' must be an object of at most 32 template variables", param);
  for (const auto& [key, v] : value.items())
    for (const char* reserved :
         {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
      if (key == reserved)
        bad_request(param + "." + key, "'{}.{}' is set by the server and cannot be overridden",
                    param, key);
  return value;
}

ojson parse_json_body(std::string_view body, const RequestLimits& limits) {
  // nlohmann's parser recurses per nesting level: bound the depth before handing it the text.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_json_depth)
        bad_request("", "JSON nesting is deeper than {} levels", limits.max_json_depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  ojson j = ojson::parse(body, nullptr, false);
  if (j.is_discarded()) bad_request("", "the request body is not valid JSON");
  if (!j.is_object()) bad_request("", "the request body must be a JSON object");
  return j;
}

ChatRequest parse_chat_request(const ojson& body, const RequestLimits& limits) {
  ChatRequest req;
  req.gen = parse_common(body, limits);
  const ojson* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array");
  if (static_cast<int32_t>(messages->size()) > limits.max_messages)
    bad_request("messages", "'messages' has {} entries, the limit is {}", messages->size(),
                limits.max_messages);
  for (size_t i = 0; i < messages->size(); ++i)
    req.messages.push_back(parse_message((*messages)[i], i));
  parse_tools(body, req);
  if (const ojson* kwargs = field(body, "chat_template_kwargs"))
    req.template_kwargs = parse_template_kwargs(*kwargs, "chat_template_kwargs");
  req.max_thinking_tokens = static_cast<int32_t>(
      integer_in(body, "max_thinking_tokens", 0, std::numeric_limits<int32_t>::max(), -1));
  req.gen.logprobs = boolean(body, "logprobs", false);
  int64_t top = integer_in(body, "top_logprobs", 0, limits.max_top_logprobs, 0);
  if (field(body, "top_logprobs") && !req.gen.logprobs)
    bad_request("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  req.gen.sampling.top_logprobs = req.gen.logprobs ? static_cast<int32_t>(top) : -1;
  return req;
}

namespace {

std::vector<int32_t> token_array(const ojson& a, const std::string& where) {
  std::vector<int32_t> ids;
  for (const ojson& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad_request("prompt", "'{}' must hold non-negative integer token ids", where);
    ids.push_back(t.get<int32_t>());
  }
  if (ids.empty()) bad_request("prompt", "'{}' must not be empty", where);
  return ids;
}

}  // namespace

CompletionRequest parse_completion_request(const ojson& body, const RequestLimits& limits) {
  CompletionRequest req;
  req.gen = parse_common(body, limits);
  const ojson* prompt = field(body, "prompt");
  if (!prompt) bad_request("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    req.prompts.push_back({prompt->get<std::string>(), {}, false});
  } else if (prompt->is_array() && !prompt->empty()) {
    if (static_cast<int32_t>(prompt->size()) > limits.max_prompts && !(*prompt)[0].is_number())
      bad_request("prompt", "'prompt' has {} entries, the limit is {}", prompt->size(),
                  limits.max_prompts);
    if ((*prompt)[0].is_number()) {
      req.prompts.push_back({"", token_array(*prompt, "prompt"), true});
    } else {
      for (size_t i = 0; i < prompt->size(); ++i) {
        const ojson& p = (*prompt)[i];
        if (p.is_string())
          req.prompts.push_back({p.get<std::string>(), {}, false});
        else if (p.is_array())
          req.prompts.push_back({"", token_array(p, fmt::format("prompt[{}]", i)), true});
        else
          bad_request("prompt", "'prompt[{}]' must be a string or an array of token ids", i);
      }
    }
  } else {
    bad_request("prompt", "'prompt' must be a string, an array of strings or token ids");
  }
  if (req.prompts.size() * static_cast<size_t>(req.gen.n) > static_cast<size_t>(limits.max_n) * 4)
    bad_request("n", "'n' times the number of prompts is over {}", limits.max_n * 4);
  if (boolean(body, "echo", false)) unsupported_field("echo", "'echo' is not supported by memra");
  if (const ojson* best_of = field(body, "best_of");
      best_of && !(best_of->is_number_integer() && best_of->get<int64_t>() == req.gen.n))
    unsupported_field("best_of", "'best_of' other than 'n' is not supported by memra");
  if (field(body, "logprobs")) {
    req.top_logprobs =
        static_cast<int32_t>(integer_in(body, "logprobs", 0, limits.max_top_logprobs, 0));
    req.gen.logprobs = true;
  }
  req.gen.sampling.top_logprobs = req.top_logprobs;
  return req;
}

}  // namespace memra::server
