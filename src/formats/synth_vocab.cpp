// The synthetic vocabularies of `memra synth`: every byte (byte-level BPE) or byte-fallback token
// (SentencePiece), the shape's special tokens at the ids its real model uses, and generated
// word-like tokens filling the rest, each one a valid merge of two earlier tokens (so BPE
// reaches every token and both loaders accept the merge list or the scores).
#include "formats/synth_vocab.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace memra::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int32_t kNormal = 1;
constexpr int32_t kUnknown = 2;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kUnused = 5;
constexpr int32_t kByte = 6;

constexpr size_t kMaxTokenBytes = 16;  // generated tokens stay word-sized

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A fixed-key splitmix64 stream: the vocabulary is part of the shape, not of the weight seed.
struct VocabRng {
  uint64_t state = 0x5EED0F70CE11A3ULL;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;        // SentencePiece: merge priority, higher first
  std::vector<std::string> merges;  // byte-level: "left right" in rank order
  std::unordered_set<std::string> seen;

  int32_t add(std::string text, int32_t type, float score = 0.0f) {
    if (!seen.insert(text).second)
      fail(ErrorCode::internal, "synthetic vocabulary: token '{}' added twice", text);
    tokens.push_back(std::move(text));
    types.push_back(type);
    scores.push_back(score);
    return static_cast<int32_t>(tokens.size() - 1);
  }
};

// Adds tokens left + right until the vocabulary holds `target` tokens. Left parts come from a
// growing pool biased toward its early (short) entries, right parts are single letters, so tokens
// look like word pieces. Byte-level vocabularies record the merge; SentencePiece ones rank by
// score (later tokens score lower), from which loaders derive the same merges.
void grow(Vocab& v, std::vector<int32_t> pool, const std::vector<int32_t>& letters, size_t target,
          bool byte_level) {
  VocabRng rng;
  const size_t first = v.tokens.size();
  uint64_t attempts = 0;
  const uint64_t max_attempts = 64 * (target - first) + 1000000;
  while (v.tokens.size() < target) {
    if (++attempts > max_attempts)
      fail(ErrorCode::internal, "synthetic vocabulary: cannot generate {} tokens", target);
    const double u = rng.unit();
    const int32_t left = pool[static_cast<size_t>(u * u * static_cast<double>(pool.size()))];
    const int32_t right = letters[rng.next() % letters.size()];
    std::string text = v.tokens[left] + v.tokens[right];
    if (text.size() > kMaxTokenBytes || v.seen.contains(text)) continue;
    const float score = -static_cast<float>(v.tokens.size() - first + 1);
    if (byte_level) v.merges.push_back(v.tokens[left] + " " + v.tokens[right]);
    pool.push_back(v.add(std::move(text), kNormal, score));
  }
}

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 for U+0100 +
// n, listed in the order GPT-2 vocabularies put them first.
std::vector<std::pair<uint8_t, uint32_t>> byte_level_alphabet() {
  std::vector<std::pair<uint8_t, uint32_t>> out;
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  };
  for (int b = 0; b < 256; ++b)
    if (printable(b)) out.emplace_back(static_cast<uint8_t>(b), static_cast<uint32_t>(b));
  uint32_t n = 0;
  for (int b = 0; b < 256; ++b)
    if (!printable(b)) out.emplace_back(static_cast<uint8_t>(b), 256 + n++);
  return out;
}

// The 256 byte tokens plus generated merges, n_normal tokens in all.
Vocab byte_level_vocab(size_t n_normal) {
  Vocab v;
  int32_t id_of[256] = {};
  for (const auto& [byte, cp] : byte_level_alphabet()) id_of[byte] = v.add(utf8(cp), kNormal);
  std::vector<int32_t> pool{id_of[' ']};  // 'Ġ': a word-initial space
  std::vector<int32_t> letters;
  for (int c = 'a'; c <= 'z'; ++c) {
    pool.push_back(id_of[c]);
    pool.push_back(id_of[c - 'a' + 'A']);
    letters.push_back(id_of[c]);
  }
  grow(v, pool, letters, n_normal, true);
  return v;
}

void check_size(int64_t n_vocab, int64_t needed, const char* kind) {
  if (n_vocab < needed)
    fail(ErrorCode::internal, "synthetic {} vocabulary needs at least {} tokens, not {}", kind,
         needed, n_vocab);
}

// Qwen 2/3: <|endoftext|> 151643 (bos and pad), <|im_start|>, <|im_end|> (eos), then the
// converter's [PAD<id>] fillers up to the embedding's row count.
Vocab qwen_vocab(int64_t n_vocab) {
  constexpr int64_t kFirstSpecial = 151643;
  check_size(n_vocab, kFirstSpecial + 3, "qwen");
  Vocab v = byte_level_vocab(kFirstSpecial);
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) v.add(s, kControl);
  while (static_cast<int64_t>(v.tokens.size()) < n_vocab)
    v.add("[PAD" + std::to_string(v.tokens.size()) + "]", kUnused);
  return v;
}

// Llama 3: 128000 ordinary tokens, then 256 specials (<|begin_of_text|> 128000, <|eot_id|>
// 128009, ... reserved ones numbered as Meta numbers them).
Vocab llama3_vocab(int64_t n_vocab) {
  constexpr int64_t kFirstSpecial = 128000;
  check_size(n_vocab, kFirstSpecial + 11, "llama3");
  Vocab v = byte_level_vocab(kFirstSpecial);
  for (const char* s :
       {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"})
    v.add(s, kControl);
  for (int k = 3; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++k)
    v.add("<|reserved_special_token_" + std::to_string(k) + "|>", kControl);
  return v;
}

// Gemma 3: <pad> <eos> <bos> <unk> <mask> [multimodal] <unused0..98> <start_of_turn> (105)
// <end_of_turn> (106), the 256 byte-fallback tokens, the metaspace and printable ASCII, then
// generated pieces ranked by score.
Vocab gemma_vocab(int64_t n_vocab) {
  Vocab v;
  for (const char* s : {"<pad>", "<eos>", "<bos>"}) v.add(s, kControl, -1000.0f);
  v.add("<unk>", kUnknown, -1000.0f);
  v.add("<mask>", kControl, -1000.0f);
  v.add("[multimodal]", kUserDefined, -1000.0f);
  for (int k = 0; k < 99; ++k) v.add("<unused" + std::to_string(k) + ">", kControl, -1000.0f);
  v.add("<start_of_turn>", kControl, -1000.0f);
  v.add("<end_of_turn>", kControl, -1000.0f);
  for (int b = 0; b < 256; ++b) v.add(fmt::format("<0x{:02X}>", b), kByte);
  const int32_t metaspace = v.add(utf8(0x2581), kNormal);
  int32_t first_char = -1;
  for (int c = 0x21; c <= 0x7E; ++c) {
    const int32_t id = v.add(std::string(1, static_cast<char>(c)), kNormal);
    if (c == 0x21) first_char = id;
  }
  check_size(n_vocab, static_cast<int64_t>(v.tokens.size()) + 1000, "gemma");
  std::vector<int32_t> pool{metaspace};
  std::vector<int32_t> letters;
  for (int c = 'a'; c <= 'z'; ++c) {
    pool.push_back(first_char + (c - 0x21));
    pool.push_back(first_char + (c - 'a' + 'A' - 0x21));
    letters.push_back(first_char + (c - 0x21));
  }
  grow(v, pool, letters, static_cast<size_t>(n_vocab), false);
  return v;
}

constexpr const char* kChatMl =
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|im_start|>assistant\\n' }}{%- endif %}";
constexpr const char* kLlama3Chat =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{%- endfor %}{%- if "
    "add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- "
    "endif %}";
constexpr const char* kGemmaChat =
    "{{- bos_token }}{%- for message in messages %}{%- set role = 'model' if message['role'] == "
    "'assistant' else message['role'] %}{{- '<start_of_turn>' + role + '\\n' + "
    "message['content'] + '<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<start_of_turn>model\\n' }}{%- endif %}";

Value string_array(const std::vector<std::string>& items) {
  std::vector<Value> out;
  out.reserve(items.size());
  for (const std::string& s : items) out.push_back(Value::make_string(s));
  return Value::make_array(ValueType::string, std::move(out));
}

}  // namespace

void vocab_write(VocabKind kind, int64_t n_vocab, gguf::Metadata& out) {
  const Vocab v = kind == VocabKind::qwen     ? qwen_vocab(n_vocab)
                  : kind == VocabKind::llama3 ? llama3_vocab(n_vocab)
                                              : gemma_vocab(n_vocab);
  const bool byte_level = kind != VocabKind::gemma;
  out.set("tokenizer.ggml.model", Value::make_string(byte_level ? "gpt2" : "llama"));
  out.set("tokenizer.ggml.pre", Value::make_string(kind == VocabKind::qwen     ? "qwen2"
                                                   : kind == VocabKind::llama3 ? "llama-bpe"
                                                                               : "default"));
  out.set("tokenizer.ggml.tokens", string_array(v.tokens));
  std::vector<Value> types;
  types.reserve(v.types.size());
  for (int32_t t : v.types) types.push_back(Value::make_i32(t));
  out.set("tokenizer.ggml.token_type", Value::make_array(ValueType::i32, std::move(types)));
  if (byte_level) {
    out.set("tokenizer.ggml.merges", string_array(v.merges));
  } else {
    std::vector<Value> scores;
    scores.reserve(v.scores.size());
    for (float s : v.scores) scores.push_back(Value::make_f32(s));
    out.set("tokenizer.ggml.scores", Value::make_array(ValueType::f32, std::move(scores)));
  }
  auto set_id = [&](const char* key, uint32_t id) { out.set(key, Value::make_u32(id)); };
  if (kind == VocabKind::qwen) {
    set_id("tokenizer.ggml.bos_token_id", 151643);
    set_id("tokenizer.ggml.eos_token_id", 151645);
    set_id("tokenizer.ggml.padding_token_id", 151643);
  } else if (kind == VocabKind::llama3) {
    set_id("tokenizer.ggml.bos_token_id", 128000);
    set_id("tokenizer.ggml.eos_token_id", 128009);
    set_id("tokenizer.ggml.padding_token_id", 128004);
  } else {
    set_id("tokenizer.ggml.bos_token_id", 2);
    set_id("tokenizer.ggml.eos_token_id", 1);
    set_id("tokenizer.ggml.unknown_token_id", 3);
    set_id("tokenizer.ggml.padding_token_id", 0);
    out.set("tokenizer.ggml.add_space_prefix", Value::make_bool(false));
  }
  out.set("tokenizer.ggml.add_bos_token", Value::make_bool(kind != VocabKind::qwen));
  out.set("tokenizer.ggml.add_eos_token", Value::make_bool(false));
  out.set("tokenizer.chat_template", Value::make_string(kind == VocabKind::qwen     ? kChatMl
                                                        : kind == VocabKind::llama3 ? kLlama3Chat
                                                                                    : kGemmaChat));
}

void vocab_copy(const std::string& path, int64_t n_vocab, gguf::Metadata& out) {
  const gguf::File file = gguf::File::open(path);
  const Value* tokens = file.metadata().find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != ValueType::array)
    fail(ErrorCode::invalid_argument, "--vocab-from {}: no tokenizer.ggml.tokens array", path);
  const auto n_tokens = static_cast<int64_t>(std::get<gguf::Array>(tokens->data).items.size());
  if (n_tokens != n_vocab)
    fail(ErrorCode::invalid_argument,
         "--vocab-from {}: {} tokens, but the shape's vocabulary (token_embd's rows) is {}", path,
         n_tokens, n_vocab);
  for (const gguf::KeyValue& kv : file.metadata().entries())
    if (kv.first.starts_with("tokenizer.")) out.set(kv.first, kv.second);
}

}  // namespace memra::synth
