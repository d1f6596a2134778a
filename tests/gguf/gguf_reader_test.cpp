// GGUF reader on real files: the packaged Gemma 3 270M model and the vocabulary files of the
// pinned test data (tests/common/test_data.h).
// Facts asserted here were read with the `gguf` Python package (the format's reference reader).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../common/missing_data.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "test_data.h"

namespace memra::gguf {
namespace {

std::filesystem::path model_path() {
  const char* dir = std::getenv("MEMRA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  std::filesystem::path base =
      dir != nullptr ? std::filesystem::path(dir)
                     : std::filesystem::path(home ? home : "/") / ".cache/memra/models";
  return base / "gemma-3-270m-q4_k_m.gguf";
}

TEST(GgufReal, GemmaModel) {
  const auto path = model_path();
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(path)) << path << " (scripts/setup.sh)";
  const File f = File::open(path.string());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 236u);
  EXPECT_EQ(f.metadata().entries().size(), 33u);
  EXPECT_EQ(f.data_offset(), 6525120u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().require_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.metadata().require_int("gemma3.block_count"), 18);
  EXPECT_EQ(f.metadata().get_bool("tokenizer.ggml.add_bos_token"), true);
  const auto tokens = f.metadata().get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 262144u);
  EXPECT_EQ(f.metadata().get_float_array("tokenizer.ggml.scores")->size(), 262144u);
  EXPECT_EQ(f.metadata().get_int_array("tokenizer.ggml.token_type")->size(), 262144u);
  // Element-type confusion is refused, never reinterpreted.
  EXPECT_THROW(f.metadata().get_int_array("tokenizer.ggml.scores"), Error);
  EXPECT_THROW(f.metadata().get_int("general.name"), Error);

  const TensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->dtype, DType::f32);
  EXPECT_EQ(norm->n_dims, 1);
  EXPECT_EQ(norm->ne[0], 640u);
  EXPECT_EQ(norm->n_bytes, 2560u);
  const TensorView v = f.view(*norm);
  EXPECT_EQ(static_cast<const uint8_t*>(v.data), f.bytes().data() + f.data_offset() + norm->offset);
  EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
}

TEST(GgufReal, EveryVocabFileParses) {
  MEMRA_REQUIRE_PINNED_TEST_DATA(data);
  const auto dir = data / "vocab";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    const File f = File::open(entry.path().string());
    EXPECT_TRUE(f.metadata().get_string("general.architecture").has_value());
    EXPECT_TRUE(f.metadata().get_string_array("tokenizer.ggml.tokens").has_value());
    ++n;
  }
  EXPECT_GE(n, 19);  // the 19 vocabulary files of llama-cpp-python 0.3.36
}

}  // namespace
}  // namespace memra::gguf
