// Tool-call formats of the real chat templates in the pinned test data: which format each
// template teaches (a committed table, so a newer artifact's templates must be classified), the
// parser reading back the call each parsed format's template renders, and forced-call grammars
// that accept their own canonical call, which the parser then reads back.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "../common/missing_data.h"
#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"
#include "structured/grammar.h"
#include "test_data.h"
#include "tokenizer/chat_template.h"

namespace memra::server {
namespace {

using F = ToolCallFormat;
using ojson = nlohmann::ordered_json;

// Every template of llama-cpp-python 0.3.36; none = no tool-call format shown (or one memra does
// not recognize, listed as none so the table stays complete).
const std::map<std::string, F> kExpected = {
    {"Apertus-8B-Instruct", F::none},
    {"Apriel-1.6-15b-Thinker-fixed", F::apriel},
    {"Bielik-11B-v3.0-Instruct", F::hermes},
    {"ByteDance-Seed-OSS", F::seed_oss},
    {"Cohere2MoE", F::none},
    {"CohereForAI-c4ai-command-r-plus-tool_use", F::none},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::none},
    {"GLM-4.6", F::glm_xml},
    {"GLM-4.7-Flash", F::glm_xml},
    {"GigaChat3-10B-A1.8B", F::none},
    {"GigaChat3.1-10B-A1.8B", F::none},
    {"HuggingFaceTB-SmolLM3-3B", F::none},
    {"Kimi-K2-Instruct", F::kimi_k2},
    {"Kimi-K2-Thinking", F::kimi_k2},
    {"Kimi-K3", F::none},
    {"LFM2-8B-A1B", F::none},
    {"LFM2.5-8B-A1B", F::none},
    {"LFM2.5-Instruct", F::none},
    {"MiMo-VL", F::hermes},
    {"MiniMax-M1", F::none},
    {"MiniMax-M2", F::minimax_xml},
    {"MiniMax-M3", F::minimax_xml},
    {"Mistral-Small-3.2-24B-Instruct-2506", F::mistral},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", F::qwen3_xml},
    {"NVIDIA-Nemotron-Nano-v2", F::none},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::hermes},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", F::hermes},
    {"Qwen-QwQ-32B", F::hermes},
    {"Qwen-Qwen2.5-7B-Instruct", F::hermes},
    {"Qwen-Qwen3-0.6B", F::hermes},
    {"Qwen3-Coder", F::qwen3_xml},
    {"Qwen3.5-4B", F::qwen3_xml},
    {"Reka-Edge", F::hermes},
    {"Spark2.5", F::glm_xml},
    {"StepFun3.5-Flash", F::qwen3_xml},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::deepseek_r1},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", F::deepseek_r1},
    {"deepseek-ai-DeepSeek-V3.1", F::deepseek_v31},
    {"deepseek-ai-DeepSeek-V3.2", F::deepseek_dsml},
    {"deepseek-ai-DeepSeek-V4", F::deepseek_dsml},
    {"deepseek-ai-DeepSeek-V4-Flash-0731", F::deepseek_dsml},
    {"fireworks-ai-llama-3-firefunction-v2", F::none},
    {"google-gemma-2-2b-it", F::none},
    {"google-gemma-4-31B-it", F::gemma4},
    {"google-gemma-4-31B-it-interleaved", F::gemma4},
    {"ibm-granite-granite-3.3-2B-Instruct", F::none},
    {"ibm-granite-granite-4.0", F::hermes},
    {"ibm-granite-granite-4.1", F::hermes},
    {"inclusionai-ling-3.0-flash", F::glm_xml},
    {"llama-cpp-deepseek-r1", F::deepseek_r1},
    {"llama-cpp-rwkv-world", F::none},
    {"meetkai-functionary-medium-v3.1", F::none},
    {"meetkai-functionary-medium-v3.2", F::none},
    {"meta-llama-Llama-3.1-8B-Instruct", F::llama3_json},
    {"meta-llama-Llama-3.2-3B-Instruct", F::none},
    {"meta-llama-Llama-3.3-70B-Instruct", F::llama3_json},
    {"microsoft-Phi-3.5-mini-instruct", F::none},
    {"mistralai-Ministral-3-14B-Reasoning-2512", F::mistral},
    {"mistralai-Mistral-Nemo-Instruct-2407", F::mistral},
    {"moonshotai-Kimi-K2", F::kimi_k2},
    {"muse-glimmer", F::none},
    {"openai-gpt-oss-120b", F::harmony},
    {"openbmb-MiniCPM5-1B", F::none},
    {"poolside-Laguna-S-2.1", F::glm_xml},
    {"poolside-Laguna-XS-2.1", F::glm_xml},
    {"poolside-Laguna-XS.2", F::glm_xml},
    {"tencent-Hy3", F::none},
    {"unsloth-Apriel-1.5", F::apriel},
    {"unsloth-mistral-Devstral-Small-2507", F::mistral},
    {"upstage-Solar-Open-100B", F::none},
};

std::map<std::string, std::string> templates() {
  std::map<std::string, std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(test::test_data_dir() / "chat-templates")) {
    if (e.path().extension() != ".jinja") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    out[e.path().stem().string()] = ss.str();
  }
  return out;
}

TEST(ToolFormats, EveryTemplateOfTheTestDataIsClassified) {
  MEMRA_REQUIRE_PINNED_TEST_DATA(data);
  const auto all = templates();
  ASSERT_EQ(all.size(), kExpected.size());
  for (const auto& [name, source] : all) {
    auto it = kExpected.find(name);
    ASSERT_NE(it, kExpected.end()) << name << " is not in the table";
    EXPECT_STREQ(tool_call_format_name(tool_call_format_of(source)),
                 tool_call_format_name(it->second))
        << name;
  }
}

// Each parsed format's templates render an assistant turn with a call; the parser must read the
// call back from the rendered text after the user's message.
TEST(ToolFormats, ParserReadsBackTheCallsTemplatesRender) {
  MEMRA_REQUIRE_PINNED_TEST_DATA(data);
  const ojson tools = ojson::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}}}}])");
  const ojson messages = ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]}])");
  int checked = 0;
  for (const auto& [name, source] : templates()) {
    const F format = tool_call_format_of(source);
    if (format != F::hermes && format != F::qwen3_xml && format != F::deepseek_v31 &&
        format != F::kimi_k2)
      continue;
    SCOPED_TRACE(name);
    ojson context = {{"messages", messages},
                     {"tools", tools},
                     {"add_generation_prompt", false},
                     {"bos_token", "<s>"},
                     {"eos_token", "</s>"}};
    std::string text;
    try {
      text = ChatTemplate(source).render(context);
    } catch (const Error& e) {
      // Kimi K2's templates call list.append, which transformers' sandbox refuses too.
      EXPECT_TRUE(name == "Kimi-K2-Instruct" || name == "Kimi-K2-Thinking") << e.what();
      continue;
    }
    const size_t user = text.rfind("Weather in Paris?");
    ASSERT_NE(user, std::string::npos);
    const ToolCallParse p = parse_tool_calls(std::string_view(text).substr(user + 17));
    ASSERT_EQ(p.calls.size(), 1u) << text.substr(user);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
              nlohmann::json::parse(R"({"city": "Paris", "days": 3})"));
    ++checked;
  }
  EXPECT_EQ(checked, 16);  // 10 hermes, 4 qwen3-xml, 1 deepseek-v3.1, 1 kimi-k2
}

ChatRequest forced_request() {
  RequestLimits limits;
  return parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "get", "parameters": {"type": "object",
         "properties": {"k": {"type": "integer"}}, "required": ["k"]}}},
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "required", "parallel_tool_calls": false})",
                      limits),
      limits);
}

TEST(ToolFormats, ForcedGrammarsAcceptTheirCallAndTheParserReadsIt) {
  const std::map<F, std::string> canonical = {
      {F::hermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"
       "\n</tool_call>"},
      {F::llama3_json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      {F::deepseek_v31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {F::kimi_k2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
       "<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|>"
       "<|tool_calls_section_end|>"},
  };
  const ChatRequest chat = forced_request();
  for (const auto& [format, text] : canonical) {
    SCOPED_TRACE(tool_call_format_name(format));
    ASSERT_TRUE(tool_call_format_forcible(format));
    structured::GrammarMatcher m(forced_tool_call_grammar(chat, format, "m"));
    ASSERT_TRUE(m.advance(text));
    EXPECT_TRUE(m.accepting());
    EXPECT_FALSE(structured::GrammarMatcher(forced_tool_call_grammar(chat, format, "m"))
                     .advance(text.substr(0, text.size() / 2) + "x"));
    const ToolCallParse p = parse_tool_calls(text);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(p.content, "");
  }
}

TEST(ToolFormats, UnforcibleFormatsAreRefusedByName) {
  const ChatRequest chat = forced_request();
  for (F format : {F::qwen3_xml, F::glm_xml, F::deepseek_r1, F::deepseek_dsml, F::gemma4,
                   F::harmony, F::mistral, F::minimax_xml, F::seed_oss, F::apriel}) {
    EXPECT_FALSE(tool_call_format_forcible(format));
    try {
      forced_tool_call_grammar(chat, format, "m");
      ADD_FAILURE() << tool_call_format_name(format) << " was forced";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, "tool_choice");
      EXPECT_NE(std::string(e.what()).find(tool_call_format_name(format)), std::string::npos)
          << e.what();
    }
  }
}

TEST(ToolFormats, Qwen3XmlValuesAndStreaming) {
  const std::string text =
      "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n"
      "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n"
      "</parameter>\n</function>\n</tool_call>";
  const ToolCallParse p = parse_tool_calls(text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"New York","days":3,"opts":{"a":[1]}})");
  // Streamed a byte at a time, no call marker leaks into the content of any format.
  for (const std::string& s :
       {text,
        std::string("Hi <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}"
                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        std::string("Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                    "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>")}) {
    ToolCallStreamer streamer;
    std::string shown;
    for (char c : s) shown += streamer.push(std::string(1, c));
    const ToolCallParse end = streamer.finish();
    ASSERT_EQ(end.calls.size(), 1u) << s;
    EXPECT_EQ(shown + end.content, s.substr(0, s.find('<'))) << s;
  }
}

}  // namespace
}  // namespace memra::server
