// safetensors reader: valid files parse with the right views; each malformed case in the corpus
// fails with Error(malformed_file / unsupported) whose message names the offending field.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"

namespace memra::safetensors {
namespace {

// 8-byte little-endian header size, the header text, then data_size bytes 0, 1, 2, ...
std::vector<uint8_t> make_file(const std::string& header, size_t data_size,
                               uint64_t declared_size = UINT64_MAX) {
  const uint64_t n = declared_size == UINT64_MAX ? header.size() : declared_size;
  std::vector<uint8_t> out(8 + header.size() + data_size);
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  for (size_t i = 0; i < header.size(); ++i) out[8 + i] = static_cast<uint8_t>(header[i]);
  for (size_t i = 0; i < data_size; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i);
  return out;
}

std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape,
                   uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST(Safetensors, ParsesValidFile) {
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"}," + tensor("w", "F32", "[2,3]", 0, 24) + "," +
      tensor("b", "BF16", "[3]", 24, 30) + "," + tensor("s", "I64", "[]", 30, 38) + "," +
      tensor("z", "F16", "[0,4]", 38, 38) + "}    ";
  const auto bytes = make_file(header, 38);
  const File f = File::parse(bytes, "t.safetensors");
  ASSERT_EQ(f.entries().size(), 4u);
  ASSERT_EQ(f.metadata().size(), 1u);
  EXPECT_EQ(f.metadata()[0].second, "pt");
  const Entry* w = f.find("w");
  ASSERT_NE(w, nullptr);
  const TensorView v = f.view(*w);
  EXPECT_EQ(v.n_dims, 2);
  EXPECT_EQ(v.ne[0], 3u);  // innermost first (ggml order)
  EXPECT_EQ(v.ne[1], 2u);
  EXPECT_EQ(v.n_bytes, 24u);
  EXPECT_EQ(static_cast<const uint8_t*>(v.data), bytes.data() + 8 + header.size());
  EXPECT_EQ(f.view(*f.find("s")).n_dims, 0);
  EXPECT_EQ(f.find("b")->dtype, DType::bf16);
  EXPECT_EQ(f.view(*f.find("z")).n_bytes, 0u);
}

TEST(Safetensors, EmptyHeaderWithNoData) {
  const auto bytes = make_file("{}", 0);
  EXPECT_TRUE(File::parse(bytes).entries().empty());
}

struct BadCase {
  const char* what;
  std::vector<uint8_t> bytes;
  const char* expect;  // substring of the error message
};

// One entry per format rule; a single table (longer than a function should be) reads as a corpus.
std::vector<BadCase> bad_cases() {
  const std::string ok = tensor("a", "F32", "[2]", 0, 8);
  std::vector<BadCase> c;
  c.push_back({"short file", {1, 0, 0}, "header size"});
  c.push_back({"huge header size", make_file("{}", 0, 200'000'000), "exceeds"});
  c.push_back({"header past end", make_file("{}", 0, 50), "runs past the end"});
  c.push_back({"not an object", make_file("[1]", 0), "must start with '{'"});
  c.push_back({"empty header", make_file("", 0), "must start with '{'"});
  c.push_back({"invalid json", make_file("{\"a\":", 0), "invalid JSON"});
  c.push_back({"invalid utf8", make_file("{\"\xff\xfe\":1}", 0), "invalid JSON"});
  c.push_back({"duplicate key", make_file("{" + ok + "," + ok + "}", 8), "duplicate JSON key 'a'"});
  c.push_back({"duplicate inner key",
               make_file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
                         "\"data_offsets\":[0,8]}}",
                         8),
               "duplicate JSON key 'dtype'"});
  c.push_back({"deep nesting", make_file("{\"a\":{\"shape\":[[[[1]]]]}}", 0), "nests deeper"});
  c.push_back({"metadata not object", make_file("{\"__metadata__\":[]}", 0), "__metadata__"});
  c.push_back(
      {"metadata value", make_file("{\"__metadata__\":{\"k\":1}}", 0), "__metadata__['k']"});
  c.push_back({"entry not object", make_file("{\"a\":1}", 0), "tensor 'a' must be an object"});
  c.push_back({"missing dtype", make_file("{\"a\":{\"shape\":[],\"data_offsets\":[0,0]}}", 0),
               "missing field 'dtype'"});
  c.push_back({"missing offsets", make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 0),
               "missing field 'data_offsets'"});
  c.push_back({"unknown field",
               make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
                         "\"extra\":1}}",
                         4),
               "unknown field 'extra'"});
  c.push_back({"bool dtype", make_file("{" + tensor("a", "BOOL", "[2]", 0, 2) + "}", 2),
               "dtype 'BOOL' is not supported"});
  c.push_back({"u32 dtype", make_file("{" + tensor("a", "U32", "[2]", 0, 8) + "}", 8),
               "dtype 'U32' is not supported"});
  c.push_back({"dtype not string",
               make_file("{\"a\":{\"dtype\":1,\"shape\":[],\"data_offsets\":[0,4]}}", 4),
               "dtype must be a string"});
  c.push_back({"negative dim", make_file("{" + tensor("a", "F32", "[-2]", 0, 8) + "}", 8),
               "shape entry must be a non-negative integer"});
  c.push_back({"float dim", make_file("{" + tensor("a", "F32", "[2.0]", 0, 8) + "}", 8),
               "shape entry must be a non-negative integer"});
  c.push_back({"shape not array", make_file("{" + tensor("a", "F32", "2", 0, 8) + "}", 8),
               "shape must be an array"});
  c.push_back({"three offsets",
               make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 8),
               "data_offsets must be an array [begin, end]"});
  c.push_back({"negative offset",
               make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8),
               "data_offsets begin must be a non-negative integer"});
  c.push_back({"end before begin", make_file("{" + tensor("a", "F32", "[0]", 8, 0) + "}", 8),
               "end 0 is before begin 8"});
  c.push_back({"size mismatch", make_file("{" + tensor("a", "F32", "[3]", 0, 8) + "}", 8),
               "shape x dtype size is 12 bytes"});
  c.push_back({"shape overflow",
               make_file("{" + tensor("a", "F32", "[4294967296,4294967296]", 0, 8) + "}", 8),
               "overflows"});
  c.push_back({"byte size overflow",
               make_file("{" + tensor("a", "F64", "[4611686018427387904]", 0, 8) + "}", 8),
               "overflows"});
  c.push_back({"gap",
               make_file("{" + tensor("a", "F32", "[1]", 0, 4) + "," +
                             tensor("b", "F32", "[1]", 8, 12) + "}",
                         12),
               "previous tensor ends at 4 (gap)"});
  c.push_back(
      {"overlap",
       make_file(
           "{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[1]", 4, 8) + "}", 8),
       "(overlap)"});
  c.push_back({"not from zero", make_file("{" + tensor("a", "F32", "[1]", 4, 8) + "}", 8),
               "begin at 4 but the previous tensor ends at 0"});
  c.push_back({"trailing bytes", make_file("{" + ok + "}", 12), "the data buffer holds 12"});
  c.push_back({"data truncated", make_file("{" + ok + "}", 5), "the data buffer holds 5"});
  c.push_back(
      {"offsets beyond file",
       make_file(
           "{" + tensor("a", "U8", "[1]", 18446744073709551614ull, 18446744073709551615ull) + "}",
           1),
       "tensor 'a'"});
  return c;
}

TEST(Safetensors, MalformedCorpusNamesTheField) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    try {
      File::parse(c.bytes, "bad.safetensors");
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << "message: " << e.what();
      EXPECT_TRUE(e.code() == ErrorCode::malformed_file || e.code() == ErrorCode::unsupported);
    }
  }
}

TEST(Safetensors, RankAboveFourRefusedAtView) {
  const auto bytes = make_file("{" + tensor("a", "U8", "[1,1,1,1,2]", 0, 2) + "}", 2);
  const File f = File::parse(bytes);
  EXPECT_THROW(f.view(f.entries()[0]), Error);
}

TEST(Safetensors, PickleNames) {
  EXPECT_TRUE(is_pickle_name("pytorch_model.bin"));
  EXPECT_TRUE(is_pickle_name("model.PT"));
  EXPECT_TRUE(is_pickle_name("x.pth"));
  EXPECT_TRUE(is_pickle_name("x.ckpt"));
  EXPECT_FALSE(is_pickle_name("model.safetensors"));
  EXPECT_FALSE(is_pickle_name(".bin"));
  try {
    refuse_pickle("/m/pytorch_model.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("runs arbitrary code"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("safetensors"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("GGUF"), std::string::npos);
  }
}

// --- sharded checkpoints, on disk ---

class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("memra_st_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  void write_text(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  void write_shards() {
    write("s1.safetensors", make_file("{" + tensor("a", "F32", "[1]", 0, 4) + "}", 4));
    write("s2.safetensors", make_file("{" + tensor("b", "F16", "[2]", 0, 4) + "}", 4));
  }
  std::string expect_error(const char* substring) {
    try {
      open_folder(dir_.string());
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
      return e.what();
    }
    return {};
  }
  std::filesystem::path dir_;
};

TEST_F(ShardedTest, OpensIndex) {
  write_shards();
  write_text(
      "model.safetensors.index.json",
      R"({"metadata":{"total_size":8},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  const Checkpoint c = open_folder(dir_.string());
  ASSERT_EQ(c.shards.size(), 2u);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "a");
  EXPECT_EQ(c.tensors[1].first, "b");
  EXPECT_EQ(c.shards[c.tensors[1].second.shard].entries()[0].dtype, DType::f16);
}

TEST_F(ShardedTest, SingleFile) {
  write("model.safetensors", make_file("{" + tensor("a", "F32", "[1]", 0, 4) + "}", 4));
  EXPECT_EQ(open_folder(dir_.string()).tensors.size(), 1u);
}

TEST_F(ShardedTest, RefusesPathsOutsideTheFolder) {
  write_shards();
  for (const char* shard :
       {"../s1.safetensors", "/tmp/s1.safetensors", "sub\\\\s1.safetensors", "..", ""}) {
    SCOPED_TRACE(shard);
    write_text("model.safetensors.index.json",
               std::string(R"({"weight_map":{"a":")") + shard + R"("}})");
    expect_error("must be a file name inside the checkpoint folder");
  }
}

TEST_F(ShardedTest, RefusesBrokenIndex) {
  write_shards();
  write_text("model.safetensors.index.json", R"({"weight_map":{"a":"s3.safetensors"}})");
  expect_error("does not exist");
  write_text("model.safetensors.index.json",
             R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})");
  expect_error("puts tensor 'b' in 's1.safetensors', which lacks it");
  write_text("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors"}})");
  write("s1.safetensors", make_file("{" + tensor("a", "F32", "[1]", 0, 4) + "," +
                                        tensor("c", "F32", "[1]", 4, 8) + "}",
                                    8));
  expect_error("holds tensor 'c' that weight_map does not assign to it");
  write_text("model.safetensors.index.json", R"({"weight_map":{"a":1}})");
  expect_error("weight_map['a'] must be a string");
  write_text("model.safetensors.index.json", R"({"weight_map":{}})");
  expect_error("weight_map is empty");
  write_text("model.safetensors.index.json", R"({"weight_map":{"a":"s1.bin"}})");
  expect_error("pickle");
  write_text("model.safetensors.index.json", R"({"weight_map":{"a":"s1.txt"}})");
  expect_error("is not a .safetensors file");
}

TEST_F(ShardedTest, FolderWithOnlyPickleIsRefused) {
  write_text("pytorch_model.bin", "not read");
  expect_error("unpickling runs arbitrary code");
}

TEST_F(ShardedTest, SeveralFilesWithoutIndex) {
  write_shards();
  expect_error("no model.safetensors.index.json");
}

}  // namespace
}  // namespace memra::safetensors
