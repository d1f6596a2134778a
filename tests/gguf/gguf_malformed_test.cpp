// The malformed-file corpus and mutation sweeps: every broken file fails with Error naming the
// field and offset, never a crash (this test also runs under ASan + UBSan, label asan).
#include <gtest/gtest.h>

#include <set>

#include "gguf_test_files.h"

namespace memra::gguf::testing {
namespace {

// Parses bytes; returns the error, or nullopt when the file parsed.
std::optional<Error> parse_error(const std::vector<uint8_t>& bytes, const ReadLimits& limits = {}) {
  try {
    File::parse(bytes, limits);
    return std::nullopt;
  } catch (const Error& e) {
    return e;
  }
}

TEST(GgufMalformed, ValidBaseParses) {
  const std::vector<uint8_t> bytes = build(valid_raw_file());
  const File f = File::parse(bytes);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.data_offset(), 256u);
  EXPECT_EQ(f.tensors()[1].n_bytes, 34u);
  EXPECT_EQ(f.metadata().get_float_array("tokenizer.ggml.scores")->at(1), -1.0);
  RawFile v2 = valid_raw_file();  // version 2 has the same layout as 3
  v2.version = 2;
  const std::vector<uint8_t> v2_bytes = build(v2);
  EXPECT_EQ(File::parse(v2_bytes).version(), 2u);
}

TEST(GgufMalformed, CorpusFailsNamingTheField) {
  const std::vector<MalformedCase> corpus = malformed_corpus();
  EXPECT_GE(corpus.size(), 40u);
  std::set<std::string> names;
  for (const MalformedCase& c : corpus) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name";
    const std::optional<Error> err = parse_error(c.bytes);
    ASSERT_TRUE(err.has_value()) << "parsed without error";
    EXPECT_EQ(err->code(), c.code) << err->what();
    const std::string msg = err->what();
    for (const std::string& want : c.expect) EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset"), std::string::npos) << msg;
  }
}

// Every prefix of a valid file either parses or fails with Error (no other exception, no crash).
TEST(GgufMalformed, TruncationSweep) {
  const std::vector<uint8_t> full = build(valid_raw_file());
  size_t failures = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    const std::optional<Error> err = parse_error(cut);
    if (err) ++failures;
  }
  // The data section ends exactly at the last tensor's end, so every strict prefix is invalid.
  EXPECT_EQ(failures, full.size());
}

// Each byte replaced by a few hostile values: parse or clean Error, never a crash.
TEST(GgufMalformed, ByteMutationSweep) {
  const std::vector<uint8_t> full = build(valid_raw_file());
  size_t failures = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x7f}, uint8_t{0xff}}) {
      std::vector<uint8_t> m = full;
      m[i] = v;
      if (parse_error(m)) ++failures;
    }
  }
  EXPECT_GT(failures, 200u);  // most header and metadata bytes matter; data bytes do not
}

TEST(GgufMalformed, TotalItemLimitAcrossArrays) {
  RawFile f = valid_raw_file();
  for (int k = 0; k < 3; ++k) {
    std::vector<uint8_t> arr = le_u32(0);  // ARRAY of UINT8, 10 items
    for (uint8_t b : le_u64(10)) arr.push_back(b);
    arr.resize(arr.size() + 10, 1);
    f.kvs.push_back({"x.a" + std::to_string(k), 9, arr});
  }
  ReadLimits limits;
  limits.max_total_items = 25;  // 3 + 10 + 10 fit; the third array goes over
  const std::optional<Error> err = parse_error(build(f), limits);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(std::string(err->what()).find("metadata key 'x.a2' array count"), std::string::npos)
      << err->what();
  EXPECT_FALSE(parse_error(build(f)).has_value());
}

TEST(GgufMalformed, GettersRefuseTypeConfusion) {
  // A1.2: scores/token_type declared with a narrower element type must not be reinterpreted.
  RawFile f = valid_raw_file();
  std::vector<uint8_t> tokens = le_u32(0);  // tokens as ARRAY of UINT8
  for (uint8_t b : le_u64(2)) tokens.push_back(b);
  tokens.push_back(1);
  tokens.push_back(2);
  f.kvs.push_back({"tokenizer.ggml.tokens", 9, tokens});
  f.kvs.push_back({"x.name", 4, le_u32(3)});
  const std::vector<uint8_t> bytes = build(f);
  const File file = File::parse(bytes);
  const Metadata& md = file.metadata();
  EXPECT_THROW(md.get_string_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(md.get_string_array("tokenizer.ggml.scores"), Error);
  EXPECT_THROW(md.get_int_array("tokenizer.ggml.scores"), Error);
  EXPECT_THROW(md.get_string("x.name"), Error);
  EXPECT_THROW(md.get_bool("x.name"), Error);
  EXPECT_EQ(md.get_int("x.name"), 3);
  EXPECT_EQ(md.get_float("x.name"), 3.0);
  EXPECT_FALSE(md.get_int("x.missing").has_value());
  try {
    md.require_int("x.missing");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_found);
    EXPECT_NE(std::string(e.what()).find("x.missing"), std::string::npos);
  }
}

TEST(GgufMalformed, OpenNamesThePath) {
  try {
    File::open("/nonexistent/dir/model.gguf");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_found);
  }
}

}  // namespace
}  // namespace memra::gguf::testing
