// GrammarMatcher: accepted and rejected texts per feature (builder primitives, JSON strings,
// numbers, whitespace, depth, objects, arrays, enums), and accepting()/finished() along the way.
#include <gtest/gtest.h>

#include "structured_test_util.h"

namespace memra::structured {
namespace {

using nlohmann::json;
using testing::accepts;
using testing::any_value_grammar;
using testing::schema_grammar;
using testing::viable;

// accepting() and finished() after each prefix of `text` (all bytes must be accepted).
void expect_states(const std::shared_ptr<const Grammar>& g, const std::string& text,
                   const std::string& accepting_at, const std::string& finished_at) {
  ASSERT_EQ(accepting_at.size(), text.size() + 1);
  GrammarMatcher m(g);
  for (size_t i = 0; i <= text.size(); ++i) {
    EXPECT_EQ(m.accepting(), accepting_at[i] == '1') << "after '" << text.substr(0, i) << "'";
    EXPECT_EQ(m.finished(), finished_at[i] == '1') << "after '" << text.substr(0, i) << "'";
    if (i < text.size()) {
      ASSERT_TRUE(m.advance(text.substr(i, 1))) << text.substr(0, i + 1);
    }
  }
}

TEST(StructuredMatcher, LiteralSequenceChoiceRepeat) {
  GrammarBuilder b;
  const auto args = b.json_schema(json{{"type", "object"},
                                       {"properties", {{"city", {{"type", "string"}}}}},
                                       {"required", {"city"}}});
  const auto call =
      b.sequence({b.keyed_choice({{"{\"name\":\"weather\",\"arguments\":", args},
                                  {"{\"name\":\"time\",\"arguments\":", b.any_json_object()}}),
                  b.literal("}")});
  const auto g = b.build(b.sequence({b.literal("<tool>"), b.repeat(call, ",", 1, 2)}));
  const std::string one = R"(<tool>{"name":"weather","arguments":{"city":"Oslo"}})";
  EXPECT_TRUE(accepts(g, one));
  EXPECT_TRUE(accepts(g, one + R"(,{"name":"time","arguments":{}})"));
  EXPECT_FALSE(viable(g, one + R"(,{"name":"time","arguments":{}},)"));  // max 2
  EXPECT_FALSE(viable(g, R"(<tool>{"name":"weath")"
                         "x"));
  EXPECT_FALSE(viable(g, R"(<tool>{"name":"weather","arguments":{"town")"));
  EXPECT_FALSE(accepts(g, R"(<tool>{"name":"weather","arguments":{}})"));  // city required
  EXPECT_FALSE(viable(g, "<tool> "));
  EXPECT_FALSE(accepts(g, "<tool>"));
  // Accepting once a call is complete; finished only after the second (max) call.
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance(one));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.finished());
  ASSERT_TRUE(m.advance(R"(,{"name":"time","arguments":{"a":[1]}})"));
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.advance(","));
}

TEST(StructuredMatcher, StatesAlongTheWay) {
  GrammarBuilder b;
  const auto g =
      b.build(b.sequence({b.literal("ab"), b.keyed_choice({{"x", b.kEnd}, {"yz", b.kEnd}})}));
  expect_states(g, "abyz", "00001", "00001");
  expect_states(g, "abx", "0001", "0001");
  GrammarBuilder r;
  const auto rg = r.build(r.repeat(r.literal("a"), "", 1, 3));
  expect_states(rg, "aaa", "0111", "0001");
  expect_states(schema_grammar(json{{"type", "integer"}}), "-12", "0011", "0000");
  expect_states(schema_grammar(json{{"type", "object"}}), "{}", "001", "001");
  expect_states(schema_grammar(json{{"enum", {1, 12}}}), "12", "011", "001");
}

TEST(StructuredMatcher, BuilderRefusesBadPrimitives) {
  GrammarBuilder b;
  EXPECT_THROW(b.literal(""), Error);
  EXPECT_THROW(b.sequence({}), Error);
  EXPECT_THROW(b.keyed_choice({{"ab", b.kEnd}, {"abc", b.kEnd}}), Error);
  EXPECT_THROW(b.keyed_choice({{"", b.kEnd}}), Error);
  EXPECT_THROW(b.repeat(b.literal("a"), ",", 0, 2), Error);
  EXPECT_THROW(b.repeat(b.literal("a"), ",", 3, 2), Error);
  EXPECT_THROW(b.sequence({12345}), Error);
  GrammarLimits small;
  small.max_choices = 2;
  GrammarBuilder c(small);
  EXPECT_THROW(c.keyed_choice({{"a", c.kEnd}, {"b", c.kEnd}, {"c", c.kEnd}}), Error);
}

TEST(StructuredMatcher, BuilderSurvivesARefusedSchema) {
  GrammarBuilder b;
  EXPECT_THROW(b.json_schema(json{{"$ref", "#/$defs/a"},
                                  {"$defs", {{"a", {{"type", "string"}, {"pattern", "x"}}}}}}),
               Error);
  const auto g = b.build(b.sequence({b.literal("ok:"), b.json_schema(json{{"type", "null"}})}));
  EXPECT_TRUE(accepts(g, "ok:null"));
}

TEST(StructuredMatcher, AnyValue) {
  const auto g = any_value_grammar();
  for (const char* ok :
       {"0", "-0", "1.5e+10", "12", "-12.50E3", "true", "false", "null", "\"\"", "[]", "{}",
        "[1,\"a\",{\"b\":[null]}]", "{ \"a\" : 1 , \"a\" : 2 }", "[\t1,\n2 ]"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad :
       {"01",  "-",    "1.",   ".5",      "1e",       "+1",  "1.e5",       "tru",
        "nul", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{,}", "{\"a\":1,}", "[1 2]",
        " 1",  "1 ",   "\"a",  "{'a':1}", "[1]]",     "{} ", "NaN",        "Infinity"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
}

TEST(StructuredMatcher, StringsEscapesAndUtf8) {
  const auto g = schema_grammar(json{{"type", "string"}});
  for (const char* ok :
       {"\"\"", "\"a b\"", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9\u0000\uFFFF")", R"("\uD83D\uDE00")",
        "\"\xC3\xA9\"", "\"\xE2\x82\xAC\"", "\"\xF0\x9F\x98\x80\"", "\"\xF4\x8F\xBF\xBF\"",
        "\"\xEF\xBF\xBF\"", "\"\x7F\""}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad : {"\"\xC0\x80\"",
                          "\"\xC1\xBF\"",
                          "\"\xE0\x80\x80\"",
                          "\"\xE0\x9F\xBF\"",
                          "\"\xED\xA0\x80\"",
                          "\"\xF0\x80\x80\x80\"",
                          "\"\xF4\x90\x80\x80\"",
                          "\"\xF5\x80\x80\x80\"",
                          "\"\xFF\"",
                          "\"\x80\"",
                          "\"\xC3\"",
                          "\"\xC3x\"",
                          "\"\n\"",
                          "\"\x01\"",
                          R"("\x")",
                          R"("\u12")",
                          R"("\u12G4")",
                          R"("\uDE00")",
                          R"("\uD83D")",
                          R"("\uD83Dx")",
                          R"("\uD83D\u0041")",
                          R"("\'")"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  // A \u unit that can only become a lone low surrogate is refused at its second digit, so the
  // matcher never reaches a state with no continuation.
  EXPECT_TRUE(viable(g, R"("\uD)"));
  EXPECT_FALSE(viable(g, R"("\uDC)"));
  EXPECT_TRUE(viable(g, R"("\uD800\uD)"));
  EXPECT_FALSE(viable(g, R"("\uD800\uDB)"));
  EXPECT_FALSE(viable(g, R"("\uD800\u0)"));
}

TEST(StructuredMatcher, NumbersAndLengthCap) {
  GrammarLimits limits;
  limits.max_number_bytes = 4;
  const auto n = schema_grammar(json{{"type", "number"}}, limits);
  EXPECT_TRUE(accepts(n, "1234"));
  EXPECT_FALSE(viable(n, "12345"));
  EXPECT_TRUE(accepts(n, "-1.5"));
  EXPECT_TRUE(viable(n, "-12"));
  EXPECT_FALSE(viable(n, "-12."));  // would need a fifth byte
  EXPECT_TRUE(accepts(n, "1e+5"));
  EXPECT_FALSE(viable(n, "12e+"));  // ditto
  const auto i = schema_grammar(json{{"type", "integer"}});
  EXPECT_TRUE(accepts(i, "-907"));
  EXPECT_FALSE(viable(i, "1.0"));
  EXPECT_FALSE(viable(i, "1e5"));
  EXPECT_FALSE(viable(i, "00"));
  // Inside a container a number ends at the byte it cannot take.
  const auto a = schema_grammar(json{{"type", "array"}, {"items", {{"type", "integer"}}}});
  EXPECT_TRUE(accepts(a, "[0,-1,20 ]"));
  EXPECT_FALSE(accepts(a, "[1.5]"));
}

TEST(StructuredMatcher, WhitespaceRunIsCapped) {
  // The default: one whitespace byte between tokens.
  const auto compact = any_value_grammar();
  EXPECT_TRUE(accepts(compact, "{\"a\": 1, \"b\": [2, 3]}"));
  EXPECT_TRUE(accepts(compact, "{\n\"a\":\t1\n}"));
  EXPECT_FALSE(viable(compact, "{  "));
  EXPECT_FALSE(viable(compact, "[\n "));
  GrammarLimits wide_limits;
  wide_limits.max_whitespace_run = 16;
  const auto g = any_value_grammar(wide_limits);
  EXPECT_TRUE(accepts(g, "{" + std::string(16, ' ') + "}"));
  EXPECT_FALSE(viable(g, "{" + std::string(17, ' ')));
  EXPECT_TRUE(accepts(g, "[\n" + std::string(15, ' ') + "1\n" + std::string(15, '\t') + "]"));
  // One line break per run, first: pretty-printed layouts pass, blank lines and \r do not.
  EXPECT_TRUE(accepts(g, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
  EXPECT_FALSE(viable(g, "[\n\n"));
  EXPECT_FALSE(viable(g, "[ \n"));
  EXPECT_FALSE(viable(g, "[\r"));
  EXPECT_TRUE(accepts(g, "{\"a\"" + std::string(16, ' ') + ":" + std::string(16, ' ') + "1}"));
  EXPECT_FALSE(viable(g, "{\"a\"" + std::string(17, ' ')));
  EXPECT_FALSE(viable(g, " "));
  EXPECT_FALSE(viable(g, "{} "));
  EXPECT_FALSE(viable(g, "{\" a\":1}x"));
  EXPECT_FALSE(viable(g, "[\v1]"));
}

TEST(StructuredMatcher, DepthLimit) {
  GrammarLimits limits;
  limits.max_depth = 3;
  const auto g = any_value_grammar(limits);
  EXPECT_TRUE(accepts(g, "[[[1]]]"));
  EXPECT_TRUE(accepts(g, "{\"a\":[{}]}"));
  EXPECT_FALSE(viable(g, "[[[["));
  EXPECT_FALSE(viable(g, "{\"a\":[{\"b\":{"));
  EXPECT_TRUE(accepts(g, "[[[\"[[[[\"]]]"));  // brackets inside strings are not nesting
}

TEST(StructuredMatcher, EnumPrefixCandidates) {
  const auto e = schema_grammar(json{{"enum", {1, 12, "a", json::array({1, 2}), nullptr}}});
  EXPECT_TRUE(accepts(e, "1"));
  EXPECT_TRUE(accepts(e, "12"));
  EXPECT_TRUE(accepts(e, "\"a\""));
  EXPECT_TRUE(accepts(e, "[1,2]"));
  EXPECT_TRUE(accepts(e, "null"));
  EXPECT_FALSE(viable(e, "123"));
  EXPECT_FALSE(viable(e, "[1, 2]"));  // enum values are written compactly
  EXPECT_FALSE(viable(e, "\"b"));
  const auto o = schema_grammar(json{{"type", "object"},
                                     {"properties", {{"x", {{"enum", {1, 12}}}}}},
                                     {"additionalProperties", false}});
  EXPECT_TRUE(accepts(o, "{\"x\":1}"));
  EXPECT_TRUE(accepts(o, "{\"x\":12 }"));
  EXPECT_FALSE(viable(o, "{\"x\":13"));
  EXPECT_TRUE(accepts(schema_grammar(json{{"const", "hi"}}), "\"hi\""));
  EXPECT_TRUE(accepts(schema_grammar(json{{"type", "boolean"}}), "false"));
}

TEST(StructuredMatcher, ObjectKeysRequiredAndCommas) {
  const auto g = schema_grammar(json{
      {"type", "object"},
      {"properties",
       {{"a", {{"type", "integer"}}}, {"ab", {{"type", "string"}}}, {"q\"k", {{"type", "null"}}}}},
      {"required", {"ab"}}});
  EXPECT_TRUE(accepts(g, R"({"ab":"x"})"));
  EXPECT_TRUE(accepts(g, R"({ "a" : 1 , "ab" : "" , "q\"k" : null })"));
  EXPECT_TRUE(accepts(g, R"({"q\"k":null,"ab":"","a":2})"));
  EXPECT_FALSE(viable(g, R"({"ab":"x","ab")"));               // each key once
  EXPECT_FALSE(viable(g, R"({"a":1})"));                      // '}' before the required key
  EXPECT_FALSE(viable(g, R"({"a":1,"ab":"","q\"k":null,)"));  // no key left for a comma
  EXPECT_FALSE(viable(g, R"({"abc)"));
  EXPECT_FALSE(viable(g, R"({"b)"));
  EXPECT_FALSE(viable(g, R"({"a":"s")"));
  EXPECT_FALSE(viable(g, R"({})"));
  const auto closed = schema_grammar(json{{"type", "object"}, {"additionalProperties", false}});
  EXPECT_TRUE(accepts(closed, "{ }"));
  EXPECT_FALSE(viable(closed, "{\""));
  const auto free =
      schema_grammar(json{{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}});
  EXPECT_TRUE(accepts(free, R"({"x":1,"y\u00e9":2})"));
  EXPECT_FALSE(viable(free, R"({"x":"1")"));
}

TEST(StructuredMatcher, ArrayBounds) {
  const auto g = schema_grammar(
      json{{"type", "array"}, {"items", {{"type", "boolean"}}}, {"minItems", 1}, {"maxItems", 2}});
  EXPECT_FALSE(viable(g, "[]"));
  EXPECT_TRUE(accepts(g, "[true]"));
  EXPECT_TRUE(accepts(g, "[ true , false ]"));
  EXPECT_FALSE(viable(g, "[true,false,"));
  EXPECT_FALSE(viable(g, "[1"));
  const auto empty = schema_grammar(json{{"type", "array"}, {"maxItems", 0}});
  EXPECT_TRUE(accepts(empty, "[]"));
  EXPECT_FALSE(viable(empty, "[1"));
}

TEST(StructuredMatcher, AdvanceIsAllOrNothing) {
  const auto g = any_value_grammar();
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance("[1,"));
  GrammarMatcher copy = m;
  EXPECT_FALSE(m.advance("2]]"));
  EXPECT_TRUE(m.advance("2]"));  // the failed call changed nothing
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(copy.advance("\"x\"]"));  // copies are independent
  EXPECT_TRUE(copy.accepting());
}

}  // namespace
}  // namespace memra::structured
