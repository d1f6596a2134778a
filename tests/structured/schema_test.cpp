// JSON schema compilation: supported keywords shape the grammar; every other keyword is refused
// by name and path (ErrorCode::unsupported); malformed schemas are refused as invalid_argument.
#include <gtest/gtest.h>

#include "structured_test_util.h"

namespace memra::structured {
namespace {

using nlohmann::json;
using testing::accepts;
using testing::schema_grammar;
using testing::viable;

// The compile error for `schema`: its code, and that its message mentions every `needle`.
void expect_refused(const json& schema, ErrorCode code, std::initializer_list<const char*> needles,
                    GrammarLimits limits = {}) {
  try {
    schema_grammar(schema, limits);
    ADD_FAILURE() << "accepted: " << schema.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

TEST(StructuredSchema, UnsupportedKeywordsAreRefusedByName) {
  for (const char* keyword : {"pattern",
                              "format",
                              "minLength",
                              "maxLength",
                              "minimum",
                              "maximum",
                              "exclusiveMinimum",
                              "exclusiveMaximum",
                              "multipleOf",
                              "allOf",
                              "not",
                              "if",
                              "then",
                              "else",
                              "prefixItems",
                              "uniqueItems",
                              "patternProperties",
                              "propertyNames",
                              "minProperties",
                              "maxProperties",
                              "dependentRequired",
                              "dependentSchemas",
                              "contains",
                              "unevaluatedProperties",
                              "contentEncoding",
                              "$anchor",
                              "$dynamicRef"}) {
    const json schema = {{"type", "object"},
                         {"properties", {{"zip", {{"type", "string"}, {keyword, 1}}}}}};
    expect_refused(schema, ErrorCode::unsupported, {keyword, "properties.zip", "not supported"});
  }
  expect_refused(json{{"type", "array"}, {"items", {{"type", "string"}, {"format", "date"}}}},
                 ErrorCode::unsupported, {"'format'", "items"});
  expect_refused(json{{"anyOf", {{{"type", "string"}, {"pattern", "x"}}}}}, ErrorCode::unsupported,
                 {"'pattern'", "anyOf[0]"});
  expect_refused(json{{"minimum", 3}}, ErrorCode::unsupported, {"'minimum'", "the top level"});
}

TEST(StructuredSchema, UnenforceableCombinationsAreRefused) {
  // Alternatives that start with the same byte would need lookahead.
  expect_refused(json{{"anyOf", {{{"type", "string"}}, {{"enum", {"a"}}}}}}, ErrorCode::unsupported,
                 {"same byte"});
  expect_refused(json{{"oneOf", {{{"type", "object"}}, {{"type", "object"}}}}},
                 ErrorCode::unsupported, {"oneOf"});
  expect_refused(json{{"type", "object"}, {"required", {"a"}}}, ErrorCode::unsupported,
                 {"'a'", "not declared"});
  expect_refused(json{{"type", "array"}, {"items", {{{"type", "string"}}}}}, ErrorCode::unsupported,
                 {"tuple"});
  expect_refused(json{{"$ref", "https://example.com/s.json"}}, ErrorCode::unsupported,
                 {"only local"});
  expect_refused(json{{"$ref", "#/$defs/a"}, {"type", "string"}, {"$defs", {{"a", true}}}},
                 ErrorCode::unsupported, {"'type'", "$ref"});
  expect_refused(json{{"enum", {1}}, {"properties", json::object()}}, ErrorCode::unsupported,
                 {"'properties'", "enum"});
}

TEST(StructuredSchema, MalformedSchemasAreInvalid) {
  const ErrorCode bad = ErrorCode::invalid_argument;
  expect_refused(json{{"type", "object"}, {"properties", json::array()}}, bad, {"properties"});
  expect_refused(json{{"type", "object"}, {"properties", {{"a", true}}}, {"required", "a"}}, bad,
                 {"required"});
  expect_refused(json{{"type", "object"}, {"properties", {{"a", true}}}, {"required", {1}}}, bad,
                 {"required"});
  expect_refused(json{{"type", "strin"}}, bad, {"strin"});
  expect_refused(json{{"type", {"string", "any"}}}, bad, {"'any'"});
  expect_refused(json{{"type", "object"}, {"properties", {{std::string(5000, 'k'), true}}}}, bad,
                 {"longer than"});
  expect_refused(json{{"type", json::array()}}, bad, {"type"});
  expect_refused(json{{"$ref", "#/$defs/missing"}}, bad, {"#/$defs/missing", "does not resolve"});
  expect_refused(json{{"type", "object"},
                      {"properties", {{"a", true}}},
                      {"required", {"b"}},
                      {"additionalProperties", false}},
                 bad, {"'b'"});
  expect_refused(json{{"type", "array"}, {"minItems", 3}, {"maxItems", 2}}, bad, {"minItems"});
  expect_refused(json{{"type", "array"}, {"minItems", -1}}, bad, {"minItems"});
  expect_refused(json{{"type", "array"}, {"minItems", 1.5}}, bad, {"minItems"});
  expect_refused(json{{"enum", json::array()}}, bad, {"enum"});
  expect_refused(json{{"type", "string"}, {"enum", {1, 2}}}, bad, {"matches its type"});
  expect_refused(json(false), bad, {"false"});
  expect_refused(json{{"type", "object"}, {"properties", {{"a", false}}}}, bad, {"properties.a"});
  expect_refused(json(3), bad, {"must be an object"});
  expect_refused(json{{"nullable", "yes"}}, bad, {"nullable"});
  expect_refused(json{{"type", "object"}, {"additionalProperties", 1}}, bad,
                 {"additionalProperties"});
  expect_refused(json{{"$ref", "#/$defs/a"},
                      {"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}}}},
                 bad, {"cycle"});
  expect_refused(
      json{{"$ref", "#/$defs/a"},
           {"$defs", {{"a", {{"anyOf", {{{"$ref", "#/$defs/a"}}, {{"type", "null"}}}}}}}}},
      bad, {"refers back"});
  json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"anyOf", {deep}}};
  expect_refused(deep, bad, {"nested"});
}

TEST(StructuredSchema, LimitsAreEnforced) {
  GrammarLimits limits;
  limits.max_nodes = 5;
  json props = json::object();
  for (int i = 0; i < 10; ++i) props[fmt::format("p{}", i)] = {{"type", "string"}};
  expect_refused(json{{"type", "object"}, {"properties", props}}, ErrorCode::invalid_argument,
                 {"nodes"}, limits);
  limits = {};
  limits.max_choices = 3;
  expect_refused(json{{"enum", {1, 2, 3, 4}}}, ErrorCode::invalid_argument, {"limit is 3"}, limits);
  expect_refused(json{{"type", "object"}, {"properties", props}}, ErrorCode::invalid_argument,
                 {"limit is 3"}, limits);
  json branches = json::array();
  for (int i = 0; i < 5; ++i) branches.push_back({{"type", "integer"}});
  expect_refused(json{{"anyOf", branches}}, ErrorCode::invalid_argument, {"alternatives"}, limits);
  json many = json::object();
  for (int i = 0; i < 65; ++i) many[fmt::format("p{}", i)] = true;
  limits.max_choices = 1000;
  expect_refused(json{{"properties", many}}, ErrorCode::invalid_argument, {"limit is 64"}, limits);
}

TEST(StructuredSchema, TypesUnionsAndNullable) {
  const auto g = schema_grammar(json{{"type", {"integer", "number", "null", "string"}}});
  EXPECT_TRUE(accepts(g, "1.5"));
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, "\"s\""));
  EXPECT_FALSE(viable(g, "t"));
  const auto n = schema_grammar(json{{"type", "string"}, {"nullable", true}});
  EXPECT_TRUE(accepts(n, "null"));
  EXPECT_TRUE(accepts(n, "\"x\""));
  EXPECT_TRUE(
      accepts(schema_grammar(json{{"type", {"string", "null"}}, {"nullable", true}}), "null"));
  const auto a = schema_grammar(json{{"anyOf",
                                      {{{"type", "integer"}},
                                       {{"type", "number"}},
                                       {{"type", "boolean"}},
                                       {{"type", "array"}, {"maxItems", 1}}}}});
  EXPECT_TRUE(accepts(a, "2.5"));
  EXPECT_TRUE(accepts(a, "true"));
  EXPECT_TRUE(accepts(a, "[3]"));
  EXPECT_FALSE(viable(a, "[3,"));
  EXPECT_TRUE(accepts(schema_grammar(json::object()), "{\"any\":[1,{}]}"));
  EXPECT_TRUE(accepts(schema_grammar(json(true)), "\"x\""));
  // An integer-typed enum keeps whole floats of any size (no UB converting 1e300) and drops 2.5.
  const auto big = schema_grammar(json{{"type", "integer"}, {"enum", {1e300, 2.5}}});
  EXPECT_TRUE(accepts(big, json(1e300).dump()));
  EXPECT_FALSE(viable(big, "2.5"));
  // Annotations are ignored.
  EXPECT_TRUE(accepts(schema_grammar(json{{"type", "integer"},
                                          {"title", "t"},
                                          {"description", "d"},
                                          {"default", 1},
                                          {"examples", {1}},
                                          {"$schema", "x"},
                                          {"$comment", "c"}}),
                      "7"));
}

TEST(StructuredSchema, RecursiveRefs) {
  const json tree = {
      {"$ref", "#/$defs/node"},
      {"$defs",
       {{"node",
         {{"type", "object"},
          {"properties",
           {{"value", {{"type", "integer"}}},
            {"children", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}},
            {"parent", {{"anyOf", {{{"$ref", "#/$defs/node"}}, {{"type", "null"}}}}}}}},
          {"required", {"value"}},
          {"additionalProperties", false}}}}}};
  const auto g = schema_grammar(tree);
  EXPECT_TRUE(accepts(g, R"({"value":1,"children":[{"value":2,"children":[]}],"parent":null})"));
  EXPECT_TRUE(accepts(g, R"({"parent":{"value":0},"value":1})"));
  EXPECT_FALSE(viable(g, R"({"value":1,"children":[{"children":[]}])"));
  // Recursion to the document root, and the older "definitions".
  EXPECT_TRUE(
      accepts(schema_grammar(json{{"type", "array"}, {"items", {{"$ref", "#"}}}}), "[[],[[]]]"));
  EXPECT_TRUE(accepts(schema_grammar(json{{"$ref", "#/definitions/s"},
                                          {"definitions", {{"s", {{"type", "string"}}}}}}),
                      "\"d\""));
  // Depth still bounds what recursion lets a model write.
  GrammarLimits limits;
  limits.max_depth = 2;
  const auto shallow = schema_grammar(json{{"type", "array"}, {"items", {{"$ref", "#"}}}}, limits);
  EXPECT_TRUE(accepts(shallow, "[[]]"));
  EXPECT_FALSE(viable(shallow, "[[["));
}

TEST(StructuredSchema, DeclaredPropertiesOnly) {
  // With declared properties and additionalProperties absent, only declared keys are written.
  const auto g = schema_grammar(json{{"properties", {{"a", {{"type", "integer"}}}}}});
  EXPECT_TRUE(accepts(g, "{\"a\":1}"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(viable(g, "{\"b"));
  const auto keys = schema_grammar(
      json{{"type", "object"}, {"properties", {{"caf\xC3\xA9", true}, {"tab\t", true}}}});
  EXPECT_TRUE(accepts(keys, "{\"caf\xC3\xA9\":1,\"tab\\t\":2}"));
}

}  // namespace
}  // namespace memra::structured
