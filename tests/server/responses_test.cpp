// The OpenAI Responses API: request parsing into chat messages, the bounded store, and the
// handlers (create, stream, retrieve, input_items, delete, previous_response_id) over the fake
// engine. The real `openai` client drives it in tests/python/test_server_responses.py.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/api_error.h"
#include "server/responses_request.h"
#include "test_harness.h"

namespace memra::server {
namespace {

using json = nlohmann::json;

ResponsesRequest parse(const std::string& body) {
  RequestLimits limits;
  return parse_responses_request(parse_json_body(body, limits), limits);
}

std::string refused_param(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e.param + (e.code == "unsupported_parameter" ? " (unsupported)" : "");
  }
  return "accepted";
}

TEST(ResponsesRequests, ItemsBecomeTemplateMessages) {
  ResponsesRequest r = parse(R"({"model": "m", "instructions": "Be brief.", "input": [
      {"role": "user", "content": "Weather?"},
      {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\":\"P\"}"},
      {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "not json"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
      {"type": "message", "role": "developer",
       "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}],
    "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "w"}, "parallel_tool_calls": false,
    "max_output_tokens": 9, "temperature": 0.5, "metadata": {"k": "v"}, "store": false})");
  const ojson& m = r.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["content"], "Weather?");
  EXPECT_EQ(m[1]["role"], "assistant");
  ASSERT_EQ(m[1]["tool_calls"].size(), 2u);  // two calls of one turn stay together
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"]["city"], "P");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["tool_call_id"], "c1");
  EXPECT_EQ(m[3]["role"], "system");
  EXPECT_EQ(m[3]["content"], "a\nb");
  EXPECT_EQ(r.instructions, "Be brief.");
  ASSERT_EQ(r.input_items.size(), 5u);
  EXPECT_EQ(r.input_items[1]["type"], "function_call");
  EXPECT_EQ(r.input_items[3]["output"], "sunny");
  for (const ojson& item : r.input_items) EXPECT_TRUE(item["id"].is_string()) << item;
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "w");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::function);
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.chat.gen.stop.max_tokens, 9);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.metadata["k"], "v");

  ResponsesRequest plain = parse(R"({"input": "Hi", "text": {"format": {"type": "json_schema",
      "name": "x", "schema": {"type": "integer"}}}})");
  ASSERT_EQ(plain.chat.messages.size(), 1u);
  EXPECT_EQ(plain.chat.messages[0]["role"], "user");
  EXPECT_EQ(plain.chat.gen.response_format, ResponseFormat::json_schema);
  EXPECT_EQ(plain.chat.gen.json_schema["type"], "integer");
  EXPECT_TRUE(plain.store);
}

TEST(ResponsesRequests, RefusalsNameTheField) {
  EXPECT_EQ(refused_param(R"({})"), "input");
  EXPECT_EQ(refused_param(R"({"input": []})"), "input");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "web_search"}]})"),
            "tools[0].type (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "file_search"}]})"),
            "tools[0].type (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "background": true})"), "background (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "background": false})"), "accepted");
  EXPECT_EQ(refused_param(R"({"input": "x", "conversation": "c"})"), "conversation (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "include": ["file_search_call.results"]})"),
            "include (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "item_reference", "id": "x"}]})"),
            "input[0].type (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})"),
            "input[0].content[0].type (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "temperature": 3})"), "temperature");
  EXPECT_EQ(refused_param(R"({"input": "x", "max_output_tokens": 0})"), "max_output_tokens");
  EXPECT_EQ(refused_param(R"({"input": "x", "tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(refused_param(R"({"input": "x", "tool_choice": {"type": "file_search"}})"),
            "tool_choice.type (unsupported)");
  EXPECT_EQ(refused_param(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})"),
            "text.format.name");
  EXPECT_EQ(refused_param(R"({"input": "x", "metadata": {"k": 1}})"), "metadata");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "function_call", "call_id": "c"}]})"),
            "input[0].name");
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": {"effort": "high"}})"),
            "reasoning.effort (unsupported)");
}

TEST(ResponseStore, EvictsByCountBytesAndAge) {
  auto now = ResponseStore::Clock::time_point{};
  ResponseStore store({.max_responses = 2, .max_bytes = 4096, .max_age_s = 60},
                      [&now] { return now; });
  auto entry = [](const std::string& id, size_t pad = 0) {
    auto r = std::make_shared<StoredResponse>();
    r->id = id;
    r->response = {{"id", id}, {"pad", std::string(pad, 'x')}};
    return r;
  };
  store.put(entry("a"));
  store.put(entry("b"));
  store.put(entry("c"));  // over the count: the oldest goes
  EXPECT_EQ(store.get("a"), nullptr);
  EXPECT_NE(store.get("b"), nullptr);
  EXPECT_EQ(store.size(), 2u);
  store.put(entry("big", 5000));  // larger than the whole store: not kept
  EXPECT_EQ(store.get("big"), nullptr);
  store.put(entry("d", 3000));  // fits alone; the others go to make room
  EXPECT_NE(store.get("d"), nullptr);
  EXPECT_LE(store.bytes(), 4096u);
  EXPECT_TRUE(store.remove("d"));
  EXPECT_FALSE(store.remove("d"));
  store.put(entry("e"));
  now += std::chrono::seconds(61);
  EXPECT_EQ(store.get("e"), nullptr);  // expired
  EXPECT_EQ(store.size(), 0u);
}

class ResponsesApp : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeEngineOptions o;
    o.step_ms = 0;
    o.context_length = 512;
    std::vector<ServedModel> models;
    models.push_back(testing::make_fake_model(o));
    app = std::make_unique<App>(AppConfig{});
    app->set_models(std::move(models));
  }
  testing::Response post(const json& body) {
    return testing::call(*app, "POST", "/v1/responses", body.dump());
  }
  std::unique_ptr<App> app;
};

// SSE events of a Responses stream, in order.
std::vector<json> events_of(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    size_t end = body.find("\n\n", at);
    out.push_back(json::parse(body.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

TEST_F(ResponsesApp, CreateRetrieveListDelete) {
  testing::Response r = post({{"input", "Hi"}, {"temperature", 0}, {"metadata", {{"k", "v"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json resp = r.json();
  EXPECT_EQ(resp["object"], "response");
  EXPECT_EQ(resp["status"], "completed");
  EXPECT_EQ(resp["metadata"]["k"], "v");
  ASSERT_EQ(resp["output"].size(), 1u);
  EXPECT_EQ(resp["output"][0]["type"], "message");
  const std::string text = resp["output"][0]["content"][0]["text"];
  EXPECT_NE(text.find("Paris"), std::string::npos) << text;
  EXPECT_GT(resp["usage"]["input_tokens"].get<int>(), 0);
  const std::string id = resp["id"];
  testing::Response got = testing::call(*app, "GET", "/v1/responses/" + id, "");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json(), resp);
  testing::Response items = testing::call(*app, "GET", "/v1/responses/" + id + "/input_items", "");
  ASSERT_EQ(items.status, 200) << items.body;
  EXPECT_EQ(items.json()["data"][0]["content"][0]["text"], "Hi");
  EXPECT_EQ(items.json()["has_more"], false);
  testing::Response del = testing::call(*app, "DELETE", "/v1/responses/" + id, "");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json()["deleted"], true);
  testing::Response gone = testing::call(*app, "GET", "/v1/responses/" + id, "");
  EXPECT_EQ(gone.status, 404);
  EXPECT_TRUE(gone.json()["error"].contains("param") && gone.json()["error"].contains("code"));
  EXPECT_EQ(testing::call(*app, "DELETE", "/v1/responses/" + id, "").status, 404);
  EXPECT_EQ(testing::call(*app, "PUT", "/v1/responses/" + id, "").status, 405);

  testing::Response unstored = post({{"input", "Hi"}, {"store", false}, {"max_output_tokens", 3}});
  ASSERT_EQ(unstored.status, 200);
  EXPECT_EQ(unstored.json()["status"], "incomplete");
  EXPECT_EQ(unstored.json()["incomplete_details"]["reason"], "max_output_tokens");
  const std::string unstored_id = unstored.json()["id"];
  EXPECT_EQ(testing::call(*app, "GET", "/v1/responses/" + unstored_id, "").status, 404);
}

TEST_F(ResponsesApp, FunctionCallThenOutputThroughPreviousResponseId) {
  json tools = {{{"type", "function"}, {"name", "get_weather"}, {"parameters", json::object()}}};
  testing::Response first = post({{"input", "TOOL: weather?"}, {"tools", tools}});
  ASSERT_EQ(first.status, 200) << first.body;
  json call = first.json()["output"][0];
  ASSERT_EQ(call["type"], "function_call") << first.body;
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>())["city"], "Paris");
  json second_body = {
      {"previous_response_id", first.json()["id"]},
      {"tools", tools},
      {"input",
       {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}}}};
  testing::Response second = post(second_body);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["output"][0]["content"][0]["text"], "The tool said: sunny");
  EXPECT_EQ(second.json()["previous_response_id"], first.json()["id"]);
  second_body["previous_response_id"] = "resp_unknown";
  testing::Response missing = post(second_body);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["param"], "previous_response_id");
}

TEST_F(ResponsesApp, StreamEventsInOrder) {
  json tools = {{{"type", "function"}, {"name", "get_weather"}}};
  testing::Response text = post({{"input", "Hi"}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(text.status, 200);
  std::vector<json> ev = events_of(text.body);
  std::vector<std::string> types;
  std::string deltas;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["sequence_number"], i);
    types.push_back(ev[i]["type"]);
    if (ev[i]["type"] == "response.output_text.delta") deltas += ev[i]["delta"].get<std::string>();
  }
  ASSERT_GE(types.size(), 9u);
  EXPECT_EQ(
      std::vector<std::string>(types.begin(), types.begin() + 4),
      (std::vector<std::string>{"response.created", "response.in_progress",
                                "response.output_item.added", "response.content_part.added"}));
  EXPECT_EQ(std::vector<std::string>(types.end() - 4, types.end()),
            (std::vector<std::string>{"response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  const json& done = ev.back()["response"];
  EXPECT_EQ(done["output"][0]["content"][0]["text"], deltas);
  EXPECT_EQ(testing::call(*app, "GET", "/v1/responses/" + done["id"].get<std::string>(), "")
                .json()["output"],
            done["output"]);

  testing::Response calls = post({{"input", "TOOL: x"}, {"tools", tools}, {"stream", true}});
  std::vector<json> cev = events_of(calls.body);
  ASSERT_GE(cev.size(), 6u);
  EXPECT_EQ(cev[2]["type"], "response.output_item.added");
  EXPECT_EQ(cev[2]["item"]["type"], "function_call");
  EXPECT_EQ(cev[3]["type"], "response.function_call_arguments.delta");
  EXPECT_EQ(cev[4]["type"], "response.function_call_arguments.done");
  EXPECT_EQ(cev[5]["type"], "response.output_item.done");
  EXPECT_EQ(cev.back()["type"], "response.completed");
}

TEST_F(ResponsesApp, ErrorsHaveOpenAIShape) {
  testing::Response r = post({{"input", "x"}, {"tools", {{{"type", "web_search_preview"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "tools[0].type");
  EXPECT_EQ(r.json()["error"]["code"], "unsupported_parameter");
  testing::Response big = post({{"input", "x"}, {"max_output_tokens", 5000}});
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(big.json()["error"]["param"], "max_output_tokens");
  EXPECT_EQ(testing::call(*app, "GET", "/v1/responses/a/b", "").status, 404);
}

}  // namespace
}  // namespace memra::server
