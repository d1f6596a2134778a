// OpenAI Responses API (POST /v1/responses) request bodies parsed into a ChatRequest plus the
// Responses-only fields. Input items become template-ready messages (function_call items become
// an assistant turn's tool_calls, function_call_output items tool messages); built-in tools,
// background mode and other fields memra does not implement are refused by name. Nothing here
// touches the engine or the store: the fuzz test drives it directly.
#pragma once

#include <string>

#include "server/openai_request.h"

namespace memra::server {

struct ResponsesRequest {
  ChatRequest chat;          // messages (this request's input only), tools, sampling, format
  std::string instructions;  // a system message before the conversation; not carried over
  ojson input_items = ojson::array();  // the input as items with ids (for input_items listing)
  ojson metadata = ojson::object();
  ojson text_format = {{"type", "text"}};  // echoed back in `text.format`
  ojson tools = ojson::array();            // as sent (echoed back)
  ojson tool_choice = "auto";              // as sent (echoed back)
  std::string previous_response_id;
  bool store = true;
};

ResponsesRequest parse_responses_request(const ojson& body, const RequestLimits& limits);

// Template-ready messages for input items (an array) or a string; `where` names the field in
// errors. Appends to `messages`; fills `items` with the normalized items (ids added).
void responses_input_messages(const ojson& input, const std::string& where, ojson& messages,
                              ojson& items);

}  // namespace memra::server
