// Thinking output: the span splitter on streamed text, and reasoning_content (chat), thinking
// blocks (Anthropic Messages), reasoning items (Responses), chat_template_kwargs and the thinking
// budget over a scripted engine whose replies to THINK: carry a <think> span.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/reasoning.h"
#include "test_harness.h"

namespace memra::server {
namespace {

using json = nlohmann::json;

ReasoningSplit split_bytewise(ReasoningSplitter s, const std::string& text) {
  ReasoningSplit out;
  for (char ch : text) {
    ReasoningSplit part = s.push(std::string_view(&ch, 1));
    out.reasoning += part.reasoning;
    out.content += part.content;
  }
  ReasoningSplit rest = s.finish();
  return {out.reasoning + rest.reasoning, out.content + rest.content};
}

TEST(Reasoning, SplitsASpanStreamedByteByByte) {
  const ReasoningFormat think = reasoning_format_of("{{ '<think>' }} ... {{ '</think>' }}");
  ASSERT_TRUE(think.enabled());
  ReasoningSplit a =
      split_bytewise({think, false}, "\n<think>\nStep 1.\n\nStep 2.\n</think>\n\nAnswer");
  EXPECT_EQ(a.reasoning, "Step 1.\n\nStep 2.");
  EXPECT_EQ(a.content, "Answer");
  ReasoningSplit inside = split_bytewise({think, true}, "Hmm </thin> x</think>Done </think>");
  EXPECT_EQ(inside.reasoning, "Hmm </thin> x");
  EXPECT_EQ(inside.content, "Done </think>");  // one span only, at the start
  ReasoningSplit none = split_bytewise({think, false}, "<thin but not a tag");
  EXPECT_EQ(none.reasoning, "");
  EXPECT_EQ(none.content, "<thin but not a tag");
  ReasoningSplit cut = split_bytewise({think, false}, "<think>cut off </thi");
  EXPECT_EQ(cut.reasoning, "cut off </thi");
  EXPECT_EQ(cut.content, "");
  ReasoningSplit plain = split_bytewise({{}, false}, "<think>x</think>y");
  EXPECT_EQ(plain.content, "<think>x</think>y");  // no format: nothing is split

  ReasoningSplitter forced(think, true);
  EXPECT_EQ(forced.push("partial thought  ").reasoning, "partial thought");
  EXPECT_EQ(forced.force_close().reasoning, "");
  EXPECT_FALSE(forced.in_reasoning());
  EXPECT_EQ(forced.push("\n\nthe answer").content, "the answer");
}

TEST(Reasoning, FormatsAndOpenSpansFromTemplates) {
  const ReasoningFormat gemma = reasoning_format_of("'<|channel>thought\\n' ... '<channel|>'");
  EXPECT_EQ(gemma.open, "<|channel>thought");
  EXPECT_EQ(gemma.close, "<channel|>");
  EXPECT_FALSE(reasoning_format_of("{{ messages }}").enabled());
  const ReasoningFormat think{"<think>", "</think>"};
  EXPECT_TRUE(prompt_opens_reasoning(think, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(think, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(prompt_closes_reasoning(think, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(prompt_opens_reasoning(gemma, "<start_of_turn>model\n<|channel>thought\n"));
}

class ThinkingApp : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeEngineOptions o;
    o.step_ms = 0;
    o.context_length = 4096;  // room for Anthropic's 1024-token minimum thinking budget
    std::vector<ServedModel> models;
    o.thinking = true;
    models.push_back(testing::make_fake_model(o, "thinker"));
    o.thinking = false;
    models.push_back(testing::make_fake_model(o, "plain"));
    app = std::make_unique<App>(AppConfig{});
    app->set_models(std::move(models));
  }
  testing::Response post(const std::string& path, const json& body) {
    return testing::call(*app, "POST", path, body.dump());
  }
  json chat(json extra) {
    json body = {{"model", "thinker"}, {"messages", {{{"role", "user"}, {"content", "THINK: x"}}}}};
    body.update(extra);
    return body;
  }
  std::unique_ptr<App> app;
};

// The data lines of an SSE body.
std::vector<json> sse(const std::string& body) {
  std::vector<json> out;
  for (size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    size_t end = body.find("\n\n", at);
    std::string data = body.substr(at + 6, end - at - 6);
    if (data != "[DONE]") out.push_back(json::parse(data));
    at = end;
  }
  return out;
}

TEST_F(ThinkingApp, ChatReasoningContentStreamedAndNot) {
  testing::Response r = post("/v1/chat/completions", chat(json::object()));
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.json()["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "Let me think step by step about it.");
  EXPECT_EQ(m["content"], "The answer is 42.");
  testing::Response s = post("/v1/chat/completions", chat({{"stream", true}}));
  std::string reasoning, content;
  for (const json& c : sse(s.body)) {
    const json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(content, m["content"]);
  // The template opens the span itself when thinking is on, closes it empty when it is off.
  json on =
      post("/v1/chat/completions", chat({{"chat_template_kwargs", {{"enable_thinking", true}}}}))
          .json()["choices"][0]["message"];
  EXPECT_EQ(on["reasoning_content"], m["reasoning_content"]);
  EXPECT_EQ(on["content"], m["content"]);
  json off =
      post("/v1/chat/completions", chat({{"chat_template_kwargs", {{"enable_thinking", false}}}}))
          .json()["choices"][0]["message"];
  EXPECT_FALSE(off.contains("reasoning_content")) << off;
  EXPECT_EQ(off["content"], "The answer is 42.");
  testing::Response reserved =
      post("/v1/chat/completions", chat({{"chat_template_kwargs", {{"messages", 1}}}}));
  EXPECT_EQ(reserved.status, 400);
  EXPECT_EQ(reserved.json()["error"]["param"], "chat_template_kwargs.messages");
}

TEST_F(ThinkingApp, BudgetForcesTheCloseTag) {
  for (bool stream : {false, true}) {
    testing::Response r =
        post("/v1/chat/completions",
             chat({{"max_thinking_tokens", 5},
                   {"stream", stream},
                   {"stream_options", stream ? json{{"include_usage", true}} : json()}}));
    ASSERT_EQ(r.status, 200) << r.body;
    std::string reasoning, content;
    int completion_tokens = 0;
    if (stream) {
      for (const json& c : sse(r.body)) {
        if (!c["usage"].is_null()) completion_tokens = c["usage"]["completion_tokens"];
        if (c["choices"].empty()) continue;
        const json& d = c["choices"][0]["delta"];
        if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
        if (d.contains("content")) content += d["content"].get<std::string>();
      }
    } else {
      json m = r.json()["choices"][0]["message"];
      reasoning = m["reasoning_content"];
      content = m["content"];
      completion_tokens = r.json()["usage"]["completion_tokens"];
    }
    EXPECT_EQ(reasoning, "Let") << stream;  // "<think>" then 5 tokens: "\nLet "
    EXPECT_EQ(content, "The answer is 42.") << stream;
    // <think>\nLet (12) + </think>\n\n (10) + the answer (17) + EOS
    EXPECT_EQ(completion_tokens, 12 + 10 + 17 + 1) << stream;
  }
  testing::Response refused =
      post("/v1/chat/completions", {{"model", "plain"},
                                    {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                    {"max_thinking_tokens", 5}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["error"]["param"], "max_thinking_tokens");
}

TEST_F(ThinkingApp, AnthropicThinkingBlocks) {
  json body = {{"model", "thinker"},
               {"max_tokens", 2000},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
               {"messages", {{{"role", "user"}, {"content", "THINK: x"}}}}};
  testing::Response r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json content = r.json()["content"];
  ASSERT_EQ(content.size(), 2u) << content;
  EXPECT_EQ(content[0]["type"], "thinking");
  EXPECT_EQ(content[0]["thinking"], "Let me think step by step about it.");
  EXPECT_EQ(content[1]["text"], "The answer is 42.");
  body["stream"] = true;
  std::vector<json> events = sse(post("/v1/messages", body).body);
  std::string thinking;
  std::vector<std::pair<std::string, int>> blocks;
  for (const json& e : events) {
    if (e["type"] == "content_block_start")
      blocks.emplace_back(e["content_block"]["type"], e["index"]);
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "thinking_delta")
      thinking += e["delta"]["thinking"].get<std::string>();
  }
  EXPECT_EQ(blocks, (std::vector<std::pair<std::string, int>>{{"thinking", 0}, {"text", 1}}));
  EXPECT_EQ(thinking, content[0]["thinking"]);
  body.erase("stream");
  body["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(post("/v1/messages", body).json()["content"].size(), 1u);
  body["model"] = "plain";
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  testing::Response refused = post("/v1/messages", body);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["type"], "error");
  EXPECT_NE(refused.body.find("thinking"), std::string::npos);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 100}};
  EXPECT_EQ(post("/v1/messages", body).status, 400);  // Anthropic's minimum is 1024
}

TEST_F(ThinkingApp, ResponsesReasoningItems) {
  json body = {{"model", "thinker"}, {"input", "THINK: x"}};
  testing::Response r = post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json out = r.json()["output"];
  ASSERT_EQ(out.size(), 2u) << out;
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["content"][0]["text"], "Let me think step by step about it.");
  EXPECT_EQ(out[1]["content"][0]["text"], "The answer is 42.");
  EXPECT_GT(r.json()["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 30);
  body["stream"] = true;
  std::vector<json> events = sse(post("/v1/responses", body).body);
  std::string reasoning;
  for (const json& e : events)
    if (e["type"] == "response.reasoning_text.delta") reasoning += e["delta"].get<std::string>();
  EXPECT_EQ(reasoning, out[0]["content"][0]["text"]);
  EXPECT_EQ(events.back()["response"]["output"][0]["type"], "reasoning");
  EXPECT_EQ(events.back()["response"]["output"][1]["type"], "message");
}

}  // namespace
}  // namespace memra::server
