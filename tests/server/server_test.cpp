// Server unit tests: tool-call parsing, auth, config, request validation, and the full handler
// path (chat, completions, streaming, errors, metrics) over the fake engine.
#include <gtest/gtest.h>

#include <cstdio>

#include "fake_engine.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/tool_calls.h"
#include "test_harness.h"

namespace memra::server {
namespace {

using testing::call;
using json = nlohmann::json;

TEST(ToolCalls, HermesTagsWithTextAround) {
  ToolCallParse p = parse_tool_calls(
      "Let me check.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"
      "<tool_call>{\"name\": \"g\", \"arguments\": \"{\\\"y\\\": 2}\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"x", 1}}));
  EXPECT_EQ(json::parse(p.calls[1].arguments), json({{"y", 2}}));
  EXPECT_EQ(p.content, "Let me check.");
}

TEST(ToolCalls, Llama3JsonReply) {
  ToolCallParse p = parse_tool_calls(
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}; {\"name\": \"g\", "
      "\"parameters\": {}}");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "g");
}

TEST(ToolCalls, PlainAndMalformedTextStaysContent) {
  EXPECT_TRUE(parse_tool_calls("Paris is the capital.").calls.empty());
  ToolCallParse bad = parse_tool_calls("<tool_call>{not json</tool_call>");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{not json</tool_call>");
  EXPECT_TRUE(parse_tool_calls("{\"no_name\": 1}").calls.empty());
}

TEST(ToolCalls, StreamerHoldsBackAPossibleTag) {
  ToolCallStreamer s;
  EXPECT_EQ(s.push("Hi <tool"), "Hi ");
  EXPECT_EQ(s.push("_call>{\"name\":\"f\",\"arguments\":{}}"), "");
  ToolCallParse end = s.finish();
  ASSERT_EQ(end.calls.size(), 1u);
  ToolCallStreamer plain;
  EXPECT_EQ(plain.push("a <b"), "a <b");
}

TEST(Auth, Sha256KnownVectorsAndKeys) {
  Digest d = sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  Digest long_input = sha256(std::string(1000, 'a'));  // crosses block and padding boundaries
  EXPECT_EQ(long_input[0], 0x41);
  EXPECT_EQ(long_input[1], 0xed);
  ApiKeys keys;
  keys.add_from_list("sk-one, sk-two");
  EXPECT_TRUE(keys.accepts("sk-two"));
  EXPECT_FALSE(keys.accepts("sk-tw"));
  EXPECT_FALSE(keys.accepts(""));
  std::string bearer = "Bearer sk-one";
  EXPECT_EQ(presented_key(&bearer, nullptr), "sk-one");
}

TEST(Auth, KeyFileSkipsCommentsAndRefusesAnEmptyFile) {
  std::string path = ::testing::TempDir() + "memra_keys.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("# ops team\n  sk-file-1  \n\nsk-file-2\n", f);
  std::fclose(f);
  ApiKeys keys;
  keys.add_from_file(path);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.accepts("sk-file-1"));
  EXPECT_FALSE(keys.accepts("# ops team"));
  f = std::fopen(path.c_str(), "w");
  std::fputs("# nothing\n", f);
  std::fclose(f);
  ApiKeys empty;
  EXPECT_THROW(empty.add_from_file(path), Error);
  EXPECT_THROW(empty.add_from_file(path + ".missing"), Error);
}

TEST(Config, FlagsWinOverEnvironment) {
  auto env = [](const char* n) -> const char* {
    std::string name = n;
    if (name == "MEMRA_PORT") return "9000";
    if (name == "MEMRA_MODELS") return "a=/x.gguf,b=hf:org/m:Q4_K_M";
    return nullptr;
  };
  ServerConfig c = parse_server_config({"--port", "9001", "--max-body-bytes=2048"}, env);
  EXPECT_EQ(c.port, 9001);
  EXPECT_EQ(c.http.max_body_bytes, 2048u);
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.models[1].source, "hf:org/m:Q4_K_M");
  EXPECT_THROW(parse_server_config({"--port", "x"}, env), Error);
  EXPECT_THROW(parse_server_config({"--bogus"}, env), Error);
}

TEST(Requests, RefusalsNameTheField) {
  RequestLimits limits;
  auto param_of = [&](const char* body) {
    try {
      parse_chat_request(parse_json_body(body, limits), limits);
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"temperature":5})"),
            "temperature");
  EXPECT_EQ(param_of(R"({"messages":[]})"), "messages");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"robot","content":"x"}]})"), "messages[0].role");
  EXPECT_EQ(
      param_of(
          R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})"),
      "response_format");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})"),
            "tool_choice");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"n":100})"), "n");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"whatever_new":1})"),
            "accepted");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
            "messages[0].content[0].type");
  EXPECT_THROW(parse_json_body(std::string(200, '[') + std::string(200, ']'), limits), ApiError);
}

class ServerApp : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeEngineOptions o;
    o.step_ms = 0;
    o.context_length = 512;
    std::vector<ServedModel> models;
    models.push_back(testing::make_fake_model(o));
    AppConfig config;
    config.keys.add("sk-test");
    app = std::make_unique<App>(std::move(config));
    app->set_models(std::move(models));
  }
  testing::Response post(const std::string& path, const json& body) {
    return call(*app, "POST", path, body.dump(), {{"authorization", "Bearer sk-test"}});
  }
  std::unique_ptr<App> app;
};

TEST_F(ServerApp, ChatNonStreaming) {
  testing::Response r =
      post("/v1/chat/completions", {{"model", "fake-model"},
                                    {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                    {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_NE(j["choices"][0]["message"]["content"].get<std::string>().find("Paris"),
            std::string::npos);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
}

TEST_F(ServerApp, StreamingChunksShareIdAndEndWithDone) {
  testing::Response r =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                    {"temperature", 0},
                                    {"max_tokens", 5},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  std::string text, id;
  bool done = false, usage = false;
  size_t at = 0;
  while ((at = r.body.find("data: ", at)) != std::string::npos) {
    size_t end = r.body.find("\n\n", at);
    std::string data = r.body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    json c = json::parse(data);
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    if (!c["usage"].is_null()) {
      usage = true;
      EXPECT_EQ(c["usage"]["completion_tokens"], 5);
    } else if (c["choices"][0]["delta"].contains("content")) {
      text += c["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(usage);
  EXPECT_EQ(text, "Hello");
}

TEST_F(ServerApp, ErrorsHaveOpenAIShapeAndStatus) {
  testing::Response r = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 600}});
  EXPECT_EQ(r.status, 400);
  std::string msg = r.json()["error"]["message"];
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;  // the context
  EXPECT_NE(msg.find("600"), std::string::npos) << msg;  // max_tokens
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}, {"model", "nope"}}).status, 404);
  EXPECT_EQ(call(*app, "POST", "/v1/completions", "{}").status, 401);
  EXPECT_EQ(call(*app, "GET", "/health", "").status, 200);
  EXPECT_EQ(call(*app, "GET", "/nowhere", "").status, 404);
  testing::Response bad = post("/v1/chat/completions", json("not an object"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(bad.json()["error"]["message"].is_string());
}

TEST_F(ServerApp, ToolCallsAndMetrics) {
  json tools = {{{"type", "function"},
                 {"function", {{"name", "get_weather"}, {"parameters", json::object()}}}}};
  testing::Response r = post("/v1/chat/completions",
                             {{"messages", {{{"role", "user"}, {"content", "TOOL: weather?"}}}},
                              {"tools", tools},
                              {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json choice = r.json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  testing::Response m = call(*app, "GET", "/metrics", "", {{"x-api-key", "sk-test"}});
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("memra:num_requests_running{model_name=\"fake-model\"} 0"),
            std::string::npos);
  EXPECT_NE(m.body.find("memra:time_to_first_token_seconds_count 1"), std::string::npos);
}

}  // namespace
}  // namespace memra::server
