// Grammars for response_format and forced tool calls; see structured_output.h.
#include "server/structured_output.h"

#include <algorithm>

#include "server/api_error.h"
#include "structured/grammar.h"

namespace memra::server {

namespace {

using structured::GrammarBuilder;

// Compiles a schema into `builder`, turning the compiler's refusal into a 400 naming `param`.
GrammarBuilder::Node compile_schema(GrammarBuilder& builder, const nlohmann::json& schema,
                                    const std::string& param) {
  try {
    return builder.json_schema(schema);
  } catch (const Error& e) {
    const bool unsupported = e.code() == ErrorCode::unsupported;
    throw ApiError(400, "invalid_request_error", param,
                   unsupported ? "unsupported_schema" : "invalid_schema",
                   fmt::format("{}: {}", param, e.what()));
  }
}

// The JSON text of a tool name as it appears in a call, e.g. "get_weather" with its quotes.
std::string quoted(const std::string& name) {
  return nlohmann::json(name).dump();
}

// A forced call written in a format: prefix, then the tool's key (its name in the format's
// spelling), the arguments object, suffix. Only formats with JSON arguments can be forced.
struct ForcedSpelling {
  std::string prefix, suffix;
  std::string (*key)(const std::string& name);
};

ForcedSpelling spelling_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes:
      return {"<tool_call>\n{\"name\": ", "}\n</tool_call>",
              [](const std::string& n) { return quoted(n) + ", \"arguments\": "; }};
    case ToolCallFormat::llama3_json:
      return {"{\"name\": ", "}",
              [](const std::string& n) { return quoted(n) + ", \"parameters\": "; }};
    case ToolCallFormat::deepseek_v31:
      return {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
              "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
              [](const std::string& n) { return n + "<｜tool▁sep｜>"; }};
    case ToolCallFormat::kimi_k2:
      return {"<|tool_calls_section_begin|><|tool_call_begin|>functions.",
              "<|tool_call_end|><|tool_calls_section_end|>",
              [](const std::string& n) { return n + ":0<|tool_call_argument_begin|>"; }};
    default:
      break;
  }
  return {};
}

}  // namespace

std::shared_ptr<const structured::Grammar> response_format_grammar(const GenerationParams& gen,
                                                                   const char* schema_param) {
  if (gen.response_format == ResponseFormat::text) return nullptr;
  GrammarBuilder builder;
  if (gen.response_format == ResponseFormat::json_object)
    return builder.build(builder.any_json_object());
  nlohmann::json schema = nlohmann::json::parse(gen.json_schema.dump());
  return builder.build(compile_schema(builder, schema, schema_param));
}

std::shared_ptr<const structured::Grammar> forced_tool_call_grammar(const ChatRequest& chat,
                                                                    ToolCallFormat format,
                                                                    const std::string& model_id) {
  if (format == ToolCallFormat::none)
    throw ApiError(400, "invalid_request_error", "tool_choice", "unsupported_parameter",
                   fmt::format("model '{}' has a chat template without a tool-call format memra "
                               "knows (Hermes <tool_call>, Llama 3 JSON, DeepSeek V3.1 or Kimi "
                               "K2), so a call cannot be forced; use tool_choice 'auto' or serve "
                               "it with --chat-template",
                               model_id));
  if (!tool_call_format_forcible(format))
    throw ApiError(
        400, "invalid_request_error", "tool_choice", "unsupported_parameter",
        fmt::format("model '{}' writes tool calls in the '{}' format, which memra cannot "
                    "force; use tool_choice 'auto'",
                    model_id, tool_call_format_name(format)));
  if (chat.gen.response_format != ResponseFormat::text)
    bad_request("response_format",
                "'response_format' cannot be combined with a forced tool_choice: the reply is "
                "a tool call");
  const bool hermes = format == ToolCallFormat::hermes;
  const ForcedSpelling spelling = spelling_of(format);
  std::vector<std::string> names;
  GrammarBuilder builder;
  std::vector<std::pair<std::string, GrammarBuilder::Node>> calls;
  for (size_t i = 0; i < chat.tools.size(); ++i) {
    const ojson& fn = chat.tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (chat.tool_choice == ToolChoice::function && name != chat.forced_tool) continue;
    // A function without parameters takes none: its arguments are {}.
    nlohmann::json schema =
        fn.contains("parameters")
            ? nlohmann::json::parse(fn["parameters"].dump())
            : nlohmann::json{{"type", "object"}, {"additionalProperties", false}};
    GrammarBuilder::Node args =
        compile_schema(builder, schema, fmt::format("tools[{}].function.parameters", i));
    if (std::find(names.begin(), names.end(), name) != names.end())
      bad_request(fmt::format("tools[{}].function.name", i), "two tools are named '{}'", name);
    names.push_back(name);
    calls.emplace_back(spelling.key(name),
                       builder.sequence({args, builder.literal(spelling.suffix)}));
  }
  GrammarBuilder::Node choice = 0;
  try {
    choice = builder.keyed_choice(std::move(calls));
  } catch (const Error& e) {  // e.g. more tools than one grammar choice may hold
    bad_request("tools", "cannot force a call among these tools: {}", e.what());
  }
  GrammarBuilder::Node call = builder.sequence({builder.literal(spelling.prefix), choice});
  // Hermes writes several calls one per line; the other formats are forced to one call.
  const bool several =
      hermes && chat.tool_choice == ToolChoice::required && chat.parallel_tool_calls;
  return builder.build(several ? builder.repeat(call, "\n", 1, kMaxForcedToolCalls) : call);
}

}  // namespace memra::server
