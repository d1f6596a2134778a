// The vocabulary trie (internal): every usable token's bytes, laid out in DFS preorder as flat
// arrays so a mask scan is one forward pass that jumps over a rejected node's whole subtree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "structured/token_constraint.h"

namespace memra::structured {

struct VocabTrie {
  // Per node, in preorder (the root, the empty prefix, is implicit):
  std::vector<uint8_t> byte;          // the byte on the edge into the node
  std::vector<uint16_t> depth;        // its prefix length, 1-based
  std::vector<uint32_t> subtree_end;  // the first node after its subtree
  std::vector<uint32_t> id_start;     // n_nodes + 1 entries: ids[id_start[i], id_start[i+1])
  std::vector<int32_t> ids;           // token ids whose bytes end at the node (duplicates too)
  uint16_t max_depth = 0;
  std::vector<std::string> token_bytes;  // per id, for accept()
  std::vector<bool> in_trie;             // per id: usable, non-empty, not EOS
};

struct TokenVocabulary::Trie : VocabTrie {};

}  // namespace memra::structured
