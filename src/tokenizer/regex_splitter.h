// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that splits text the way Hugging Face
// `tokenizers` Split(behavior = Isolated) does: every match and every gap between matches becomes
// its own piece, in order. Patterns come from tokenizer.json or GGUF presets; the text is valid
// UTF-8 (the tokenizer repairs it first).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memra {

class RegexSplitter {
 public:
  explicit RegexSplitter(
      const std::string& pattern);  // throws Error(unsupported) if it won't compile
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of text (views into text) to out. Empty pieces are never produced.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace memra
