// Tokenizer <-> GGUF `tokenizer.ggml.*` metadata. `gpt2` files are byte-level BPE with explicit
// merges and a named pre-tokenizer; `llama` files are SentencePiece BPE whose merges follow from
// the token scores (the same derivation transformers uses to build tokenizer.json from them);
// `gemma4` files are SentencePiece-style BPE (spaces as U+2581, byte fallback, no space prefix)
// with the merges of their tokenizer.json written out.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/unicode_normalize.h"
#include "tokenizer/unicode_text.h"

namespace memra {

namespace {

// Control tokens that end a turn in common chat formats, used when a file names no EOT id.
constexpr const char* kEndOfTurnNames[] = {"<end_of_turn>",   "<|eot_id|>", "<|im_end|>",
                                           "<|end|>",         "<|eom_id|>", "<|endoftext|>",
                                           "<|end_of_text|>", "<|return|>", "<turn|>"};

std::vector<std::pair<std::string, std::string>> split_merges(
    const std::vector<std::string>& lines) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t space = lines[i].find(' ', 1);
    if (space == std::string::npos)
      fail(ErrorCode::malformed_file, "tokenizer.ggml.merges[{}] has no space separator", i);
    merges.emplace_back(lines[i].substr(0, space), lines[i].substr(space + 1));
  }
  return merges;
}

// SentencePiece BPE: every way to write a token as two tokens is a merge, ranked by the merged
// token's score (higher first), ties by id, then by the parts' scores. Only normal and
// user-defined tokens can be merge results: control, unused and byte tokens never come from text.
std::vector<std::array<int32_t, 3>> merges_from_scores(const TokenizerConfig& c) {
  TokenIdMap ids;
  ids.reserve(c.tokens.size());
  for (size_t i = 0; i < c.tokens.size(); ++i) ids.emplace(c.tokens[i], static_cast<int32_t>(i));
  struct Candidate {
    float score;
    int32_t id;
    float left_score;
    float right_score;
    int32_t left;
    int32_t right;
  };
  std::vector<Candidate> candidates;
  for (size_t id = 0; id < c.tokens.size(); ++id) {
    const TokenType type = c.token_types[id];
    if (type != TokenType::normal && type != TokenType::user_defined) continue;
    const std::string& t = c.tokens[id];
    for (size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<uint8_t>(t[k]) & 0xC0) == 0x80) continue;  // not a character boundary
      auto l = ids.find(std::string_view(t).substr(0, k));
      if (l == ids.end()) continue;
      auto r = ids.find(std::string_view(t).substr(k));
      if (r == ids.end()) continue;
      candidates.push_back({c.scores[id], static_cast<int32_t>(id), c.scores[l->second],
                            c.scores[r->second], l->second, r->second});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.score != b.score) return a.score > b.score;
                     if (a.id != b.id) return a.id < b.id;
                     if (a.left_score != b.left_score) return a.left_score > b.left_score;
                     return a.right_score > b.right_score;
                   });
  std::vector<std::array<int32_t, 3>> merges;
  merges.reserve(candidates.size());
  for (const Candidate& m : candidates) merges.push_back({m.left, m.right, m.id});
  return merges;
}

int32_t optional_id(const gguf::Metadata& md, std::string_view key) {
  const auto v = md.get_int(key);
  return v && *v >= 0 && *v <= INT32_MAX ? static_cast<int32_t>(*v) : -1;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::Metadata& md) {
  const std::string model = md.require_string("tokenizer.ggml.model");
  TokenizerConfig c;
  if (model == "gpt2") {
    c.kind = TokenizerConfig::Kind::byte_level;
  } else if (model == "llama" || model == "gemma4") {
    c.kind = TokenizerConfig::Kind::sentencepiece;
  } else {
    fail(ErrorCode::unsupported,
         "unsupported tokenizer model '{}' (tokenizer.ggml.model); memra supports gpt2 (byte-level "
         "BPE), llama (SentencePiece BPE) and gemma4 (SentencePiece-style BPE with merges)",
         model);
  }
  auto tokens = md.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) fail(ErrorCode::malformed_file, "GGUF has no tokenizer.ggml.tokens");
  c.tokens = std::move(*tokens);
  const size_t n = c.tokens.size();
  if (auto types = md.get_int_array("tokenizer.ggml.token_type")) {
    if (types->size() != n)
      fail(ErrorCode::malformed_file, "tokenizer.ggml.token_type has {} entries for {} tokens",
           types->size(), n);
    c.token_types.reserve(n);
    for (int64_t t : *types)
      c.token_types.push_back(t >= 1 && t <= 6 ? static_cast<TokenType>(t) : TokenType::normal);
  } else {
    c.token_types.assign(n, TokenType::normal);
  }
  const std::string pre = md.get_string("tokenizer.ggml.pre").value_or("default");
  c.bos_id = optional_id(md, "tokenizer.ggml.bos_token_id");
  c.eos_id = optional_id(md, "tokenizer.ggml.eos_token_id");
  c.pad_id = optional_id(md, "tokenizer.ggml.padding_token_id");
  c.model.unk_id = optional_id(md, "tokenizer.ggml.unknown_token_id");
  c.chat_template = md.get_string("tokenizer.chat_template").value_or("");

  if (c.kind == TokenizerConfig::Kind::byte_level) {
    auto merges = md.get_string_array("tokenizer.ggml.merges");
    if (!merges) fail(ErrorCode::malformed_file, "gpt2 tokenizer has no tokenizer.ggml.merges");
    c.merges = split_merges(*merges);
    c.pre = PreTokenizer::from_gguf_name(pre);
    c.model.ignore_merges = pre == "llama-bpe" || pre == "llama3";
    // The Hugging Face tokenizers these names stand for normalize to NFC first (transformers'
    // Qwen2Tokenizer and CohereTokenizer); a GGUF records only the name. Qwen3.5's does not: its
    // upstream ids keep decomposed marks (ggml-vocab-qwen35.gguf.out).
    if (pre == "qwen2" || pre == "command-r") {
      if (!text::nfc_available())
        fail(ErrorCode::unsupported,
             "pre-tokenizer '{}' normalizes to NFC, which needs memra built with ICU (libicu-dev)",
             pre);
      c.nfc = true;
    }
    c.add_bos = md.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  } else {
    if (pre != "default")
      fail(ErrorCode::unsupported,
           "unsupported pre-tokenizer '{}' for a llama (SentencePiece) tokenizer", pre);
    auto scores = md.get_float_array("tokenizer.ggml.scores");
    if (!scores || scores->size() != n)
      fail(ErrorCode::malformed_file,
           "llama tokenizer needs tokenizer.ggml.scores with one score per token");
    c.scores.assign(scores->begin(), scores->end());
    if (auto merges = md.get_string_array("tokenizer.ggml.merges"))
      c.merges = split_merges(*merges);
    else if (model == "gemma4")
      fail(ErrorCode::malformed_file, "gemma4 tokenizer has no tokenizer.ggml.merges");
    else
      c.merge_ids = merges_from_scores(c);
    c.model.byte_fallback =
        std::count(c.token_types.begin(), c.token_types.end(), TokenType::byte) == 256;
    c.model.fuse_unk = true;
    c.replace_spaces = true;
    const bool prefix = md.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    c.prepend = prefix ? TokenizerConfig::Prepend::always : TokenizerConfig::Prepend::never;
    c.strip_leading_space = prefix;
    c.add_bos = md.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
  }
  c.add_eos = md.get_bool("tokenizer.ggml.add_eos_token").value_or(false);

  for (size_t id = 0; id < n; ++id) {
    const TokenType type = c.token_types[id];
    if (type == TokenType::control || type == TokenType::unknown || type == TokenType::user_defined)
      c.added.push_back({c.tokens[id], static_cast<int32_t>(id), type != TokenType::user_defined});
  }
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (int32_t id = optional_id(md, key); id >= 0) c.eog_ids.push_back(id);
  for (size_t id = 0; id < n; ++id)
    if (c.token_types[id] == TokenType::control)
      for (const char* name : kEndOfTurnNames)
        if (c.tokens[id] == name) c.eog_ids.push_back(static_cast<int32_t>(id));
  return std::make_unique<BpeTokenizer>(std::move(c));
}

void BpeTokenizer::to_gguf(gguf::Metadata& out) const {
  using gguf::Value;
  using gguf::ValueType;
  const bool byte_level = config_.kind == TokenizerConfig::Kind::byte_level;
  if (byte_level && config_.pre.gguf_name.empty())
    fail(ErrorCode::unsupported,
         "this tokenizer's pre-tokenizer matches no GGUF tokenizer.ggml.pre name");
  if (!byte_level && config_.split_on_metaspace)
    fail(ErrorCode::unsupported, "a Metaspace(split = true) tokenizer has no GGUF equivalent");
  out.set("tokenizer.ggml.model", Value::make_string(byte_level ? "gpt2" : "llama"));
  out.set("tokenizer.ggml.pre", Value::make_string(byte_level ? config_.pre.gguf_name : "default"));
  std::vector<Value> tokens, types;
  tokens.reserve(config_.tokens.size());
  types.reserve(config_.tokens.size());
  for (size_t id = 0; id < config_.tokens.size(); ++id) {
    tokens.push_back(Value::make_string(config_.tokens[id]));
    TokenType type = config_.token_types[id];
    if (special_[id] == 2 && type == TokenType::normal) type = TokenType::control;
    if (special_[id] == 1 && type == TokenType::normal) type = TokenType::user_defined;
    types.push_back(Value::make_i32(static_cast<int32_t>(type)));
  }
  out.set("tokenizer.ggml.tokens", Value::make_array(ValueType::string, std::move(tokens)));
  out.set("tokenizer.ggml.token_type", Value::make_array(ValueType::i32, std::move(types)));
  std::vector<Value> merges;
  for (const auto& [a, b] : model_->merges_in_rank_order())
    merges.push_back(Value::make_string(config_.tokens[a] + " " + config_.tokens[b]));
  out.set("tokenizer.ggml.merges", Value::make_array(ValueType::string, std::move(merges)));
  if (!byte_level) {
    std::vector<Value> scores;
    for (size_t id = 0; id < config_.tokens.size(); ++id)
      scores.push_back(Value::make_f32(id < config_.scores.size() ? config_.scores[id] : 0.0f));
    out.set("tokenizer.ggml.scores", Value::make_array(ValueType::f32, std::move(scores)));
    out.set("tokenizer.ggml.add_space_prefix",
            Value::make_bool(config_.prepend != TokenizerConfig::Prepend::never));
  }
  auto set_id = [&](const char* key, int32_t id) {
    if (id >= 0) out.set(key, Value::make_u32(static_cast<uint32_t>(id)));
  };
  set_id("tokenizer.ggml.bos_token_id", config_.bos_id);
  set_id("tokenizer.ggml.eos_token_id", config_.eos_id);
  set_id("tokenizer.ggml.padding_token_id", config_.pad_id);
  set_id("tokenizer.ggml.unknown_token_id", config_.model.unk_id);
  out.set("tokenizer.ggml.add_bos_token", Value::make_bool(config_.add_bos));
  out.set("tokenizer.ggml.add_eos_token", Value::make_bool(config_.add_eos));
  if (!config_.chat_template.empty())
    out.set("tokenizer.chat_template", Value::make_string(config_.chat_template));
}

}  // namespace memra
