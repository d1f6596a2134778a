// The one Tokenizer implementation behind both loaders: optional SentencePiece-style normalization
// (spaces -> U+2581, a prefix U+2581), added-token splitting, the pre-tokenizer pipeline, the BPE
// model and the matching decoder. Loaders (tokenizer_gguf.cpp, tokenizer_hf.cpp) fill a
// BpeTokenizer::Config; everything they cannot express is refused there, by name.
#pragma once

#include <array>
#include <bitset>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace memra {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;  // matched only with parse_special, outside plain ranges; hidden by
                         // skip_special
  bool lstrip = false;   // absorbs whitespace on its left
  bool rstrip = false;   // absorbs whitespace on its right
};

// GGUF token types (tokenizer.ggml.token_type), numbered as in the format.
enum class TokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

struct TokenizerConfig {
  enum class Kind { byte_level, sentencepiece };
  enum class Prepend { never, always, first };  // where SentencePiece text gets a leading U+2581
  Kind kind = Kind::byte_level;
  std::vector<std::string> tokens;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::array<int32_t, 3>> merge_ids;  // (left, right, result), ranked after `merges`
  std::vector<float> scores;                      // SentencePiece only; kept for GGUF output
  std::vector<TokenType> token_types;             // one per token
  BpeModel::Options model;
  PreTokenizer pre;
  Prepend prepend = Prepend::never;
  bool nfc = false;                  // tokenizer.json NFC normalizer (needs ICU)
  bool replace_spaces = false;       // SentencePiece: ' ' -> U+2581 before the model
  bool split_on_metaspace = false;   // Metaspace(split = true): each U+2581 starts a piece
  bool strip_leading_space = false;  // decoder drops one leading space of the text
  std::vector<AddedToken> added;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eog_ids;  // extra end-of-generation ids (EOT, EOM, ...)
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(TokenizerConfig config);

  void to_gguf(gguf::Metadata& out) const override;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override;
  const std::string& token_text(int32_t id) const override;
  int32_t n_vocab() const override { return static_cast<int32_t>(config_.tokens.size()); }
  int32_t bos_id() const override { return config_.bos_id; }
  std::vector<int32_t> eos_ids() const override;
  bool is_special(int32_t id) const override;
  std::string chat_template() const override { return config_.chat_template; }

 private:
  struct Segment {
    std::string_view text;
    int32_t token = -1;  // >= 0: an added token matched here
  };
  std::vector<Segment> split_added(std::string_view text, bool parse_special,
                                   std::span<const TextRange> plain) const;
  void encode_segment(std::string_view text, bool first, std::vector<int32_t>& out) const;
  void encode_sentencepiece(std::string_view normalized, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  TokenizerConfig config_;
  std::unique_ptr<BpeModel> model_;
  std::vector<uint8_t> special_;  // per id: 0 model token, 1 added, 2 added special
  // Added tokens grouped by first byte, longest first, for leftmost-longest matching. `second`
  // holds the second bytes that occur in the group, so most text positions are rejected at once.
  struct AddedGroup {
    std::vector<const AddedToken*> tokens;
    std::bitset<256> second;
    bool has_single_byte = false;
  };
  std::vector<AddedGroup> added_by_byte_;
  // SentencePiece: characters that some mergeable token has right before U+2581, so a piece
  // boundary there could be crossed by a merge (see encode_sentencepiece).
  std::vector<std::string> metaspace_joiners_;
};

}  // namespace memra
