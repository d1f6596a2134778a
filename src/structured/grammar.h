// Grammars that constrain generated text, for structured output (response_format json_object /
// json_schema) and forced tool calls (tool_choice "required" or a named function). A Grammar is a
// small graph of nodes compiled once per request and shared read-only; GrammarMatcher walks it
// one byte at a time with a pushdown stack. Every node is deterministic on its next byte (JSON is;
// choices are keyed by distinct literal prefixes or disjoint first bytes), so matching never
// backtracks and a token's bytes are either accepted or not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::structured {

struct GrammarNode;  // internal; see grammar_nodes.h

// Limits that keep a grammar, and what it lets a model write, bounded.
struct GrammarLimits {
  int32_t max_nodes = 4096;  // compiled nodes per grammar
  int32_t max_depth = 32;    // JSON nesting in generated text
  // Whitespace between JSON tokens: a run is an optional "\n" then spaces/tabs, at most this many
  // bytes. 1 (compact, `{"a": 1, "b": [2, 3]}`) because small models sampled with any slack
  // spend their tokens on whitespace (Gemma 3 270M at temperature 0.8 did, with runs of 16).
  int32_t max_whitespace_run = 1;
  int32_t max_number_bytes = 32;  // one JSON number
  int32_t max_choices = 64;       // enum values, object properties, tools
};

class Grammar {
 public:
  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  const GrammarNode* root() const { return root_; }
  const GrammarLimits& limits() const { return limits_; }

 private:
  friend class GrammarBuilder;
  Grammar() = default;
  std::vector<std::unique_ptr<GrammarNode>> nodes_;
  const GrammarNode* root_ = nullptr;
  GrammarLimits limits_;
};

// Builds a grammar bottom-up. Node handles are indices valid for this builder only.
// Throws Error(invalid_argument) for a malformed schema and Error(unsupported) naming a JSON
// schema keyword it does not enforce (with its path, e.g. "properties.city.pattern"), so a
// request is refused instead of getting output that might not match.
class GrammarBuilder {
 public:
  using Node = int32_t;
  static constexpr Node kEnd = -1;  // "nothing follows" as a keyed_choice continuation

  explicit GrammarBuilder(GrammarLimits limits = {});
  ~GrammarBuilder();

  Node literal(std::string text);          // exactly these bytes
  Node sequence(std::vector<Node> items);  // one after another
  // One of several alternatives, chosen by its literal key (no key may be a prefix of another;
  // keys are non-empty); the key's bytes are written, then its continuation (kEnd: nothing).
  Node keyed_choice(std::vector<std::pair<std::string, Node>> alternatives);
  // item, then up to max-1 more times: separator, item. min >= 1; the grammar may end after
  // min items.
  Node repeat(Node item, std::string separator, int32_t min, int32_t max);
  // A JSON value valid against `schema` (the supported subset is listed in docs/SERVING.md:
  // type (incl. lists), properties, required, additionalProperties, items, minItems, maxItems,
  // enum, const, anyOf/oneOf of distinguishable branches, local $ref/$defs/definitions,
  // nullable; annotations such as title/description/default/examples are ignored).
  Node json_schema(const nlohmann::json& schema);
  Node any_json_object();  // response_format json_object: any JSON object
  Node any_json_value();

  std::shared_ptr<const Grammar> build(Node root);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The byte-level matcher: a pushdown state over a grammar. Copying is cheap (the stack is a small
// vector of frames, one per open node); token-mask computation steps linked copies of it whose
// lower frames are shared, allocated from an arena (see matcher_core.h).
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  ~GrammarMatcher();

  // Consumes the bytes if the grammar allows all of them (then true); otherwise false and the
  // state is unchanged.
  bool advance(std::string_view bytes);
  // The text so far is a complete sentence of the grammar (generation may stop here).
  bool accepting() const;
  // Nothing more can follow: the only possible continuation is to stop.
  bool finished() const;

 private:
  friend class TokenConstraint;
  struct State;
  std::shared_ptr<const Grammar> grammar_;
  std::unique_ptr<State> state_;
};

}  // namespace memra::structured
