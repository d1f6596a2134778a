// Robustness of the Jinja interpreter on untrusted templates: real chat templates from the
// pinned test data's chat-templates/ (tests/common/test_data.h) with random byte-level and
// token-level mutations, plus random token soup, rendered under small limits. Every outcome must
// be text or a memra::Error: no crash, no hang, no other exception (also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/missing_data.h"
#include "core/error.h"
#include "test_data.h"
#include "tokenizer/chat_template.h"

namespace memra {
namespace {

using json = nlohmann::ordered_json;

const char* const kPieces[] = {"{{",
                               "}}",
                               "{%",
                               "%}",
                               "{#",
                               "#}",
                               "-",
                               "+",
                               "{%- ",
                               " -%}",
                               "if ",
                               "elif ",
                               "else",
                               "endif",
                               "for ",
                               " in ",
                               "endfor",
                               "set ",
                               "macro ",
                               "endmacro",
                               "call",
                               "endcall",
                               "filter ",
                               "endfilter",
                               "(",
                               ")",
                               "[",
                               "]",
                               "{",
                               "}",
                               ",",
                               ":",
                               ".",
                               "|",
                               "~",
                               "*",
                               "**",
                               "/",
                               "//",
                               "%",
                               "==",
                               "!=",
                               "<",
                               ">",
                               " is ",
                               " not ",
                               " and ",
                               " or ",
                               "'s'",
                               "\"",
                               "'",
                               "\\",
                               "0",
                               "1",
                               "-1",
                               "1e308",
                               "9223372036854775807",
                               "messages",
                               "message",
                               "loop",
                               "ns",
                               "namespace(",
                               "range(",
                               "tojson",
                               "trim",
                               "length",
                               "items",
                               "join",
                               "default",
                               "selectattr",
                               "map",
                               "string",
                               "split",
                               "strip",
                               "replace",
                               "none",
                               "true",
                               "false",
                               "raise_exception",
                               "caller()",
                               "break",
                               "continue",
                               "\n",
                               " ",
                               "é",
                               "\xff",
                               "\xe6\x97",
                               "[::-1]",
                               "[1:]",
                               "'content'",
                               "defined",
                               "mapping",
                               "x"};

json sample_context() {
  return json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "abcdefghi", "type": "function",
         "function": {"name": "f", "arguments": {"a": 1, "b": [1, 2]}}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "42"},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "enable_thinking": false
  })");
}

std::vector<std::string> seed_templates() {
  std::vector<std::string> seeds = {
      "{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
      "{% macro f(x, y=1) %}{{ x ~ y }}{% endmacro %}{% set ns = namespace(a=[]) %}{{ f(2) }}",
  };
  // Sorted, so the random mutations are the same on every machine.
  std::vector<std::filesystem::path> paths;
  for (const auto& entry :
       std::filesystem::directory_iterator(test::test_data_dir() / "chat-templates"))
    if (entry.path().extension() == ".jinja") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  return seeds;
}

std::string mutate(std::string s, std::mt19937& rng) {
  auto pick = [&](size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    size_t at = pick(s.size() + 1);
    switch (pick(4)) {
      case 0:
        s.erase(at, pick(16));
        break;
      case 1:
        s.insert(at, kPieces[pick(std::size(kPieces))]);
        break;
      case 2: {
        size_t from = pick(s.size() + 1);
        s.insert(at, s.substr(from, pick(64)));
        break;
      }
      default:
        if (at < s.size()) s[at] = static_cast<char>(pick(256));
    }
  }
  return s;
}

std::string token_soup(std::mt19937& rng) {
  std::string s;
  int n = std::uniform_int_distribution<int>(1, 60)(rng);
  for (int i = 0; i < n; ++i)
    s += kPieces[std::uniform_int_distribution<size_t>(0, std::size(kPieces) - 1)(rng)];
  return s;
}

// Parses and renders; returns true when it rendered. Anything but memra::Error fails the test.
bool try_render(const std::string& source, const json& context, const TemplateLimits& limits) {
  try {
    ChatTemplate tmpl(source);
    tmpl.render(context, limits);
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-memra exception " << e.what() << " for template:\n" << source;
    return false;
  }
}

TEST(JinjaRobustness, MutatedTemplatesAndTokenSoupNeverCrash) {
  std::mt19937 rng(1234);
  const json context = sample_context();
  TemplateLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_depth = 16;
  MEMRA_REQUIRE_PINNED_TEST_DATA(data);
  std::vector<std::string> seeds = seed_templates();
  // Only the 2 inline seeds would make this test exercise almost nothing: require the corpus.
  EXPECT_GE(seeds.size(), 2u + 70) << "the 70 chat templates of the test data";
  int rendered = 0, total = 0;
  for (int round = 0; round < 8; ++round) {
    for (const std::string& seed : seeds) {
      rendered += try_render(mutate(seed, rng), context, limits);
      ++total;
    }
  }
  for (int i = 0; i < 400; ++i) {
    rendered += try_render(token_soup(rng), context, limits);
    ++total;
  }
  // Mutations must not all be rejected at parse time, or this test would exercise nothing.
  EXPECT_GT(rendered, total / 20) << rendered << " of " << total << " rendered";
}

TEST(JinjaRobustness, HostileContextsNeverCrash) {
  TemplateLimits limits;
  limits.max_steps = 100'000;
  std::string tmpl =
      "{% for m in messages %}{{ m.content | tojson }}{{ m.content[::-1] }}{{ m | length }}"
      "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | items | list }}{% endif %}"
      "{% endfor %}";
  json deep = json::array();
  for (int i = 0; i < 300; ++i) deep = json::array({deep});
  std::vector<json> contexts = {
      json::object(),
      {{"messages", nullptr}},
      {{"messages", "string"}},
      {{"messages", {1, 2, 3}}},
      {{"messages", {{{"content", deep}}}}},
      {{"messages",
        {{{"content", "x"}, {"tool_calls", {{{"function", {{"arguments", "str"}}}}}}}}}},
  };
  for (const json& c : contexts) try_render(tmpl, c, limits);
}

}  // namespace
}  // namespace memra
