// OpenAI request bodies parsed and validated into plain structs. Every refusal is an ApiError
// naming the field; unknown fields are ignored as OpenAI does, known-but-unsupported ones are
// refused by name. Nothing here touches the engine: the fuzz test drives it directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memra/engine.h"

namespace memra::server {

using ojson = nlohmann::ordered_json;

struct RequestLimits {
  int32_t max_n = 16;
  int32_t max_top_logprobs = 20;
  int32_t max_stop = 16;
  size_t max_stop_bytes = 256;
  int32_t max_logit_bias = 1024;
  int32_t max_messages = 4096;
  int32_t max_prompts = 64;             // /v1/completions prompt arrays
  int32_t max_embedding_inputs = 2048;  // /v1/embeddings input arrays (OpenAI's limit)
  int32_t max_rerank_documents = 1024;  // /v1/rerank documents
  int32_t max_json_depth = 64;
};

// response_format: free text, any JSON object, or JSON valid against a schema (constrained
// decoding; the schema is compiled when the request is served, refusing keywords by name).
enum class ResponseFormat { text, json_object, json_schema };

// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationParams {
  std::string model;  // empty: the only/default model
  SamplingParams sampling;
  StopConditions stop;
  bool max_tokens_given = false;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::string user;
  ResponseFormat response_format = ResponseFormat::text;
  ojson json_schema;  // response_format.json_schema.schema (json_schema only; {} when absent)
};

// none: tools are not offered; automatic: the model decides; required: at least one call, forced
// by a grammar; function: exactly one call of `forced_tool`, forced by a grammar.
enum class ToolChoice { none, automatic, required, function };

struct ChatRequest {
  GenerationParams gen;
  ojson messages = ojson::array();  // template-ready: role, content (string), tool_calls...
  ojson tools = ojson::array();     // [{type:function, function:{name, description, parameters}}]
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string forced_tool;  // ToolChoice::function: the function's name (one of `tools`)
  bool parallel_tool_calls = true;
  // Extra variables for the chat template (e.g. enable_thinking); never the ones the server sets.
  ojson template_kwargs = ojson::object();
  int32_t max_thinking_tokens = -1;                    // -1: no thinking budget
  std::string thinking_param = "max_thinking_tokens";  // the field that set it (refusals)
  bool tools_active() const { return !tools.empty() && tool_choice != ToolChoice::none; }
  bool tool_call_forced() const {
    return tool_choice == ToolChoice::required || tool_choice == ToolChoice::function;
  }
};

struct PromptInput {
  std::string text;          // when !is_tokens
  std::vector<int32_t> ids;  // when is_tokens
  bool is_tokens = false;
};

struct CompletionRequest {
  GenerationParams gen;
  std::vector<PromptInput> prompts;
  int32_t top_logprobs = -1;  // legacy `logprobs: N`
};

// Parses a body as JSON (depth-limited before parsing); ApiError 400 on bad JSON or not an object.
ojson parse_json_body(std::string_view body, const RequestLimits& limits);

ChatRequest parse_chat_request(const ojson& body, const RequestLimits& limits);

// After tool_choice is parsed (OpenAI or Anthropic): a forced call needs tools, and a named one
// must be among them. 400 naming `param`.
void check_tool_choice(const ChatRequest& req, const std::string& param);
CompletionRequest parse_completion_request(const ojson& body, const RequestLimits& limits);

// chat_template_kwargs: an object of at most 32 variables, none of those the server sets itself
// (messages, tools, add_generation_prompt, bos_token, eos_token); 400 naming the key.
ojson parse_template_kwargs(const ojson& value, const std::string& param);

}  // namespace memra::server
