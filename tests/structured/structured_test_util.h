// Helpers shared by the structured-output tests: compile a schema, feed text byte by byte.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/grammar.h"

namespace memra::structured::testing {

inline std::shared_ptr<const Grammar> schema_grammar(const nlohmann::json& schema,
                                                     GrammarLimits limits = {}) {
  GrammarBuilder builder(limits);
  return builder.build(builder.json_schema(schema));
}

inline std::shared_ptr<const Grammar> any_value_grammar(GrammarLimits limits = {}) {
  GrammarBuilder builder(limits);
  return builder.build(builder.any_json_value());
}

// Every byte of `text` is accepted, one advance() per byte.
inline bool viable(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!matcher.advance(text.substr(i, 1))) return false;
  }
  return true;
}

// `text` is a complete sentence of the grammar.
inline bool accepts(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!matcher.advance(text.substr(i, 1))) return false;
  }
  return matcher.accepting();
}

}  // namespace memra::structured::testing
