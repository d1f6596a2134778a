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
