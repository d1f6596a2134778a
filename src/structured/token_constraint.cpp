// TokenConstraint: a request's matcher plus its next-token mask. The mask is one preorder scan of
// the vocabulary trie with a matcher state per trie depth (state[d] = state[d-1] stepped by the
// node's byte), jumping over the subtree of every rejected prefix; stacks pushed while scanning
// live in an arena rewound per depth, so the scan allocates nothing per byte. Masks are cached
// per exact matcher stack in a small LRU: inside a JSON string the stack repeats token after token.
#include <list>
#include <unordered_map>

#include "core/error.h"
#include "structured/matcher_state.h"
#include "structured/token_trie.h"

namespace memra::structured {

namespace {

constexpr size_t kCacheEntries = 32;

void set_bit(std::vector<uint64_t>& words, int32_t id) {
  words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace

struct TokenConstraint::Impl {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocabulary;
  GrammarMatcher matcher;
  bool eos_taken = false;
  TokenMask mask;
  bool mask_valid = false;
  using Entry = std::pair<std::string, std::vector<uint64_t>>;
  std::list<Entry> lru;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  LinkArena arena;
  std::vector<Cursor> states;  // per trie depth
  std::vector<size_t> marks;   // arena size after states[d]

  Impl(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocabulary> v)
      : grammar(std::move(g)), vocabulary(std::move(v)), matcher(grammar) {}

  void scan(const VocabTrie& t, const std::vector<Frame>& frames,
            const std::vector<int32_t>& eos_ids, std::vector<uint64_t>& words) {
    const GrammarLimits& limits = grammar->limits();
    arena.rewind(0);
    const Cursor root = cursor_from_frames(frames, arena);
    states.resize(static_cast<size_t>(t.max_depth) + 1);
    marks.resize(states.size());
    states[0] = root;
    marks[0] = arena.mark();
    const uint32_t n = static_cast<uint32_t>(t.byte.size());
    for (uint32_t i = 0; i < n;) {
      const size_t d = t.depth[i];
      arena.rewind(marks[d - 1]);
      Cursor& state = states[d];
      state = states[d - 1];
      if (!cursor_step(state, t.byte[i], arena, limits)) {
        i = t.subtree_end[i];
        continue;
      }
      marks[d] = arena.mark();
      for (uint32_t j = t.id_start[i]; j < t.id_start[i + 1]; ++j) set_bit(words, t.ids[j]);
      ++i;
    }
    if (cursor_accepting(root)) {
      for (int32_t id : eos_ids) set_bit(words, id);
    }
  }
};

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const TokenVocabulary> vocabulary)
    : impl_(std::make_unique<Impl>(std::move(grammar), std::move(vocabulary))) {
  if (!impl_->vocabulary) fail(ErrorCode::internal, "TokenConstraint needs a vocabulary");
}

TokenConstraint::~TokenConstraint() = default;

const TokenMask& TokenConstraint::allowed() {
  Impl& s = *impl_;
  if (s.mask_valid) return s.mask;
  const size_t n_words = (static_cast<size_t>(s.vocabulary->n_vocab()) + 63) / 64;
  s.mask.words.assign(n_words, 0);
  s.mask_valid = true;
  if (s.eos_taken) return s.mask;
  const std::vector<Frame>& frames = s.matcher.state_->frames;
  std::string key = frames_key(frames);
  if (auto it = s.index.find(key); it != s.index.end()) {
    s.lru.splice(s.lru.begin(), s.lru, it->second);
    s.mask.words = it->second->second;
    return s.mask;
  }
  s.scan(*s.vocabulary->trie_, frames, s.vocabulary->eos_ids_, s.mask.words);
  s.lru.emplace_front(key, s.mask.words);
  s.index.emplace(std::move(key), s.lru.begin());
  if (s.lru.size() > kCacheEntries) {
    s.index.erase(s.lru.back().first);
    s.lru.pop_back();
  }
  return s.mask;
}

void TokenConstraint::accept(int32_t token) {
  Impl& s = *impl_;
  const TokenVocabulary& vocab = *s.vocabulary;
  if (token < 0 || token >= vocab.n_vocab()) {
    fail(ErrorCode::internal, "constrained decoding: token {} outside the vocabulary", token);
  }
  if (s.eos_taken) {
    fail(ErrorCode::internal, "constrained decoding: token {} after end of generation", token);
  }
  for (int32_t eos : vocab.eos_ids_) {
    if (token != eos) continue;
    if (!s.matcher.accepting()) {
      fail(ErrorCode::internal,
           "constrained decoding: end of generation before the grammar "
           "is complete");
    }
    s.eos_taken = true;
    s.mask_valid = false;
    return;
  }
  const VocabTrie& t = *vocab.trie_;
  const auto index = static_cast<size_t>(token);
  if (!t.in_trie[index] || !s.matcher.advance(t.token_bytes[index])) {
    fail(ErrorCode::internal, "constrained decoding: token {} is not allowed by the grammar here",
         token);
  }
  s.mask_valid = false;
}

bool TokenConstraint::finished() const {
  return impl_->eos_taken || impl_->matcher.finished();
}

}  // namespace memra::structured
