// The compiled grammar graph (internal to memra_structured): one GrammarNode per literal, sequence,
// choice, repeat or JSON value kind. Nodes point at each other by raw pointer into the owning
// Grammar's node list; the graph may be cyclic (recursive $ref), which the matcher bounds by depth.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace memra::structured {

enum class NodeKind : uint8_t {
  literal,     // text
  sequence,    // items, one after another
  choice,      // sorted keys, each followed by next[i] (nullptr: nothing); keyed choice and enums
  repeat,      // item (separator item)*, min..max items
  string,      // any JSON string
  number,      // any JSON number
  integer,     // a JSON number without fraction or exponent
  object,      // JSON object: declared properties or free keys
  array,       // JSON array of `item`
  union_,      // one of `items`, picked by the first byte (disjoint first-byte sets)
  unresolved,  // a $ref placeholder while its target compiles; never left in a built grammar
};

struct ObjectProperty {
  std::string key_text;  // the JSON-escaped key plus the closing quote (the opening one is shared)
  const GrammarNode* value = nullptr;
  bool required = false;
};

struct GrammarNode {
  NodeKind kind = NodeKind::unresolved;
  std::string text;                         // literal bytes; repeat separator
  std::vector<const GrammarNode*> items;    // sequence items; union branches
  std::vector<std::string> keys;            // choice keys, sorted bytewise
  std::vector<const GrammarNode*> next;     // choice continuation per key (nullptr: end)
  const GrammarNode* item = nullptr;        // repeat item; array items
  uint32_t min = 0;                         // repeat min items; array minItems
  uint32_t max = 0;                         // repeat max items; array maxItems (UINT32_MAX: none)
  std::vector<ObjectProperty> properties;   // object: declared properties sorted by key_text
  uint64_t required_mask = 0;               // object: bit i = properties[i] is required
  const GrammarNode* additional = nullptr;  // object without declared properties: value of any key
  std::string path;                         // schema path, for errors found when building
  int32_t id = 0;                           // index in the builder (GrammarBuilder::Node)
  // Filled by GrammarBuilder::build: the bytes a match can start with, and for a union the branch
  // index per first byte (0xff: none).
  std::bitset<256> first;
  std::vector<uint8_t> union_table;
};

}  // namespace memra::structured
