// Anthropic Messages API requests (POST /v1/messages, /v1/messages/count_tokens) parsed into the
// same ChatRequest the OpenAI chat path renders and generates from: system blocks become a system
// message, tool_use blocks assistant tool_calls, tool_result blocks tool messages, tools and
// tool_choice (auto / any / tool / none) their OpenAI equivalents. Refusals are ApiErrors naming
// the field; the handler writes them in Anthropic's error shape.
#pragma once

#include "server/openai_request.h"

namespace memra::server {

// `count_only`: for count_tokens, where max_tokens is not required and nothing is generated.
ChatRequest parse_messages_request(const ojson& body, const RequestLimits& limits, bool count_only);

}  // namespace memra::server
