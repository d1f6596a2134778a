// Property tests: random JSON values (seeded) are accepted byte by byte by the any-value grammar,
// compact and indented, with accepting() matching nlohmann's parser on every prefix; random
// single-byte corruptions are accepted exactly when nlohmann accepts them. Random values valid
// against a schema are accepted and values broken in one schema-relevant way are rejected.
#include <random>

#include <gtest/gtest.h>

#include "structured_test_util.h"

namespace memra::structured {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using testing::accepts;

std::string random_string(std::mt19937& rng) {
  static const char* const kPieces[] = {"a",
                                        "Z",
                                        " ",
                                        "\"",
                                        "\\",
                                        "/",
                                        "\n",
                                        "\t",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "\xC3\xA9",
                                        "\xE2\x82\xAC",
                                        "\xF0\x9F\x98\x80",
                                        "\xEF\xBF\xBF",
                                        "0",
                                        "{",
                                        "]"};
  std::string s;
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % std::size(kPieces)];
  return s;
}

json random_json(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 0 ? 8 : 6));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - (int64_t{1} << 31);
    case 3:
      return std::ldexp(static_cast<double>(rng()) / 4294967296.0 - 0.5,
                        static_cast<int>(rng() % 200) - 100);
    case 4:
    case 5:
      return random_string(rng);
    case 6: {
      json a = json::array();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) a.push_back(random_json(rng, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) o[random_string(rng)] = random_json(rng, depth - 1);
      return o;
    }
  }
}

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The grammar's whitespace layout: outside strings, each run is an optional "\n" then spaces
// and tabs, at most 16 bytes (GrammarLimits::max_whitespace_run).
bool layout_ok(const std::string& text) {
  bool in_string = false;
  size_t run = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (!is_ws(c)) {
      run = 0;
      in_string = c == '"';
      continue;
    }
    if (c == '\r' || (c == '\n' && run != 0) || ++run > 16) return false;
  }
  return true;
}

// What the any-value grammar should accept: JSON text without surrounding whitespace, laid out
// as layout_ok says. nlohmann stops reading at a NUL byte, which JSON never allows raw, and
// refuses numbers beyond double range (e.g. 1e999), which the JSON grammar allows.
bool reference_accepts(const std::string& text) {
  if (text.empty() || is_ws(text.front()) || is_ws(text.back())) return false;
  if (!layout_ok(text)) return false;
  if (text.find('\0') != std::string::npos) return false;
  try {
    const json parsed = json::parse(text);
    return !parsed.is_discarded();
  } catch (const json::out_of_range&) {
    return true;  // syntactically valid, out of double range
  } catch (const json::exception&) {
    return false;
  }
}

TEST(StructuredProperty, AnyValueAgreesWithNlohmann) {
  GrammarLimits wide;  // the default allows one whitespace byte; dump(1) indents with more
  wide.max_whitespace_run = 16;
  const auto g = testing::any_value_grammar(wide);
  std::mt19937 rng(1234);
  int corruptions_accepted = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const json value = random_json(rng, 4);
    for (const std::string& text : {value.dump(), value.dump(1)}) {
      GrammarMatcher m(g);
      for (size_t i = 0; i < text.size(); ++i) {
        ASSERT_EQ(m.accepting(), reference_accepts(text.substr(0, i))) << text.substr(0, i);
        ASSERT_TRUE(m.advance(text.substr(i, 1))) << text << " at byte " << i;
      }
      ASSERT_TRUE(m.accepting()) << text;
      for (int k = 0; k < 6; ++k) {
        std::string bad = text;
        bad[rng() % bad.size()] = static_cast<char>(rng() % 256);
        const bool expected = reference_accepts(bad);
        corruptions_accepted += expected;
        ASSERT_EQ(accepts(g, bad), expected) << json(bad).dump() << " from " << text;
      }
    }
  }
  EXPECT_GT(corruptions_accepted, 10);  // both outcomes were exercised
}

// A schema covering required/optional keys, enums with null, number|null, bounded arrays.
const json& record_schema() {
  static const json kSchema = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "integer"}}},
        {"kind", {{"enum", {"a", "b", nullptr}}}},
        {"score", {{"type", {"number", "null"}}}},
        {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 3}}},
        {"meta", {{"type", "object"}, {"additionalProperties", {{"type", "boolean"}}}}}}},
      {"required", {"id", "kind"}},
      {"additionalProperties", false}};
  return kSchema;
}

ordered_json random_record(std::mt19937& rng) {
  std::vector<std::pair<std::string, ordered_json>> fields;
  fields.emplace_back("id", static_cast<int>(rng() % 2000) - 1000);
  const ordered_json kinds[] = {"a", "b", nullptr};
  fields.emplace_back("kind", kinds[rng() % 3]);
  if (rng() % 2)
    fields.emplace_back("score",
                        rng() % 3 == 0 ? ordered_json(nullptr) : ordered_json(rng() % 100 / 7.0));
  if (rng() % 2) {
    ordered_json tags = ordered_json::array();
    for (uint32_t i = rng() % 4; i > 0; --i) tags.push_back(random_string(rng));
    fields.emplace_back("tags", tags);
  }
  if (rng() % 2) fields.emplace_back("meta", ordered_json{{random_string(rng), true}});
  std::shuffle(fields.begin(), fields.end(), rng);
  ordered_json record = ordered_json::object();
  for (auto& [k, v] : fields) record[k] = v;
  return record;
}

TEST(StructuredProperty, SchemaValidAcceptedInvalidRejected) {
  GrammarLimits wide;  // dump(2) indents
  wide.max_whitespace_run = 16;
  const auto g = testing::schema_grammar(record_schema(), wide);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 200; ++iter) {
    ordered_json record = random_record(rng);
    ASSERT_TRUE(accepts(g, record.dump())) << record.dump();
    ASSERT_TRUE(accepts(g, record.dump(2))) << record.dump(2);
    ordered_json bad = record;
    switch (iter % 6) {
      case 0:
        bad.erase("id");
        break;
      case 1:
        bad["extra"] = 1;
        break;
      case 2:
        bad["id"] = "7";
        break;
      case 3:
        bad["kind"] = "c";
        break;
      case 4:
        bad["tags"] = {"w", "x", "y", "z"};
        break;
      default:
        bad["meta"] = {{"k", 1}};
        break;
    }
    ASSERT_FALSE(accepts(g, bad.dump())) << bad.dump();
  }
}

}  // namespace
}  // namespace memra::structured
