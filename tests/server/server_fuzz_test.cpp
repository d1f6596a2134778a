// Property/fuzz test of the request surface (runs under ASan+UBSan in CI): random and mutated
// bodies go through the full handler path (JSON parsing, validation, generation on the fake
// engine, response building). Every answer must be a well-formed response: 200 with a JSON body
// or SSE stream, or an error status with {"error":{"message":...}}; never a crash or a 500.
#include <gtest/gtest.h>

#include <random>

#include "fake_engine.h"
#include "test_harness.h"

namespace memra::server {
namespace {

using json = nlohmann::json;

const char* const kSeeds[] = {
    R"({"model":"fake-model","messages":[{"role":"system","content":"s"},{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0})",
    R"({"messages":[{"role":"user","content":[{"type":"text","text":"TOOL: x"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"max_tokens":8,"stream":true})",
    R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}],"max_tokens":3,"n":2,"seed":7,"logprobs":true,"top_logprobs":2})",
    R"({"messages":[{"role":"user","content":"TOOL: w"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]},"days":{"type":["integer","null"]},"tags":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":3}},"required":["city"],"$defs":{"t":{"anyOf":[{"type":"string"},{"type":"object","additionalProperties":{"type":"number"}}]}}}}}],"max_tokens":4})",
    R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"const":[1,{"b":null}]},"b":{"type":"boolean"},"c":{"$ref":"#"}},"required":["a"],"additionalProperties":false}}},"max_tokens":4})",
    R"({"prompt":"Once upon","max_tokens":3,"stop":["a","b"],"logprobs":2,"n":2})",
    R"({"model":"fake-model","max_tokens":4,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"TOOL: w"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"w","input":{"city":"P"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}],"is_error":false}]}],"tools":[{"name":"w","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"any"},"stream":true})",
    R"({"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stop_sequences":["a"],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"thinking":{"type":"adaptive"},"metadata":{"user_id":"u"}})",
    R"({"prompt":[[1,2,3],[4,5]],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}})",
    R"({"prompt":[65,66],"max_tokens":2,"logit_bias":{"65":-100},"top_k":5,"top_p":0.5,"min_p":0.1})",
    // OpenAI Responses (/v1/responses); the last is a thinking chat (budget, template kwargs)
    R"({"model":"fake-model","input":"Hi","instructions":"i","max_output_tokens":4,"temperature":0,"metadata":{"a":"b"},"store":false,"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})",
    R"({"input":[{"role":"user","content":[{"type":"input_text","text":"TOOL: x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"},{"type":"reasoning","summary":[]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,"max_output_tokens":8,"stream":true})",
    R"({"messages":[{"role":"user","content":"THINK: x"},{"role":"assistant","content":"a"},{"role":"user","content":"THINK: y"}],"max_thinking_tokens":3,"chat_template_kwargs":{"enable_thinking":true,"k":[1]},"max_tokens":30,"stream":true,"logprobs":true})",
};

json random_value(std::mt19937& rng, int depth = 0) {
  switch (rng() % (depth > 2 ? 6 : 8)) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<bool>(rng() % 2);
    case 2:
      return static_cast<int64_t>(rng()) - (1ll << 31);
    case 3:
      return std::ldexp(static_cast<double>(rng()) / rng.max(), int(rng() % 80) - 40);
    case 4:
      return std::string(rng() % 6, static_cast<char>('a' + rng() % 26));
    case 5:
      return std::string("\xff\xfe<start_of_turn>\x01", 19);
    case 6: {
      json a = json::array();
      for (unsigned i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (unsigned i = rng() % 4; i > 0; --i)
        o[std::string(1, static_cast<char>('a' + rng() % 26))] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// Replaces a random value somewhere in the document.
void mutate_tree(json& j, std::mt19937& rng) {
  json* at = &j;
  for (int depth = 0; depth < 4; ++depth) {
    if (at->is_object() && !at->empty() && rng() % 3) {
      auto it = at->begin();
      std::advance(it, rng() % at->size());
      at = &it.value();
    } else if (at->is_array() && !at->empty() && rng() % 3) {
      at = &(*at)[rng() % at->size()];
    } else {
      break;
    }
  }
  *at = random_value(rng);
}

std::string mutate_bytes(std::string s, std::mt19937& rng) {
  for (unsigned k = 1 + rng() % 4; k > 0 && !s.empty(); --k) {
    size_t i = rng() % s.size();
    switch (rng() % 3) {
      case 0:
        s[i] = static_cast<char>(rng());
        break;
      case 1:
        s.erase(i, 1 + rng() % 8);
        break;
      default:
        s.insert(i, std::string(1 + rng() % 3, "{}[]\",:0\\"[rng() % 9]));
        break;
    }
  }
  return s;
}

// OpenAI routes answer {"error": {message, type, param, code}}; Anthropic's (/v1/messages...)
// {"type": "error", "error": {type, message}}. Streams end with their protocol's last event.
void check_response(const testing::Response& r, const std::string& body, const std::string& path) {
  ASSERT_NE(r.status, 0) << "no response for " << body;
  ASSERT_NE(r.status, 500) << r.body << " for " << body;
  const bool anthropic = path.rfind("/v1/messages", 0) == 0;
  const bool responses = path == "/v1/responses";
  if (r.status == 200) {
    if (r.head.find("text/event-stream") != std::string::npos) {
      if (responses)
        EXPECT_TRUE(r.body.find("event: response.completed") != std::string::npos ||
                    r.body.find("event: response.incomplete") != std::string::npos)
            << body;
      else
        EXPECT_NE(r.body.find(anthropic ? "event: message_stop" : "data: [DONE]"),
                  std::string::npos)
            << body;
    } else {
      json j = r.json();
      EXPECT_TRUE(j.contains("choices") || j.contains("tokens") || j.contains("prompt") ||
                  j.contains("content") || j.contains("input_tokens") || j.contains("output"))
          << r.body;
    }
    return;
  }
  json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.status << " " << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  if (anthropic) {
    EXPECT_EQ(j["type"], "error") << r.body;
    EXPECT_TRUE(j["error"]["type"].is_string()) << r.body;
  } else {
    EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code"));
  }
}

TEST(ServerFuzz, MutatedBodiesAlwaysGetWellFormedAnswers) {
  testing::FakeEngineOptions o;
  o.step_ms = 0;
  o.context_length = 64;  // keeps default max_tokens (context - prompt) short
  o.thinking = true;      // replies to THINK: hold a <think> span
  std::vector<ServedModel> models;
  models.push_back(testing::make_fake_model(o));
  App app(AppConfig{});
  app.set_models(std::move(models));
  std::mt19937 rng(1234);
  const int kIterations = 600;
  for (int i = 0; i < kIterations; ++i) {
    size_t seed = rng() % std::size(kSeeds);
    std::string path = seed <= 4 ? "/v1/chat/completions"
                       : seed == 6 || seed == 7
                           ? (rng() % 4 ? "/v1/messages" : "/v1/messages/count_tokens")
                       : seed == 10 || seed == 11 ? "/v1/responses"
                       : seed == 12               ? "/v1/chat/completions"
                                                  : "/v1/completions";
    if (rng() % 10 == 0) path = rng() % 2 ? "/tokenize" : "/detokenize";
    std::string body;
    if (rng() % 2) {
      json j = json::parse(kSeeds[seed]);
      for (unsigned k = 1 + rng() % 3; k > 0; --k) mutate_tree(j, rng);
      body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      body = mutate_bytes(kSeeds[seed], rng);
    }
    testing::Response r = testing::call(app, "POST", path, body);
    check_response(r, body, path);
    if (HasFatalFailure()) return;
  }
}

TEST(ServerFuzz, RandomBytesAndHostileShapes) {
  testing::FakeEngineOptions o;
  o.step_ms = 0;
  o.context_length = 64;
  std::vector<ServedModel> models;
  models.push_back(testing::make_fake_model(o));
  App app(AppConfig{});
  app.set_models(std::move(models));
  std::mt19937 rng(99);
  std::vector<std::string> bodies = {
      "",
      "null",
      "[]",
      "{",
      std::string(100000, '['),
      std::string(1 << 16, '"'),
      R"({"messages":[{"role":"user","content":"x"}],"n":1e308})",
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})",
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})",
      R"({"messages":[{"role":"user","content":"x"}],"seed":-5,"max_tokens":2,"temperature":1})",
      R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"99999999":1}})",
      R"({"prompt":[-1]})",
      R"({"prompt":[2147483648]})",
      R"({"prompt":[]})",
      R"({"prompt":""})",
      R"({"tokens":[1,2,999999]})",
      R"({"messages":[{"role":"tool","content":"x"}]})",
      R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":7,"function":{"name":"f"}}]},{"role":"user","content":"x"}],"max_tokens":2})"};
  for (int i = 0; i < 200; ++i) {
    std::string b(rng() % 64, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    bodies.push_back(b);
  }
  for (const std::string& body : bodies) {
    for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize",
                             "/v1/messages", "/v1/responses"}) {
      check_response(testing::call(app, "POST", path, body), body.substr(0, 80), path);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace memra::server
