// Tool calls parsed out of generated text, in the formats model families are trained on:
//   Hermes / Qwen:  <tool_call>{"name": ..., "arguments": {...}}</tool_call>  (any number, text
//   around) Llama 3:        the whole reply is {"name": ..., "parameters": {...}} (optionally after
//                   <|python_tag|>; several calls separated by ';' or newlines)
// ToolCallStreamer releases plain text as it arrives and holds back what may become a call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memra::server {

// The tool-call format a chat template teaches its model, found from the template's text. It
// decides how a forced call (tool_choice "required" / a named function) is written.
enum class ToolCallFormat {
  none,         // the template shows no tool-call format memra knows
  hermes,       // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  llama3_json,  // {"name": ..., "parameters": {...}}
};
ToolCallFormat tool_call_format_of(std::string_view chat_template_source);
const char* tool_call_format_name(ToolCallFormat format);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ToolCallParse {
  std::string content;  // text outside the calls
  std::vector<ParsedToolCall> calls;
};

ToolCallParse parse_tool_calls(std::string_view text);

class ToolCallStreamer {
 public:
  // Text that can be shown as content now.
  std::string push(std::string_view text);
  // At the end: held-back content plus the parsed calls.
  ToolCallParse finish();

 private:
  std::string held_;      // undecided or call text
  bool in_call_ = false;  // held_ starts a tool call (tag seen or JSON reply)
  bool started_ = false;  // any non-space text seen
};

}  // namespace memra::server
