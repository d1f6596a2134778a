// Token masks: for a small synthetic vocabulary (single bytes, multi-byte tokens, duplicates,
// tokens spanning structure, a special token, an empty token), the trie-scan mask equals brute
// force (copy the matcher, advance by each token's bytes) at every step of seeded random
// generations, for several grammars; EOS is allowed exactly when the grammar accepts.
#include <random>

#include <gtest/gtest.h>

#include "structured/token_constraint.h"
#include "structured_test_util.h"

namespace memra::structured {
namespace {

using nlohmann::json;

struct Vocab {
  std::vector<std::string> bytes;
  std::vector<bool> usable;
  int32_t eos = -1;
};

Vocab synthetic_vocab() {
  Vocab v;
  auto add = [&v](std::string s, bool usable = true) {
    v.bytes.push_back(std::move(s));
    v.usable.push_back(usable);
  };
  for (int c = 0x20; c < 0x7f; ++c) add(std::string(1, static_cast<char>(c)));
  for (int c : {0x0a, 0x09, 0x01, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xff, 0x80}) {
    add(std::string(1, static_cast<char>(c)));
  }
  for (const char* s : {"{\"",
                        "\":",
                        "\": \"",
                        "\": ",
                        "true",
                        "false",
                        "null",
                        "\"}",
                        "}",
                        "\",\"",
                        "\", \"",
                        "name",
                        "\"name\": \"",
                        "arguments",
                        "weather",
                        "\"weather\"",
                        "city",
                        "\"city\":\"",
                        "\\u00e9",
                        "\\ud83d",
                        "\\ude00",
                        "\xC3\xA9",
                        "\xE2\x82",
                        "123",
                        "1.5",
                        "-",
                        "e+",
                        "  ",
                        "\n  ",
                        "\"\"",
                        "[]",
                        "{}",
                        "],",
                        "}]",
                        "[{",
                        ", ",
                        "\\\"",
                        "\\n",
                        "\"a\"",
                        "ab",
                        "abc",
                        "tags",
                        "\"tags\":[",
                        "kind",
                        "\"kind\":",
                        "{\"name\": \"weather\", \"arguments\": ",
                        "{\"name\": \"time\", \"arguments\": ",
                        "<tool_call>",
                        "</tool_call>"}) {
    add(s);
  }
  add("{");           // a duplicate of the single-byte token
  add("\"");          // another duplicate
  add("", true);      // empty: never allowed
  add("{\"", false);  // special token whose text looks like JSON: never allowed
  v.eos = static_cast<int32_t>(v.bytes.size());
  add("</s>", false);
  return v;
}

// Brute force: a token is allowed when the matcher accepts all its bytes (EOS: when accepting).
std::vector<bool> brute_force(const GrammarMatcher& m, const Vocab& v) {
  std::vector<bool> allowed(v.bytes.size(), false);
  for (size_t id = 0; id < v.bytes.size(); ++id) {
    if (static_cast<int32_t>(id) == v.eos) {
      allowed[id] = m.accepting();
    } else if (v.usable[id] && !v.bytes[id].empty()) {
      GrammarMatcher copy = m;
      allowed[id] = copy.advance(v.bytes[id]);
    }
  }
  return allowed;
}

// Random generations checked against brute force at every step; returns how many finished.
int check_generations(const std::shared_ptr<const Grammar>& g, const Vocab& v, uint32_t seed,
                      int runs) {
  auto vocab = std::make_shared<TokenVocabulary>(v.bytes, v.usable, std::vector<int32_t>{v.eos});
  std::mt19937 rng(seed);
  int finished = 0;
  for (int run = 0; run < runs; ++run) {
    TokenConstraint constraint(g, vocab);
    GrammarMatcher shadow(g);
    std::string text;
    for (int step = 0; step < 120; ++step) {
      const TokenMask& mask = constraint.allowed();
      const std::vector<bool> expected = brute_force(shadow, v);
      std::vector<int32_t> choices;
      for (size_t id = 0; id < v.bytes.size(); ++id) {
        const bool got = mask.allows(static_cast<int32_t>(id));
        EXPECT_EQ(got, expected[id])
            << "token " << id << " '" << v.bytes[id] << "' after '" << text << "'";
        if (got) choices.push_back(static_cast<int32_t>(id));
      }
      if (::testing::Test::HasFailure()) return finished;
      EXPECT_FALSE(choices.empty()) << "dead end after '" << text << "'";
      if (choices.empty()) return finished;
      // Prefer ending once the grammar accepts, so most runs complete.
      int32_t pick = choices[rng() % choices.size()];
      if (mask.allows(v.eos) && rng() % 3 == 0) pick = v.eos;
      constraint.accept(pick);
      if (pick == v.eos) {
        EXPECT_TRUE(constraint.finished());
        ++finished;
        break;
      }
      EXPECT_TRUE(shadow.advance(v.bytes[static_cast<size_t>(pick)]));
      text += v.bytes[static_cast<size_t>(pick)];
      EXPECT_EQ(constraint.finished(), shadow.finished()) << text;
    }
  }
  return finished;
}

TEST(StructuredTokenMask, JsonObjectMatchesBruteForce) {
  GrammarBuilder b;
  const auto g = b.build(b.any_json_object());
  EXPECT_GT(check_generations(g, synthetic_vocab(), 7, 12), 0);
}

TEST(StructuredTokenMask, SchemaMatchesBruteForce) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"kind", {{"enum", {"a", "ab", 12, 123}}}},
        {"name", {{"type", "string"}}},
        {"tags",
         {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}, {"maxItems", 2}}}}},
      {"required", {"kind", "tags"}},
      {"additionalProperties", false}};
  EXPECT_GT(check_generations(testing::schema_grammar(schema), synthetic_vocab(), 11, 12), 0);
}

TEST(StructuredTokenMask, ToolCallGrammarMatchesBruteForce) {
  GrammarBuilder b;
  const auto weather = b.json_schema(json{{"type", "object"},
                                          {"properties", {{"city", {{"type", "string"}}}}},
                                          {"required", {"city"}},
                                          {"additionalProperties", false}});
  const auto call = b.sequence(
      {b.keyed_choice({{"{\"name\": \"weather\", \"arguments\": ", weather},
                       {"{\"name\": \"time\", \"arguments\": ", b.json_schema(json::object())}}),
       b.literal("}")});
  const auto g = b.build(
      b.sequence({b.literal("<tool_call>"), b.repeat(call, ",", 1, 2), b.literal("</tool_call>")}));
  EXPECT_GT(check_generations(g, synthetic_vocab(), 5, 12), 0);
}

TEST(StructuredTokenMask, EosAndMisuse) {
  const Vocab v = synthetic_vocab();
  auto vocab = std::make_shared<TokenVocabulary>(v.bytes, v.usable, std::vector<int32_t>{v.eos});
  EXPECT_EQ(vocab->n_vocab(), static_cast<int32_t>(v.bytes.size()));
  TokenConstraint c(testing::schema_grammar(json{{"type", "integer"}}), vocab);
  EXPECT_FALSE(c.allowed().allows(v.eos));
  EXPECT_THROW(c.accept(v.eos), Error);       // not complete yet
  EXPECT_THROW(c.accept('a' - 0x20), Error);  // token "a" is not an integer
  EXPECT_THROW(c.accept(-1), Error);
  c.accept('7' - 0x20);
  EXPECT_TRUE(c.allowed().allows(v.eos));
  EXPECT_FALSE(c.finished());  // more digits may follow
  c.accept(v.eos);
  EXPECT_TRUE(c.finished());
  for (uint64_t w : c.allowed().words) EXPECT_EQ(w, 0u);
  EXPECT_THROW(c.accept('7' - 0x20), Error);
}

}  // namespace
}  // namespace memra::structured
