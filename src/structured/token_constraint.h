// Token-level view of a grammar: which vocabulary tokens may come next. The vocabulary's token
// byte strings are laid out once as a trie (TokenVocabulary, shared by every request of a model);
// a mask is one scan of that trie with the matcher state, skipping every subtree whose prefix the
// grammar rejects, and masks are cached per matcher state (inside a JSON string the state repeats
// token after token).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace memra::structured {

class TokenVocabulary {
 public:
  // token_bytes[id]: the bytes token id contributes to decoded text. usable[id] == false for
  // control/special tokens, which a grammar never allows (they are not text). eos_ids: the tokens
  // that end generation, allowed exactly when the grammar accepts.
  TokenVocabulary(const std::vector<std::string>& token_bytes, const std::vector<bool>& usable,
                  std::vector<int32_t> eos_ids);
  ~TokenVocabulary();
  int32_t n_vocab() const;

 private:
  friend class TokenConstraint;
  struct Trie;
  std::unique_ptr<Trie> trie_;
  std::vector<int32_t> eos_ids_;
  int32_t n_vocab_ = 0;
};

// A bitset over the vocabulary: bit (id % 64) of words[id / 64].
struct TokenMask {
  std::vector<uint64_t> words;
  bool allows(int32_t id) const { return (words[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }
};

// One request's constraint: the matcher state plus the mask for its next token.
class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar,
                  std::shared_ptr<const TokenVocabulary> vocabulary);
  ~TokenConstraint();

  // Tokens allowed next (EOS ids included exactly when the grammar accepts). Valid until the next
  // accept(). Empty of allowed tokens only when the grammar cannot continue with this vocabulary.
  const TokenMask& allowed();
  // Advances by a token; throws Error(internal) when the token was not allowed.
  void accept(int32_t token);
  bool finished() const;  // the grammar is complete and nothing more can follow

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::structured
