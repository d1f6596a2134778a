// libFuzzer target for constrained decoding: the input is a JSON schema, a NUL byte, then bytes a
// model might write. Any schema must compile or throw memra::Error; the bytes are matched one at a
// time and all at once (the two must agree), and the token mask over a small vocabulary must equal
// brute force (advance a matcher copy by each token) at every accepted step.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/token_constraint.h"

namespace {

using memra::structured::GrammarBuilder;
using memra::structured::GrammarLimits;
using memra::structured::GrammarMatcher;
using memra::structured::TokenConstraint;
using memra::structured::TokenVocabulary;

std::shared_ptr<const TokenVocabulary> fuzz_vocabulary(std::vector<std::string>& bytes) {
  for (int c = 0; c < 256; ++c) bytes.emplace_back(1, static_cast<char>(c));
  for (const char* s : {"{\"", "\":", "\",\"", "true", "null", "\\u00", "\xC3\xA9", "12", "\"}",
                        "  ", "[{", "}]", "-0.5e"}) {
    bytes.emplace_back(s);
  }
  bytes.emplace_back("</s>");  // EOS
  std::vector<bool> usable(bytes.size(), true);
  usable.back() = false;
  return std::make_shared<TokenVocabulary>(
      bytes, usable, std::vector<int32_t>{static_cast<int32_t>(bytes.size() - 1)});
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<std::string> vocab_bytes;
  static const auto vocab = fuzz_vocabulary(vocab_bytes);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view schema_text = input.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? "" : input.substr(split + 1);
  const nlohmann::json schema = nlohmann::json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return 0;
  GrammarLimits limits;
  limits.max_depth = 8;
  limits.max_nodes = 512;
  std::shared_ptr<const memra::structured::Grammar> grammar;
  try {
    GrammarBuilder builder(limits);
    grammar = builder.build(builder.json_schema(schema));
  } catch (const memra::Error&) {
    return 0;
  }
  GrammarMatcher stepwise(grammar);
  TokenConstraint constraint(grammar, vocab);
  size_t accepted = 0;
  for (; accepted < text.size(); ++accepted) {
    if (accepted < 64) {  // mask == brute force while the prefix is short
      const auto& mask = constraint.allowed();
      for (size_t id = 0; id + 1 < vocab_bytes.size(); ++id) {
        GrammarMatcher copy = stepwise;
        check(mask.allows(static_cast<int32_t>(id)) == copy.advance(vocab_bytes[id]));
      }
      check(mask.allows(static_cast<int32_t>(vocab_bytes.size() - 1)) == stepwise.accepting());
    }
    if (!stepwise.advance(text.substr(accepted, 1))) break;
    constraint.accept(static_cast<uint8_t>(text[accepted]));
    (void)stepwise.finished();
  }
  GrammarMatcher whole(grammar);
  check(whole.advance(text) == (accepted == text.size()));
  if (accepted == text.size()) check(whole.accepting() == stepwise.accepting());
  return 0;
}
