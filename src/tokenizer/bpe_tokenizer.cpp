// Encoding and decoding for BpeTokenizer (see bpe_tokenizer.h).
#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "tokenizer/unicode_normalize.h"
#include "tokenizer/unicode_text.h"

namespace memra {

namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
// More joiners than this and piece boundaries are too rare to be worth finding.
constexpr size_t kMaxJoiners = 32;

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Text a token contributes when decoded (before any leading-space rule), as the `tokenizers`
// decoders produce it. They run on added tokens too: ByteLevel maps a token back to bytes when
// every character is in the byte map and keeps its UTF-8 otherwise; ByteFallback turns any
// "<0xHH>" token into that byte; SentencePiece's U+2581 becomes a space.
std::string decoded_text(const TokenizerConfig& config, const std::string& token) {
  if (config.kind == TokenizerConfig::Kind::byte_level) {
    std::string out;
    size_t i = 0;
    while (i < token.size()) {
      if (text::utf8_valid_length(token, i) == 0) return token;
      const int b = text::unicode_to_byte(text::utf8_next(token, i));
      if (b < 0) return token;
      out.push_back(static_cast<char>(b));
    }
    return out;
  }
  if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
    int b = -1;
    const auto r = std::from_chars(token.data() + 3, token.data() + 5, b, 16);
    if (r.ptr == token.data() + 5 && b >= 0) return std::string(1, static_cast<char>(b));
  }
  std::string out;
  for (size_t i = 0; i < token.size();) {
    if (token.compare(i, kMetaspace.size(), kMetaspace) == 0) {
      out.push_back(' ');
      i += kMetaspace.size();
    } else {
      out.push_back(token[i++]);
    }
  }
  return out;
}

}  // namespace

BpeTokenizer::BpeTokenizer(TokenizerConfig config) : config_(std::move(config)) {
  const size_t n = config_.tokens.size();
  if (n == 0) fail(ErrorCode::malformed_file, "tokenizer has an empty vocabulary");
  if (config_.token_types.size() != n) config_.token_types.resize(n, TokenType::normal);
  config_.model.byte_level = config_.kind == TokenizerConfig::Kind::byte_level;
  model_ =
      std::make_unique<BpeModel>(config_.tokens, config_.merges, config_.model, config_.merge_ids);
  config_.merges = {};  // the model holds them as id pairs now
  config_.merge_ids = {};

  auto check = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int32_t>(n))
      fail(ErrorCode::malformed_file, "tokenizer {} id {} is outside the vocabulary of {}", what,
           id, n);
  };
  check(config_.bos_id, "bos");
  check(config_.eos_id, "eos");
  check(config_.pad_id, "pad");
  for (int32_t id : config_.eog_ids) check(id, "end-of-generation");

  special_.assign(n, 0);
  added_by_byte_.assign(256, {});
  for (const AddedToken& t : config_.added) {
    check(t.id, "added token");
    if (t.id < 0 || t.content.empty()) continue;
    special_[t.id] = t.special ? 2 : 1;
    AddedGroup& group = added_by_byte_[static_cast<uint8_t>(t.content[0])];
    group.tokens.push_back(&t);
    if (t.content.size() == 1)
      group.has_single_byte = true;
    else
      group.second.set(static_cast<uint8_t>(t.content[1]));
  }
  for (auto& group : added_by_byte_)
    std::stable_sort(group.tokens.begin(), group.tokens.end(),
                     [](const AddedToken* a, const AddedToken* b) {
                       return a->content.size() > b->content.size();
                     });

  if (config_.kind == TokenizerConfig::Kind::sentencepiece) {
    for (size_t id = 0; id < n && metaspace_joiners_.size() <= kMaxJoiners; ++id) {
      const std::string& t = config_.tokens[id];
      for (size_t pos = t.find(kMetaspace, 1); pos != std::string::npos;
           pos = t.find(kMetaspace, pos + 1)) {
        size_t start = pos - 1;
        while (start > 0 && (static_cast<uint8_t>(t[start]) & 0xC0) == 0x80) --start;
        std::string before = t.substr(start, pos - start);
        if (before == kMetaspace) continue;
        if (std::find(metaspace_joiners_.begin(), metaspace_joiners_.end(), before) ==
            metaspace_joiners_.end())
          metaspace_joiners_.push_back(before);
      }
    }
  }
}

void BpeTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary of {}", id, n_vocab());
}

std::vector<BpeTokenizer::Segment> BpeTokenizer::split_added(
    std::string_view text, bool parse_special, std::span<const TextRange> plain) const {
  std::vector<Segment> segments;
  size_t plain_start = 0;
  size_t i = 0;
  size_t next_plain = 0;  // the first plain range that ends after i
  // A special token may be matched at [i, i + n) when no plain range overlaps it.
  auto special_allowed = [&](size_t n) {
    if (!parse_special) return false;
    while (next_plain < plain.size() && plain[next_plain].end <= i) ++next_plain;
    return next_plain == plain.size() || plain[next_plain].begin >= i + n;
  };
  while (i < text.size()) {
    const AddedToken* found = nullptr;
    const AddedGroup& group = added_by_byte_[static_cast<uint8_t>(text[i])];
    const bool second_ok =
        i + 1 < text.size() && group.second.test(static_cast<uint8_t>(text[i + 1]));
    if (group.tokens.empty() || (!second_ok && !group.has_single_byte)) {
      ++i;
      continue;
    }
    for (const AddedToken* t : group.tokens) {
      if (t->special && !special_allowed(t->content.size())) continue;
      if (text.compare(i, t->content.size(), t->content) == 0) {
        found = t;
        break;  // longest first
      }
    }
    if (!found) {
      ++i;
      continue;
    }
    size_t plain_end = i;
    if (found->lstrip)
      while (plain_end > plain_start && is_ascii_space(text[plain_end - 1])) --plain_end;
    if (plain_end > plain_start)
      segments.push_back({text.substr(plain_start, plain_end - plain_start), -1});
    segments.push_back({{}, found->id});
    i += found->content.size();
    if (found->rstrip)
      while (i < text.size() && is_ascii_space(text[i])) ++i;
    plain_start = i;
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), -1});
  return segments;
}

void BpeTokenizer::encode_sentencepiece(std::string_view normalized,
                                        std::vector<int32_t>& out) const {
  if (config_.split_on_metaspace || metaspace_joiners_.size() <= kMaxJoiners) {
    // A merge can cross the boundary before a U+2581 only if some token contains the character
    // before it followed by U+2581; elsewhere the text splits into independent (cacheable) words.
    size_t start = 0;
    size_t pos = normalized.find(kMetaspace, 1);
    while (pos != std::string::npos) {
      size_t prev = pos - 1;
      while (prev > 0 && (static_cast<uint8_t>(normalized[prev]) & 0xC0) == 0x80) --prev;
      const std::string_view before = normalized.substr(prev, pos - prev);
      const bool boundary =
          config_.split_on_metaspace ||
          (before != kMetaspace && std::find(metaspace_joiners_.begin(), metaspace_joiners_.end(),
                                             before) == metaspace_joiners_.end());
      if (boundary && pos > start) {
        model_->encode_word(normalized.substr(start, pos - start), true, out);
        start = pos;
      }
      pos = normalized.find(kMetaspace, pos + kMetaspace.size());
    }
    model_->encode_word(normalized.substr(start), true, out);
    return;
  }
  model_->encode_word(normalized, true, out);
}

void BpeTokenizer::encode_segment(std::string_view text, bool first,
                                  std::vector<int32_t>& out) const {
  std::string normalized_nfc;
  if (config_.nfc) {
    normalized_nfc = text::nfc(text);
    text = normalized_nfc;
  }
  if (config_.kind == TokenizerConfig::Kind::byte_level) {
    thread_local PreTokenized pre;
    pre.arena.clear();
    config_.pre.run(text, pre);
    for (std::string_view piece : pre.pieces) model_->encode_word(piece, pre.mapped, out);
    return;
  }
  std::string normalized;
  normalized.reserve(text.size() + 16);
  const bool prepend = config_.prepend == TokenizerConfig::Prepend::always ||
                       (config_.prepend == TokenizerConfig::Prepend::first && first);
  if (prepend && !text.empty()) normalized.append(kMetaspace);
  for (char c : text) {
    if (c == ' ' && config_.replace_spaces)
      normalized.append(kMetaspace);
    else
      normalized.push_back(c);
  }
  encode_sentencepiece(normalized, out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::span<const TextRange> plain = options.plain_ranges;
  for (size_t r = 0; r < plain.size(); ++r)
    if (plain[r].begin > plain[r].end || plain[r].end > text.size() ||
        (r > 0 && plain[r].begin < plain[r - 1].end))
      fail(ErrorCode::invalid_argument,
           "plain range {} [{}, {}) is not sorted, disjoint and inside the text of {} bytes", r,
           plain[r].begin, plain[r].end, text.size());
  std::string repaired;
  std::vector<TextRange> moved;
  if (!text::utf8_is_valid(text)) {
    // Each piece between range boundaries is repaired alone, so the ranges can follow the bytes
    // that U+FFFD replacements add.
    size_t at = 0;
    for (const TextRange& r : plain) {
      repaired += text::utf8_sanitize(text.substr(at, r.begin - at));
      const size_t begin = repaired.size();
      repaired += text::utf8_sanitize(text.substr(r.begin, r.end - r.begin));
      moved.push_back({begin, repaired.size()});
      at = r.end;
    }
    repaired += text::utf8_sanitize(text.substr(at));
    text = repaired;
    plain = moved;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && config_.add_bos && config_.bos_id >= 0) out.push_back(config_.bos_id);
  const auto segments = split_added(text, options.parse_special, plain);
  for (size_t s = 0; s < segments.size(); ++s) {
    if (segments[s].token >= 0)
      out.push_back(segments[s].token);
    else
      encode_segment(segments[s].text, s == 0, out);
  }
  if (options.add_special && config_.add_eos && config_.eos_id >= 0) out.push_back(config_.eos_id);
  return out;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return decoded_text(config_, config_.tokens[id]);
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special && special_[id] == 2) continue;
    out += token_bytes(id);
  }
  if (config_.strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  check_id(id);
  return config_.tokens[id];
}

std::vector<int32_t> BpeTokenizer::eos_ids() const {
  std::vector<int32_t> ids;
  if (config_.eos_id >= 0) ids.push_back(config_.eos_id);
  for (int32_t id : config_.eog_ids)
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

bool BpeTokenizer::is_special(int32_t id) const {
  check_id(id);
  return special_[id] == 2;
}

}  // namespace memra
