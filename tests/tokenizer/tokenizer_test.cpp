// Tokenizer unit tests: UTF-8 repair, a tiny byte-level BPE and SentencePiece vocabulary built in
// memory (GGUF metadata and tokenizer.json), special-token gating, streaming, GGUF round trip and
// refusal of malformed or unsupported tokenizers, and the word cache's bound and thread safety. HF
// parity lives in tests/python.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_normalize.h"
#include "tokenizer/unicode_text.h"

namespace memra {
namespace {

using gguf::Value;
using gguf::ValueType;

std::vector<Value> strings(const std::vector<std::string>& v) {
  std::vector<Value> out;
  for (const auto& s : v) out.push_back(Value::make_string(s));
  return out;
}

// Byte-level vocabulary: the 256 byte-map characters, "Ġ"+"h" style merges, one special token.
gguf::Metadata gpt2_metadata() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string t;
    text::utf8_append(t, text::byte_to_unicode()[b]);
    tokens.push_back(t);
  }
  const std::vector<std::string> merges = {"h i", "Ġ hi", "Ġhi !"};
  for (const char* t : {"hi", "\xC4\xA0hi", "\xC4\xA0hi!", "<|end|>"}) tokens.push_back(t);
  std::vector<Value> types(tokens.size(), Value::make_i32(1));
  types.back() = Value::make_i32(3);
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", Value::make_string("gpt2"));
  md.set("tokenizer.ggml.pre", Value::make_string("gpt-2"));
  md.set("tokenizer.ggml.tokens", Value::make_array(ValueType::string, strings(tokens)));
  md.set("tokenizer.ggml.token_type", Value::make_array(ValueType::i32, types));
  md.set("tokenizer.ggml.merges", Value::make_array(ValueType::string, strings(merges)));
  md.set("tokenizer.ggml.eos_token_id", Value::make_u32(static_cast<uint32_t>(tokens.size() - 1)));
  return md;
}

// SentencePiece vocabulary with byte fallback: <unk>, <s>, </s>, 256 byte tokens, pieces.
gguf::Metadata spm_metadata() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<Value> types = {Value::make_i32(2), Value::make_i32(3), Value::make_i32(3)};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(Value::make_i32(6));
  }
  for (const char* t :
       {"\xE2\x96\x81", "h", "e", "l", "o", "he", "ll", "llo", "hello", "\xE2\x96\x81hello"}) {
    tokens.push_back(t);
    types.push_back(Value::make_i32(1));
  }
  std::vector<Value> scores;
  for (size_t i = 0; i < tokens.size(); ++i)
    scores.push_back(Value::make_f32(-static_cast<float>(i)));
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", Value::make_string("llama"));
  md.set("tokenizer.ggml.tokens", Value::make_array(ValueType::string, strings(tokens)));
  md.set("tokenizer.ggml.token_type", Value::make_array(ValueType::i32, types));
  md.set("tokenizer.ggml.scores", Value::make_array(ValueType::f32, scores));
  md.set("tokenizer.ggml.bos_token_id", Value::make_u32(1));
  md.set("tokenizer.ggml.eos_token_id", Value::make_u32(2));
  md.set("tokenizer.ggml.unknown_token_id", Value::make_u32(0));
  return md;
}

// Bytes the heap has handed out and not taken back (glibc; nullopt elsewhere or under ASan, whose
// allocator glibc's figures do not describe).
std::optional<size_t> heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return std::nullopt;
#elif defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  return std::nullopt;
#endif
}

// "w0 w1 ... w{n-1}" in texts of 500 words: more distinct words than the cache has slots.
std::vector<std::string> distinct_word_texts(int n) {
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    if (i % 500 == 0) texts.emplace_back();
    texts.back() += (i % 500 ? " w" : "w") + std::to_string(i);
  }
  return texts;
}

TEST(WordCache, ThreadsShareOneCacheAndAllocateNoneOfTheirOwn) {
  // A server encodes on a thread per connection: a table per thread cost each connection a
  // megabyte, spread over glibc's arenas, and RSS stayed above its baseline after load.
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  EXPECT_LE(BpeModel::word_cache_bytes(), size_t{4} << 20);
  std::optional<size_t> grew;
  std::thread([&] {
    std::vector<int32_t> ids;
    ids.reserve(64);  // the thread's first allocation: it gets its arena and tcache here
    const auto before = heap_in_use();
    ids = tok->encode("hi hi! hello there", {false, false});
    const auto after = heap_in_use();
    if (before && after) grew = *after > *before ? *after - *before : 0;
  }).join();
  if (!grew) GTEST_SKIP() << "no glibc heap figures";
  EXPECT_LT(*grew, size_t{128} << 10);  // the thread's pre-tokenizer scratch, no word table
}

TEST(WordCache, BoundedHoweverManyDistinctWords) {
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const std::vector<std::string> texts = distinct_word_texts(40000);
  std::vector<int32_t> ids = tok->encode(texts[0], {false, false});
  ids.reserve(ids.size() * 4);
  const auto before = heap_in_use();
  for (const std::string& text : texts) ids = tok->encode(text, {false, false});
  const auto after = heap_in_use();
  if (!before || !after) GTEST_SKIP() << "no glibc heap figures";
  EXPECT_LT(*after > *before ? *after - *before : 0, size_t{64} << 10);
}

TEST(WordCache, ConcurrentEncodesMatchOneThread) {
  for (auto md : {gpt2_metadata(), spm_metadata()}) {
    auto tok = Tokenizer::from_gguf(md);
    const std::vector<std::string> texts = distinct_word_texts(20000);
    std::vector<std::vector<int32_t>> want;
    {
      auto fresh = Tokenizer::from_gguf(md);  // its own cold cache
      for (const std::string& text : texts) want.push_back(fresh->encode(text, {false, false}));
    }
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 3; ++round)
          for (size_t i = 0; i < texts.size(); ++i) {
            const size_t k = (i + static_cast<size_t>(t) * 7) % texts.size();
            if (tok->encode(texts[k], {false, false}) != want[k]) ++mismatches;
          }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
  }
}

TEST(Utf8, SanitizeMatchesPythonReplace) {
  EXPECT_EQ(text::utf8_sanitize("ok"), "ok");
  EXPECT_EQ(text::utf8_sanitize("\xE2\x82("), "\xEF\xBF\xBD(");
  EXPECT_EQ(text::utf8_sanitize("\xF0\x9F\xA6\x99\xF0"), "\xF0\x9F\xA6\x99\xEF\xBF\xBD");
  EXPECT_EQ(text::utf8_sanitize("\xED\xA0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");                       // surrogate
  EXPECT_EQ(text::utf8_sanitize("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(text::utf8_incomplete_tail("a\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(text::utf8_incomplete_tail("a\xFF"), 0u);
}

TEST(ByteLevel, EncodesMergesAndRoundTrips) {
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const auto ids = tok->encode("hi hi!", {false, false});
  ASSERT_EQ(ids.size(), 3u);  // the GPT-2 regex splits "hi", " hi", "!"
  EXPECT_EQ(tok->token_text(ids[0]), "hi");
  EXPECT_EQ(tok->token_text(ids[1]), "\xC4\xA0hi");
  EXPECT_EQ(tok->token_text(ids[2]), "!");
  EXPECT_EQ(tok->decode(ids, false), "hi hi!");
  const std::string emoji_bad = "x \xF0\x9F\xA6\x99 \xFF";
  EXPECT_EQ(tok->decode(tok->encode(emoji_bad, {false, false}), false),
            text::utf8_sanitize(emoji_bad));
}

TEST(ByteLevel, SpecialTokensMatchOnlyWhenAllowed) {
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const int32_t end = tok->n_vocab() - 1;
  const auto parsed = tok->encode("hi<|end|>", {false, true});
  EXPECT_EQ(parsed.back(), end);
  const auto literal = tok->encode("hi<|end|>", {false, false});
  EXPECT_EQ(std::count(literal.begin(), literal.end(), end), 0);
  EXPECT_EQ(tok->decode(literal, false), "hi<|end|>");
  EXPECT_TRUE(tok->is_special(end));
  EXPECT_EQ(tok->decode(parsed, true), "hi");
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{end});
}

// Plain ranges (a chat message's bytes inside a rendered template): a special token is matched
// only where none of its bytes is plain; everything else tokenizes as it would without ranges.
TEST(ByteLevel, PlainRangesKeepSpecialTokensOutOfClientText) {
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const int32_t end = tok->n_vocab() - 1;
  auto encode = [&](std::string_view text, std::vector<TextRange> plain) {
    return tok->encode(text, {.add_special = false, .parse_special = true, .plain_ranges = plain});
  };
  auto specials = [&](const std::vector<int32_t>& ids) {
    return std::count(ids.begin(), ids.end(), end);
  };
  const std::vector<int32_t> literal = tok->encode("<|end|>", {false, false});
  // Content that is exactly a special token string, then the template's own.
  std::vector<int32_t> want = literal;
  want.push_back(end);
  EXPECT_EQ(encode("<|end|><|end|>", {{0, 7}}), want);
  // A special token split across client text and template text, either way round, or with one
  // plain byte inside it, is text.
  EXPECT_EQ(encode("<|end|>", {{0, 3}}), literal);
  EXPECT_EQ(encode("<|end|>", {{3, 7}}), literal);
  EXPECT_EQ(encode("<|end|>", {{6, 7}}), literal);
  EXPECT_EQ(encode("<|end|>", {{2, 3}}), literal);
  // Ranges that only touch it (end where it begins, begin where it ends) do not.
  EXPECT_EQ(encode("hi<|end|>hi", {{0, 2}, {9, 11}}), tok->encode("hi<|end|>hi", {false, true}));
  EXPECT_EQ(specials(encode("hi<|end|>hi", {{0, 2}, {9, 11}})), 1);
  // A rejected special's bytes merge with their neighbours like any text: the ids are those of
  // the whole run encoded without special tokens.
  EXPECT_EQ(encode("hi<|end|> hi!", {{0, 13}}), tok->encode("hi<|end|> hi!", {false, false}));
  // Text without special-token strings encodes the same with or without ranges, wherever they
  // fall (a merge across a range boundary is kept: " hi!" is one token with "!" plain).
  const std::string plain_text = "hi hi! hi hi!";
  const auto base = tok->encode(plain_text, {false, true});
  for (size_t b = 0; b <= plain_text.size(); ++b)
    for (size_t e = b; e <= plain_text.size(); ++e)
      ASSERT_EQ(encode(plain_text, {{b, e}}), base) << b << " " << e;
  // Multi-byte UTF-8 next to a boundary: the range ends inside "é" or covers the emoji.
  const std::string utf8 = "\xC3\xA9<|end|>\xF0\x9F\xA6\x99";
  EXPECT_EQ(specials(encode(utf8, {{0, 2}, {9, 13}})), 1);
  EXPECT_EQ(specials(encode(utf8, {{0, 3}})), 0);
  EXPECT_EQ(tok->decode(encode(utf8, {{1, 4}}), false), utf8);
  // Invalid UTF-8 is repaired piece by piece: the ranges follow the U+FFFD bytes it adds.
  EXPECT_EQ(specials(encode("\xFF<|end|>", {{0, 1}})), 1);
  EXPECT_EQ(specials(encode("\xFF<|end|>", {{1, 2}})), 0);
  EXPECT_EQ(specials(encode("\xFF\xFE<|end|>\xFF", {{0, 1}, {9, 10}})), 1);
  // Same input, same ids (the prefix cache keys on them).
  EXPECT_EQ(encode("hi<|end|><|end|>", {{2, 9}}), encode("hi<|end|><|end|>", {{2, 9}}));
  // Without parse_special nothing is matched anyway; malformed ranges are refused.
  EXPECT_EQ(tok->encode("<|end|>", {.add_special = false,
                                    .parse_special = false,
                                    .plain_ranges = std::vector<TextRange>{{0, 1}}}),
            literal);
  EXPECT_THROW(encode("hi", {{0, 3}}), Error);
  EXPECT_THROW(encode("hi hi", {{2, 4}, {1, 3}}), Error);
  EXPECT_THROW(encode("hi", {{2, 1}}), Error);
}

TEST(SentencePiece, PlainRangesKeepSpecialTokensOutOfClientText) {
  auto tok = Tokenizer::from_gguf(spm_metadata());
  auto encode = [&](std::string_view text, std::vector<TextRange> plain) {
    return tok->encode(text, {.add_special = false, .parse_special = true, .plain_ranges = plain});
  };
  const auto ids = encode("hello<s>hello</s>", {{5, 8}});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 0);  // <s> is the client's
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);  // </s> the template's
  EXPECT_EQ(tok->decode(ids, false), "hello<s>hello</s>");
  EXPECT_EQ(encode("hello hello", {{3, 8}}), tok->encode("hello hello", {false, true}));
}

TEST(StreamDecoder, EmitsOnlyWholeCharactersAndEqualsDecode) {
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const std::string text = "hi \xF0\x9F\xA6\x99 hi! \xE4\xBD\xA0";
  const auto ids = tok->encode(text, {false, false});
  StreamDecoder stream(*tok, false);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(text::utf8_is_valid(piece));
    streamed += piece;
  }
  streamed += stream.flush();
  EXPECT_EQ(streamed, text);
  StreamDecoder truncated(*tok, false);
  EXPECT_EQ(truncated.push(ids[1]), " ");
  EXPECT_EQ(truncated.push(0xF0), "");  // the byte token 0xF0 starts a 4-byte sequence: held back
  EXPECT_EQ(truncated.flush(), "\xEF\xBF\xBD");
}

TEST(StreamDecoder, RandomIdsStreamEqualsRepairedDecode) {
  // Arbitrary id sequences (as a model may emit): byte tokens that split or break characters,
  // specials, pieces. Streaming must equal the repaired decode of all ids, for both families.
  for (const auto& md : {gpt2_metadata(), spm_metadata()}) {
    auto tok = Tokenizer::from_gguf(md);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<int32_t> ids(rng() % 12);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(tok->n_vocab()));
      for (bool skip : {false, true}) {
        StreamDecoder stream(*tok, skip);
        std::string streamed;
        for (int32_t id : ids) {
          const std::string piece = stream.push(id);
          ASSERT_TRUE(text::utf8_is_valid(piece));
          streamed += piece;
        }
        streamed += stream.flush();
        ASSERT_EQ(streamed, text::utf8_sanitize(tok->decode(ids, skip)));
      }
    }
  }
}

TEST(SentencePiece, ScoresMergesByteFallbackAndPrefixSpace) {
  auto tok = Tokenizer::from_gguf(spm_metadata());
  const auto ids = tok->encode("hello \xC3\xA9", {true, false});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 1);                                     // BOS
  EXPECT_EQ(tok->token_text(ids[1]), "\xE2\x96\x81hello");  // prefix space merged in
  EXPECT_EQ(tok->token_text(ids[ids.size() - 2]), "<0xC3>");
  EXPECT_EQ(tok->token_text(ids.back()), "<0xA9>");
  EXPECT_EQ(tok->decode(ids, true), "hello \xC3\xA9");
}

TEST(Gguf, RoundTripKeepsIds) {
  for (const auto& md : {gpt2_metadata(), spm_metadata()}) {
    auto tok = Tokenizer::from_gguf(md);
    gguf::Metadata written;
    tok->to_gguf(written);
    auto again = Tokenizer::from_gguf(written);
    const std::string text = "hello hi hi! <|end|> \xC3\xA9\xF0\x9F\xA6\x99";
    EXPECT_EQ(tok->encode(text, {true, true}), again->encode(text, {true, true}));
  }
}

ErrorCode error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;
}

TEST(Refusals, UnsupportedAndMalformedTokenizers) {
  gguf::Metadata bert = gpt2_metadata();
  bert.set("tokenizer.ggml.model", Value::make_string("bert"));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(bert); }), ErrorCode::unsupported);
  gguf::Metadata t5 = spm_metadata();  // SentencePiece Unigram (nomic-bert-moe): not implemented
  t5.set("tokenizer.ggml.model", Value::make_string("t5"));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(t5); }), ErrorCode::unsupported);
  gguf::Metadata pre = gpt2_metadata();
  pre.set("tokenizer.ggml.pre", Value::make_string("no-such-pre"));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(pre); }), ErrorCode::unsupported);
  gguf::Metadata bad_merge = gpt2_metadata();
  bad_merge.set("tokenizer.ggml.merges", Value::make_array(ValueType::string, strings({"zz qq"})));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(bad_merge); }), ErrorCode::malformed_file);
  gguf::Metadata bad_id = gpt2_metadata();
  bad_id.set("tokenizer.ggml.eos_token_id", Value::make_u32(1u << 30));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(bad_id); }), ErrorCode::malformed_file);
  auto tok = Tokenizer::from_gguf(gpt2_metadata());
  const int32_t out_of_range[] = {tok->n_vocab()};
  EXPECT_EQ(error_of([&] { tok->decode(out_of_range, false); }), ErrorCode::invalid_argument);
}

TEST(SentencePiece, Gemma4UsesItsMergesAndNoPrefixSpace) {
  // tokenizer.ggml.model "gemma4": the same pieces, but explicit merges (only these, so "hello"
  // cannot form) and add_space_prefix false.
  gguf::Metadata md = spm_metadata();
  md.set("tokenizer.ggml.model", Value::make_string("gemma4"));
  md.set("tokenizer.ggml.add_space_prefix", Value::make_bool(false));
  EXPECT_EQ(error_of([&] { Tokenizer::from_gguf(md); }), ErrorCode::malformed_file);  // no merges
  md.set("tokenizer.ggml.merges",
         Value::make_array(ValueType::string, strings({"h e", "l l", "ll o"})));
  auto tok = Tokenizer::from_gguf(md);
  std::vector<std::string> pieces;
  for (int32_t id : tok->encode("hello hello", {false, false}))
    pieces.push_back(tok->token_text(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"he", "llo", "\xE2\x96\x81", "he", "llo"}));
  EXPECT_EQ(tok->decode(tok->encode("hello hello", {false, false}), false), "hello hello");
}

TEST(Refusals, TokenizerJson) {
  const auto dir = std::filesystem::temp_directory_path() / "memra_tokenizer_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& body) { std::ofstream(dir / "tokenizer.json") << body; };
  write("{not json");
  EXPECT_EQ(error_of([&] { Tokenizer::from_hf_folder(dir.string()); }), ErrorCode::malformed_file);
  write(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  EXPECT_EQ(error_of([&] { Tokenizer::from_hf_folder(dir.string()); }), ErrorCode::unsupported);
  write(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 5}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"}})");
  EXPECT_EQ(error_of([&] { Tokenizer::from_hf_folder(dir.string()); }), ErrorCode::malformed_file);
  write(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "NFKC"}})");
  EXPECT_EQ(error_of([&] { Tokenizer::from_hf_folder(dir.string()); }), ErrorCode::unsupported);
  std::filesystem::remove_all(dir);
}

TEST(Normalizer, NfcFromTokenizerJsonOrRefused) {
  const auto dir = std::filesystem::temp_directory_path() / "memra_tokenizer_nfc_test";
  std::filesystem::create_directories(dir);
  // Byte-level vocabulary of the 256 byte characters, NFC normalizer, no merges.
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    std::string t;
    text::utf8_append(t, text::byte_to_unicode()[b]);
    vocab[t] = b;
  }
  const nlohmann::json tj = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  if (text::nfc_available()) {
    auto tok = Tokenizer::from_hf_folder(dir.string());
    EXPECT_EQ(tok->encode("e\xCC\x81", {false, false}), tok->encode("\xC3\xA9", {false, false}));
    gguf::Metadata md;
    tok->to_gguf(md);  // the ByteLevel(use_regex) pipeline is GGUF's "gpt-2" preset
    EXPECT_EQ(md.get_string("tokenizer.ggml.pre").value_or(""), "gpt-2");
  } else {
    EXPECT_EQ(error_of([&] { Tokenizer::from_hf_folder(dir.string()); }), ErrorCode::unsupported);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memra
