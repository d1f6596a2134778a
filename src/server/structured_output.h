// Grammars for outputs the server forces: response_format json_object / json_schema, and tool
// calls under tool_choice "required" or a named function, written in the model's own tool-call
// format so the usual parser turns them into `tool_calls`. A schema memra cannot enforce is
// refused (400 naming the field and the keyword), never approximated.
#pragma once

#include <memory>

#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace memra::structured {
class Grammar;
}

namespace memra::server {

// Calls a forced `required` turn may hold when parallel_tool_calls is true.
constexpr int32_t kMaxForcedToolCalls = 8;

// Null for response_format text. `schema_param` names the schema's field in a refusal.
std::shared_ptr<const structured::Grammar> response_format_grammar(
    const GenerationParams& gen, const char* schema_param = "response_format.json_schema.schema");

// For a chat request whose tool_choice forces a call; ApiError 400 when the model's chat template
// has no tool-call format memra knows (`format` none) or a tool's parameters cannot be enforced.
std::shared_ptr<const structured::Grammar> forced_tool_call_grammar(const ChatRequest& chat,
                                                                    ToolCallFormat format,
                                                                    const std::string& model_id);

}  // namespace memra::server
