// GrammarBuilder's private state, shared by the builder primitives (grammar_builder.cpp) and the
// JSON schema compiler (json_schema_compile.cpp): the node list and the limits it enforces.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/grammar_nodes.h"

namespace memra::structured {

// A plain struct (GrammarBuilder::Impl derives from it) so free functions can name it.
struct BuilderState {
  GrammarLimits limits;
  std::vector<std::unique_ptr<GrammarNode>> nodes;
  GrammarNode* any_value = nullptr;  // shared any-JSON-value subgraph, made on first use
  bool built = false;

  GrammarNode* make(NodeKind kind);                // enforces limits.max_nodes
  GrammarNode* node(GrammarBuilder::Node handle);  // checks the handle
  GrammarNode* any_json_value();
  GrammarNode* boolean();
  GrammarNode* null();
};

struct GrammarBuilder::Impl : BuilderState {};

// Compiles a JSON schema into builder nodes (json_schema_compile.cpp).
GrammarNode* compile_json_schema(BuilderState& impl, const nlohmann::json& schema);

}  // namespace memra::structured
