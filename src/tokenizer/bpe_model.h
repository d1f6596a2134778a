// The BPE model shared by byte-level (GPT-2 style) and SentencePiece-style tokenizers: a
// vocabulary, ranked merges over token-id pairs, and the merge loop of Hugging Face `tokenizers`
// (lowest rank first, leftmost on ties), with byte fallback and unknown-token fusing. Results per
// word are cached because natural text repeats words: one fixed-size cache per model, shared by
// every thread (word_cache_bytes()), so encoding on a new thread allocates no cache of its own.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memra {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    bool byte_level = false;     // words are raw bytes mapped through the GPT-2 byte map
    bool byte_fallback = false;  // a character missing from the vocab becomes <0xXX> tokens
    bool fuse_unk = false;       // consecutive unknown characters become one unknown token
    bool ignore_merges = false;  // a word that is itself a token is emitted without merging
    int32_t unk_id = -1;
  };

  // merges: (left, right) token-string pairs in rank order. Throws Error(malformed_file) naming
  // a merge whose parts or result are not in the vocabulary.
  // merge_ids: (left, right, result) ids in rank order, ranked after `merges` (loaders that
  // derive merges from ids pass these to skip string lookups).
  BpeModel(std::vector<std::string> tokens,
           const std::vector<std::pair<std::string, std::string>>& merges, const Options& options,
           const std::vector<std::array<int32_t, 3>>& merge_ids = {});
  ~BpeModel();
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-tokenized word. For byte-level models `word` holds raw bytes (or,
  // when `mapped`, text already in the byte-map alphabet); otherwise it is normalized text.
  void encode_word(std::string_view word, bool mapped, std::vector<int32_t>& out) const;

  int32_t find(std::string_view token) const;  // -1 when absent
  const std::vector<std::string>& tokens() const { return tokens_; }
  const Options& options() const { return options_; }
  // Merges in rank order as (left, right) ids, for writing GGUF.
  std::vector<std::pair<int32_t, int32_t>> merges_in_rank_order() const;
  int32_t byte_fallback_id(uint8_t byte) const { return byte_fallback_ids_[byte]; }
  // The word cache's size: allocated with the model, the same however many words or threads.
  static size_t word_cache_bytes();

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void initial_symbols(std::string_view word, bool mapped, std::vector<int32_t>& symbols) const;
  void merge_symbols(std::vector<int32_t>& symbols) const;

  std::vector<std::string> tokens_;
  TokenIdMap ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  Options options_;
  std::array<int32_t, 256> byte_level_ids_{};     // id of each byte's mapped character
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of <0xXX>, -1 when absent

  // Word -> ids results of words up to 64 bytes and 16 ids; slots are guarded by sharded locks.
  struct WordCache;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace memra
