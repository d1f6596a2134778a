// Token masks over the real Gemma 3 vocabulary (262,144 tokens, byte-fallback duplicates, special
// tokens): the trie-scan mask equals brute force (advance a matcher copy by every token's bytes) at
// several grammar states. Skipped when the packaged model is not on this machine.
#include <filesystem>

#include <gtest/gtest.h>

#include "../common/missing_data.h"
#include "formats/model_source.h"
#include "structured/token_constraint.h"
#include "structured_test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::structured {
namespace {

using nlohmann::json;

TEST(StructuredRealVocab, MaskEqualsBruteForceOnGemma3) {
  const std::string path = model_source_default_path();
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(path)) << "the packaged model, " << path;
  const auto tok = Tokenizer::from_source(path);
  const auto n = static_cast<size_t>(tok->n_vocab());
  std::vector<std::string> bytes(n);
  std::vector<bool> usable(n);
  for (size_t id = 0; id < n; ++id) {
    usable[id] = !tok->is_special(static_cast<int32_t>(id));
    bytes[id] = tok->token_bytes(static_cast<int32_t>(id));
  }
  const std::vector<int32_t> eos = tok->eos_ids();
  ASSERT_FALSE(eos.empty());
  auto vocab = std::make_shared<TokenVocabulary>(bytes, usable, eos);
  // A byte-fallback token per byte value drives the constraint to each prefix.
  std::vector<int32_t> byte_id(256, -1);
  for (size_t id = 0; id < n; ++id) {
    if (usable[id] && bytes[id].size() == 1 && byte_id[static_cast<uint8_t>(bytes[id][0])] < 0) {
      byte_id[static_cast<uint8_t>(bytes[id][0])] = static_cast<int32_t>(id);
    }
  }
  const auto grammar = testing::schema_grammar(
      json{{"type", "object"},
           {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
           {"required", {"city"}},
           {"additionalProperties", false}});
  TokenConstraint constraint(grammar, vocab);
  GrammarMatcher shadow(grammar);
  const std::string text = "{\"city\": \"Z\xC3\xBCrich\", \"days\": 12}";
  size_t checked_allowed = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == 0 || i == 1 || i == 9 || i == 10 || i == 13 || i == 29 || i == text.size()) {
      const TokenMask& mask = constraint.allowed();
      for (size_t id = 0; id < n; ++id) {
        bool expected = false;
        if (std::find(eos.begin(), eos.end(), static_cast<int32_t>(id)) != eos.end()) {
          expected = shadow.accepting();
        } else if (usable[id] && !bytes[id].empty()) {
          GrammarMatcher copy = shadow;
          expected = copy.advance(bytes[id]);
        }
        ASSERT_EQ(mask.allows(static_cast<int32_t>(id)), expected)
            << "token " << id << " '" << bytes[id] << "' after '" << text.substr(0, i) << "'";
        checked_allowed += expected;
      }
    }
    if (i == text.size()) break;
    const int32_t id = byte_id[static_cast<uint8_t>(text[i])];
    ASSERT_GE(id, 0);
    constraint.accept(id);
    ASSERT_TRUE(shadow.advance(text.substr(i, 1)));
  }
  EXPECT_GT(checked_allowed, 200000u);  // the in-string states allow most of the vocabulary
  EXPECT_TRUE(constraint.finished());
}

}  // namespace
}  // namespace memra::structured
