// Server unit tests: tool-call parsing, auth, config, request validation, and the full handler
// path (chat, completions, streaming, errors, metrics) over the fake engine.
#include <gtest/gtest.h>

#include <cstdio>

#include "fake_engine.h"
#include "server/anthropic_request.h"
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

TEST(ToolCalls, CallsBeforeACutOffLastCallStand) {
  ToolCallParse p = parse_tool_calls(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"f\", \"argu");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"f\", \"argu");
  // a cut-off first call leaves everything as content
  EXPECT_TRUE(parse_tool_calls("<tool_call>\n{\"name\": \"f\"").calls.empty());
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
  ServerConfig store = parse_server_config(
      {"--responses-store-max", "5", "--responses-store-ttl=60", "--responses-store-bytes", "4096"},
      env);
  EXPECT_EQ(store.response_store.max_responses, 5u);
  EXPECT_EQ(store.response_store.max_age_s, 60);
  EXPECT_EQ(store.response_store.max_bytes, 4096u);
  EXPECT_THROW(parse_server_config({"--port", "x"}, env), Error);
  EXPECT_THROW(parse_server_config({"--bogus"}, env), Error);
}

TEST(Config, ModelEntryOptionsAndTaskDefaults) {
  auto env = [](const char* n) -> const char* {
    std::string name = n;
    if (name == "MEMRA_MODELS")
      return "chat=/c.gguf,e=hf:org/e:Q8_0;task=embed;pooling=mean,r=/r.gguf;task=rerank;"
             "rerank_prompt=/p.txt;rerank_tokens=Yes/No,other=/o.gguf";
    return nullptr;
  };
  ServerConfig c = parse_server_config({"--pooling", "cls"}, env);
  ASSERT_EQ(c.models.size(), 4u);
  EXPECT_EQ(c.models[0].task, "");
  EXPECT_EQ(c.models[1].source, "hf:org/e:Q8_0");
  EXPECT_EQ(c.models[1].task, "embed");
  EXPECT_EQ(c.models[1].pooling, "mean");  // the entry's own wins over --pooling
  EXPECT_EQ(c.models[2].task, "rerank");
  EXPECT_EQ(c.models[2].rerank_prompt, "/p.txt");
  EXPECT_EQ(c.models[2].rerank_tokens, "Yes/No");
  EXPECT_EQ(c.models[3].pooling, "cls");
  ServerConfig single = parse_server_config(
      {"--task", "embed"}, [](const char*) { return static_cast<const char*>(nullptr); });
  ASSERT_EQ(single.models.size(), 1u);  // the default model, for embeddings
  EXPECT_EQ(single.models[0].task, "embed");
  const auto refused = [](const char* models) {
    try {
      parse_server_config({"--models", models},
                          [](const char*) { return static_cast<const char*>(nullptr); });
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("e=/e.gguf;task=embedding").find("task must be"), std::string::npos);
  EXPECT_NE(refused("e=/e.gguf;pooling=max").find("pooling must be"), std::string::npos);
  EXPECT_NE(refused("e=/e.gguf;colour=blue").find("unknown or empty option 'colour=blue'"),
            std::string::npos);
  EXPECT_NE(refused("e=;task=embed").find("alias=SOURCE"), std::string::npos);
  EXPECT_THROW(parse_server_config({"--task", "classify"}, env), Error);
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
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})"),
            "tool_choice");  // no tools to call
  EXPECT_EQ(
      param_of(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})"),
      "response_format.type");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],
                         "response_format":{"type":"json_schema","json_schema":{"schema":{}}}})"),
            "response_format.json_schema.name");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"n":100})"), "n");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":"x"}],"whatever_new":1})"),
            "accepted");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
            "messages[0].content[0].type");
  EXPECT_THROW(parse_json_body(std::string(200, '[') + std::string(200, ']'), limits), ApiError);
}

TEST(Requests, ToolChoiceAndResponseFormat) {
  RequestLimits limits;
  auto parse = [&](const std::string& extra) {
    return parse_chat_request(
        parse_json_body(R"({"messages":[{"role":"user","content":"x"}],)" + extra + "}", limits),
        limits);
  };
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather"}},
                  {"type":"function","function":{"name":"get_time"}}])";
  ChatRequest required = parse(tools + R"(,"tool_choice":"required")");
  EXPECT_EQ(required.tool_choice, ToolChoice::required);
  EXPECT_TRUE(required.tool_call_forced());
  ChatRequest named =
      parse(tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})");
  EXPECT_EQ(named.tool_choice, ToolChoice::function);
  EXPECT_EQ(named.forced_tool, "get_time");
  try {
    parse(tools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})");
    ADD_FAILURE() << "an unknown forced function was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tool_choice");
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  ChatRequest none = parse(tools + R"(,"tool_choice":"none")");
  EXPECT_FALSE(none.tools_active());
  ChatRequest obj = parse(R"("response_format":{"type":"json_object"})");
  EXPECT_EQ(obj.gen.response_format, ResponseFormat::json_object);
  ChatRequest schema = parse(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer"}}})");
  EXPECT_EQ(schema.gen.response_format, ResponseFormat::json_schema);
  EXPECT_EQ(schema.gen.json_schema["type"], "integer");
}

TEST(ToolCallFormats, FoundFromTheTemplateText) {
  EXPECT_EQ(tool_call_format_of("{{ '<tool_call>\\n' }}"), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format_of(R"({{ '<|python_tag|>' }} "parameters": )"),
            ToolCallFormat::llama3_json);
  EXPECT_EQ(tool_call_format_of("{{ messages[0]['content'] }}"), ToolCallFormat::none);
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

TEST(AnthropicRequests, BlocksBecomeTemplateMessages) {
  RequestLimits limits;
  ChatRequest chat = parse_messages_request(
      parse_json_body(R"({"max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "w", "input": {"city": "Paris"}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
            "content": "sunny", "is_error": true}, {"type": "text", "text": "Thanks"}]}],
        "tools": [{"name": "w", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "w"}, "stop_sequences": ["END"]})",
                      limits),
      limits, false);
  ASSERT_EQ(chat.messages.size(), 5u);
  EXPECT_EQ(chat.messages[0]["role"], "system");
  EXPECT_EQ(chat.messages[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(chat.messages[3]["role"], "tool");
  EXPECT_EQ(chat.messages[3]["tool_call_id"], "t1");
  EXPECT_EQ(chat.messages[3]["content"], "Error: sunny");
  EXPECT_EQ(chat.messages[4]["content"], "Thanks");
  EXPECT_EQ(chat.tool_choice, ToolChoice::function);
  EXPECT_EQ(chat.forced_tool, "w");
  EXPECT_EQ(chat.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(chat.gen.stop.max_tokens, 9);
  EXPECT_EQ(chat.gen.stop.stop_strings, std::vector<std::string>{"END"});
  auto param_of = [&](const char* body) {
    try {
      parse_messages_request(parse_json_body(body, limits), limits, false);
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("accepted");
  };
  const char* kMsg = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(param_of((std::string("{") + kMsg + "}").c_str()), "max_tokens");
  EXPECT_EQ(param_of((std::string(R"({"max_tokens":1,"temperature":1.5,)") + kMsg + "}").c_str()),
            "temperature");
  // thinking works for models with a thinking format (reasoning_test.cpp); it needs a budget
  EXPECT_EQ(
      param_of(
          (std::string(R"({"max_tokens":1,"thinking":{"type":"enabled"},)") + kMsg + "}").c_str()),
      "thinking.budget_tokens");
  EXPECT_EQ(
      param_of(
          (std::string(R"({"max_tokens":1,"tools":[{"type":"web_search_20250305","name":"s"}],)") +
           kMsg + "}")
              .c_str()),
      "tools[0].type");
  EXPECT_EQ(param_of(R"({"max_tokens":1,"messages":[{"role":"system","content":"x"}]})"),
            "messages[0].role");
  EXPECT_EQ(
      param_of((std::string(R"({"max_tokens":1,"output_config":{"effort":"high"},)") + kMsg + "}")
                   .c_str()),
      "output_config.effort");
}

TEST_F(ServerApp, AnthropicMessagesAndErrorShape) {
  json body = {{"model", "fake-model"},
               {"max_tokens", 8},
               {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  testing::Response r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.json();
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_TRUE(m["stop_reason"] == "end_turn" || m["stop_reason"] == "max_tokens") << m;
  EXPECT_GT(m["usage"]["input_tokens"].get<int>(), 0);
  testing::Response count = post("/v1/messages/count_tokens", body);
  ASSERT_EQ(count.status, 200) << count.body;
  EXPECT_EQ(count.json()["input_tokens"], m["usage"]["input_tokens"]);
  body.erase("max_tokens");
  testing::Response bad = post("/v1/messages", body);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["type"], "error");
  EXPECT_EQ(bad.json()["error"]["type"], "invalid_request_error");
  testing::Response unauth = call(*app, "POST", "/v1/messages", body.dump());
  EXPECT_EQ(unauth.status, 401);
  EXPECT_EQ(unauth.json()["error"]["type"], "authentication_error");
}

// What the server does with a forced tool choice and response formats before the engine runs;
// the constrained output itself is tested on the real model (tests/python/test_server_tools.py).
TEST_F(ServerApp, ForcedToolChoiceAndSchemasAreCheckedUpFront) {
  json tools = {{{"type", "function"},
                 {"function",
                  {{"name", "get_weather"},
                   {"parameters",
                    {{"type", "object"},
                     {"properties", {{"zip", {{"type", "string"}, {"pattern", "^[0-9]+$"}}}}}}}}}}};
  json messages = {{{"role", "user"}, {"content", "weather?"}}};
  testing::Response pattern =
      post("/v1/chat/completions",
           {{"messages", messages}, {"tools", tools}, {"tool_choice", "required"}});
  EXPECT_EQ(pattern.status, 400) << pattern.body;
  EXPECT_EQ(pattern.json()["error"]["param"], "tools[0].function.parameters");
  EXPECT_EQ(pattern.json()["error"]["code"], "unsupported_schema");
  EXPECT_NE(pattern.body.find("pattern"), std::string::npos) << pattern.body;

  json schema_format = {{"type", "json_schema"},
                        {"json_schema", {{"name", "n"}, {"schema", {{"minimum", 3}}}}}};
  testing::Response minimum =
      post("/v1/completions", {{"prompt", "x"}, {"response_format", schema_format}});
  EXPECT_EQ(minimum.status, 400) << minimum.body;
  EXPECT_EQ(minimum.json()["error"]["param"], "response_format.json_schema.schema");

  json plain_tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  testing::Response both =
      post("/v1/chat/completions", {{"messages", messages},
                                    {"tools", plain_tools},
                                    {"tool_choice", "required"},
                                    {"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(both.status, 400) << both.body;
  EXPECT_EQ(both.json()["error"]["param"], "response_format");

  // A model whose template teaches no tool-call format cannot have a call forced.
  std::vector<ServedModel> models;
  testing::FakeEngineOptions o;
  o.step_ms = 0;
  models.push_back(testing::make_fake_model(o));
  models.back().tool_format = ToolCallFormat::none;
  app->set_models(std::move(models));
  testing::Response refused =
      post("/v1/chat/completions",
           {{"messages", messages},
            {"tools", plain_tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json()["error"]["param"], "tool_choice");
  EXPECT_NE(refused.body.find("tool-call format"), std::string::npos) << refused.body;
}

}  // namespace
}  // namespace memra::server
