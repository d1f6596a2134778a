// Text <-> token ids with Hugging Face parity. Two algorithms: byte-level BPE (GPT-2, Llama 3,
// Qwen2/3/3.5, DeepSeek pre-tokenizers) and SentencePiece-style BPE with byte fallback (Gemma,
// Llama 2). Loaded from GGUF `tokenizer.ggml.*` metadata or from tokenizer.json (+
// tokenizer_config.json). Special tokens are matched in text only when the caller allows it, and
// never over bytes the caller marks as plain, so a user's message can never become a control
// token.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"

namespace memra {

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const TextRange&) const = default;
};

struct EncodeOptions {
  bool add_special = true;     // BOS/EOS as the tokenizer's config says (add_bos_token, ...)
  bool parse_special = false;  // match special tokens written in the text
  // With parse_special: byte ranges of the text (sorted, disjoint) that are someone else's text,
  // e.g. a chat message's content inside a rendered template. A special token is matched only
  // where none of its bytes lies in such a range, so one that starts, ends or lies inside one
  // (a client's "<|im_start|>", or "<|im_" + the template's "end|>") is plain text. Nothing
  // else changes: the text between matched specials is pre-tokenized and merged as one piece
  // across range boundaries, exactly as without ranges, so text that holds no special-token
  // string encodes to the same ids either way (and a rejected special's bytes merge with their
  // neighbours as any text would). Non-special added tokens match everywhere, as always.
  std::span<const TextRange> plain_ranges = {};
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // From GGUF metadata (tokenizer.ggml.model = gpt2 | llama, tokens, merges, scores, token_type,
  // special ids, pre-tokenizer name). Throws Error(unsupported) naming an unknown model/pre.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::Metadata& metadata);
  // From a folder with tokenizer.json (and tokenizer_config.json when present).
  static std::unique_ptr<Tokenizer> from_hf_folder(const std::string& folder);
  // From a model source as users name it (model_source_resolve): a folder loads tokenizer.json,
  // anything else is opened as GGUF. Only the metadata is read; no weights are touched.
  static std::unique_ptr<Tokenizer> from_source(const std::string& source);
  // Writes this tokenizer as GGUF tokenizer.ggml.* keys (for `memra convert`).
  virtual void to_gguf(gguf::Metadata& out) const = 0;

  virtual std::vector<int32_t> encode(std::string_view text,
                                      const EncodeOptions& options) const = 0;
  // Concatenated bytes of the tokens (may end inside a UTF-8 sequence; see StreamDecoder).
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // The raw bytes one token stands for, as it contributes to decoded text.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The vocabulary string as stored (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual const std::string& token_text(int32_t id) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;                // -1 when the model has none
  virtual std::vector<int32_t> eos_ids() const = 0;  // EOS/EOT ids that end generation
  virtual bool is_special(int32_t id) const = 0;     // control/added tokens hidden by skip_special
  virtual std::string chat_template() const = 0;     // empty when the source has none
};

// Incremental detokenization for streaming: push ids, get back only complete UTF-8 text (never
// half a character), honouring leading-space rules. The concatenation of every push() and the
// final flush() equals decode() of all ids with invalid UTF-8 repaired the way Python's
// bytes.decode("utf-8", "replace") does (U+FFFD per maximal invalid subpart).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special);
  std::string push(int32_t id);
  std::string flush();  // whatever is pending at the end (invalid bytes become U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool first_ = true;    // the first emitted token goes through decode() for leading-space rules
  std::string pending_;  // bytes of an incomplete UTF-8 sequence awaiting its continuation
};

}  // namespace memra
