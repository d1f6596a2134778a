// Tool calls parsed out of generated text, in the formats model families are trained on:
//   Hermes / Qwen:  <tool_call>{"name": ..., "arguments": {...}}</tool_call>  (any number, text
//                   around)
//   Qwen3-Coder / Qwen3.5 XML: <tool_call><function=NAME><parameter=K>value</parameter>...
//                   </function></tool_call>
//   Llama 3:        the whole reply is {"name": ..., "parameters": {...}} (optionally after
//                   <|python_tag|>; several calls separated by ';' or newlines)
//   DeepSeek V3.1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
//                   <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   Kimi K2:        <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
//                   <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
// Every format is recognized in any reply (their markers differ), so parsing needs no model.
// ToolCallStreamer releases plain text as it arrives and holds back what may become a call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memra::server {

// The tool-call format a chat template teaches its model, found from the template's text. It
// decides how a forced call (tool_choice "required" / a named function) is written.
enum class ToolCallFormat {
  none,          // the template shows no tool-call format memra knows
  hermes,        // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  llama3_json,   // {"name": ..., "parameters": {...}}
  deepseek_v31,  // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
  kimi_k2,       // <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
  qwen3_xml,     // <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>...: parsed only
  // Shown by templates but not implemented: named in refusals, their calls stay content.
  glm_xml,        // GLM-4.6/4.7: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
  deepseek_r1,    // <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...```
  deepseek_dsml,  // DeepSeek V3.2/V4: <｜DSML｜invoke name=...> blocks
  gemma4,         // <|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>
  harmony,        // gpt-oss: <|channel|>commentary to=functions.NAME ... <|call|>
  mistral,        // [TOOL_CALLS]...
  minimax_xml,    // MiniMax M2/M3: <minimax:tool_call><invoke name=...> (M3 with other tags)
  seed_oss,       // <seed:tool_call><function=...>
  apriel,         // <tool_calls>[{"name": ..., "arguments": ...}, ...]</tool_calls>
};
ToolCallFormat tool_call_format_of(std::string_view chat_template_source);
const char* tool_call_format_name(ToolCallFormat format);
// Whether a call in this format can be forced (tool_choice required / a named function).
bool tool_call_format_forcible(ToolCallFormat format);

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
