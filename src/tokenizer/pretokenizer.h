// The pre-tokenizer pipeline of a BPE tokenizer, mirroring the Hugging Face `tokenizers` steps we
// support: regex splits (Split/Digits/Punctuation with Isolated or Contiguous behaviour), ByteLevel
// (optional GPT-2 regex and prefix space; later steps then see byte-mapped text) and Metaspace.
// GGUF files name a preset (`tokenizer.ggml.pre`); tokenizer.json spells the steps out.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_splitter.h"

namespace memra {

struct PreStep {
  enum class Kind { split, byte_level };
  Kind kind = Kind::split;
  std::shared_ptr<RegexSplitter> regex;  // split; byte_level when it uses the GPT-2 regex
  bool add_prefix_space = false;         // byte_level: a space before each piece lacking one
};

// The GPT-2 pattern ByteLevel(use_regex = true) applies.
extern const char* const kGpt2Pattern;

// Pre-tokenization result: pieces (views into `text` or `arena`) and whether they are already in
// the byte-map alphabet (true only when steps follow ByteLevel, e.g. Falcon).
struct PreTokenized {
  std::vector<std::string_view> pieces;
  bool mapped = false;
  std::vector<std::unique_ptr<std::string>> arena;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreStep> steps) : steps_(std::move(steps)) {}
  // Steps for a GGUF `tokenizer.ggml.pre` name; throws Error(unsupported) naming an unknown one.
  static PreTokenizer from_gguf_name(const std::string& name);

  // The GGUF preset whose steps equal these (same kinds, patterns and flags), or "".
  std::string match_gguf_name() const;

  void run(std::string_view text, PreTokenized& out) const;
  const std::vector<PreStep>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }
  std::string gguf_name;  // the preset this came from or matches ("" when none)

 private:
  std::vector<PreStep> steps_;
};

// Regexes equivalent to `tokenizers`' Digits and Punctuation pre-tokenizers.
std::string digits_pattern(bool individual);
std::string punctuation_pattern(bool contiguous);

}  // namespace memra
