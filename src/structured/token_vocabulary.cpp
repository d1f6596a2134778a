// TokenVocabulary: builds the preorder trie of the usable tokens' byte strings once per model.
// Tokens with identical bytes (a byte-fallback token and a plain one) share a node.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "structured/token_trie.h"

namespace memra::structured {

namespace {

constexpr size_t kMaxTokenBytes = 65535;  // trie depth is 16-bit; real tokens are far shorter

void build_trie(VocabTrie& t) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < t.token_bytes.size(); ++id) {
    if (t.in_trie[id]) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&t](int32_t x, int32_t y) {
    return t.token_bytes[static_cast<size_t>(x)] < t.token_bytes[static_cast<size_t>(y)];
  });
  std::vector<uint32_t> path;  // open nodes along the previous token's bytes
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = t.token_bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), s.size());
      while (common < n && (*prev)[common] == s[common]) ++common;
    }
    // Sorted order never puts a proper prefix after the string it prefixes, so the token ends
    // at the last node created (or at the previous token's node when the bytes are equal).
    while (path.size() > common) {
      t.subtree_end[path.back()] = static_cast<uint32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t k = common; k < s.size(); ++k) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[k]));
      t.depth.push_back(static_cast<uint16_t>(k + 1));
      t.subtree_end.push_back(0);
      t.id_start.push_back(static_cast<uint32_t>(t.ids.size()));
    }
    t.ids.push_back(id);
    t.max_depth = std::max(t.max_depth, static_cast<uint16_t>(s.size()));
    prev = &s;
  }
  for (uint32_t node : path) t.subtree_end[node] = static_cast<uint32_t>(t.byte.size());
  t.id_start.push_back(static_cast<uint32_t>(t.ids.size()));
}

}  // namespace

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& token_bytes,
                                 const std::vector<bool>& usable, std::vector<int32_t> eos_ids)
    : trie_(std::make_unique<Trie>()),
      eos_ids_(std::move(eos_ids)),
      n_vocab_(static_cast<int32_t>(token_bytes.size())) {
  if (usable.size() != token_bytes.size()) {
    fail(ErrorCode::internal, "TokenVocabulary: {} usable flags for {} tokens", usable.size(),
         token_bytes.size());
  }
  trie_->token_bytes = token_bytes;
  trie_->in_trie.assign(token_bytes.size(), false);
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    trie_->in_trie[id] =
        usable[id] && !token_bytes[id].empty() && token_bytes[id].size() <= kMaxTokenBytes;
  }
  for (int32_t id : eos_ids_) {
    if (id < 0 || id >= n_vocab_) {
      fail(ErrorCode::internal, "TokenVocabulary: EOS id {} outside the vocabulary", id);
    }
    trie_->in_trie[static_cast<size_t>(id)] = false;  // EOS is allowed only when accepting
  }
  build_trie(*trie_);
}

TokenVocabulary::~TokenVocabulary() = default;

int32_t TokenVocabulary::n_vocab() const {
  return n_vocab_;
}

}  // namespace memra::structured
