// Pre-tokenizer pipeline and the GGUF presets (see pretokenizer.h). Each preset is the step list
// of the Hugging Face tokenizer.json the GGUF name stands for, so ids match `tokenizers`.
#include "tokenizer/pretokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode_text.h"

namespace memra {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDeepseekV3Pattern =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
    "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
    "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-"
    "\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15"
    "\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb"
    "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124"
    "\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
    "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-"
    "\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-"
    "\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";
constexpr const char* kDeepseekLlmPunct =
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";
constexpr const char* kDeepseekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

PreStep split(const std::string& pattern) {
  return {PreStep::Kind::split, std::make_shared<RegexSplitter>(pattern), false};
}
PreStep byte_level(bool use_regex) {
  return {PreStep::Kind::byte_level,
          use_regex ? std::make_shared<RegexSplitter>(kGpt2Pattern) : nullptr, false};
}

std::vector<PreStep> preset_steps(const std::string& name) {
  if (name == "gpt-2" || name == "default" || name == "mpt" || name == "olmo" || name == "gpt2")
    return {byte_level(true)};
  if (name == "starcoder" || name == "refact" || name == "smollm" || name == "command-r")
    return {split(digits_pattern(true)), byte_level(true)};
  if (name == "llama-bpe" || name == "llama3" || name == "dbrx" || name == "smaug-bpe")
    return {split(kLlama3Pattern), byte_level(false)};
  if (name == "qwen2" || name == "stablelm2" || name == "deepseek-r1-qwen")
    return {split(kQwen2Pattern), byte_level(false)};
  if (name == "qwen35") return {split(kQwen35Pattern), byte_level(false)};
  if (name == "deepseek-llm")
    return {split("[\r\n]"),  split(kDeepseekLlmLetters), split(kDeepseekLlmPunct),
            split("\\s+$"),   split(kDeepseekCjk),        split(digits_pattern(false)),
            byte_level(false)};
  if (name == "deepseek-coder")
    return {split("[\r\n]"),     split("\\s?\\p{L}+"),        split("\\s?\\p{P}+"),
            split(kDeepseekCjk), split(digits_pattern(true)), byte_level(false)};
  if (name == "deepseek-v3")
    return {split("\\p{N}{1,3}"), split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
            split(kDeepseekV3Pattern), byte_level(false)};
  if (name == "falcon")
    return {split(punctuation_pattern(true)), byte_level(true), split(digits_pattern(false)),
            split("[0-9][0-9][0-9]")};
  fail(ErrorCode::unsupported, "unsupported pre-tokenizer '{}' (tokenizer.ggml.pre)", name);
}

}  // namespace

std::string digits_pattern(bool individual) {
  return individual ? "\\p{N}" : "\\p{N}+";
}

std::string punctuation_pattern(bool contiguous) {
  // `tokenizers` counts ASCII punctuation (which includes $ + < = > ^ ` | ~) and Unicode P*.
  return std::string(R"([\p{P}!-/:-@\[-`{-~])") + (contiguous ? "+" : "");
}

PreTokenizer PreTokenizer::from_gguf_name(const std::string& name) {
  PreTokenizer p(preset_steps(name));
  p.gguf_name = name;
  return p;
}

std::string PreTokenizer::match_gguf_name() const {
  static const char* const kNames[] = {"gpt-2",          "starcoder",   "llama-bpe",
                                       "qwen2",          "qwen35",      "deepseek-llm",
                                       "deepseek-coder", "deepseek-v3", "falcon"};
  for (const char* name : kNames) {
    const std::vector<PreStep> preset = preset_steps(name);
    if (preset.size() != steps_.size()) continue;
    bool same = true;
    for (size_t i = 0; i < preset.size() && same; ++i) {
      const PreStep& a = preset[i];
      const PreStep& b = steps_[i];
      same = a.kind == b.kind && a.add_prefix_space == b.add_prefix_space &&
             (a.regex == nullptr) == (b.regex == nullptr) &&
             (a.regex == nullptr || a.regex->pattern() == b.regex->pattern());
    }
    if (same) return name;
  }
  return "";
}

void PreTokenizer::run(std::string_view text, PreTokenized& out) const {
  out.pieces.clear();
  out.pieces.push_back(text);
  out.mapped = false;
  std::vector<std::string_view> next;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const PreStep& step = steps_[s];
    next.clear();
    if (step.kind == PreStep::Kind::split || step.regex) {
      for (std::string_view piece : out.pieces) step.regex->split(piece, next);
      out.pieces.swap(next);
      next.clear();
    }
    if (step.kind != PreStep::Kind::byte_level) continue;
    if (step.add_prefix_space) {
      for (auto& piece : out.pieces) {
        if (!piece.empty() && piece[0] == ' ') continue;
        auto spaced = std::make_unique<std::string>(piece.size() + 1, ' ');
        std::copy(piece.begin(), piece.end(), spaced->begin() + 1);
        out.arena.push_back(std::move(spaced));
        piece = *out.arena.back();
      }
    }
    if (s + 1 < steps_.size()) {
      // Later steps see the byte-mapped alphabet, as in `tokenizers`.
      for (auto& piece : out.pieces) {
        auto mapped = std::make_unique<std::string>();
        for (char c : piece)
          text::utf8_append(*mapped, text::byte_to_unicode()[static_cast<uint8_t>(c)]);
        out.arena.push_back(std::move(mapped));
        piece = *out.arena.back();
      }
      out.mapped = true;
    }
  }
}

}  // namespace memra
