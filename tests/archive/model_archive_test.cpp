// archive_open on small HF folders written by the test (so the sanitizer run covers the HF
// path): llama q/k row permutation, gemma3 norm + 1 into F32, refusals by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/model_archive.h"

namespace memra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct F32Tensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> values;
};

// F32 tensor whose element i holds base + i, so every row is recognizable after a permutation.
F32Tensor ramp(std::string name, std::vector<uint64_t> shape, float base) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  F32Tensor t{std::move(name), std::move(shape), std::vector<float>(n)};
  for (uint64_t i = 0; i < n; ++i) t.values[i] = base + float(i);
  return t;
}

void write_safetensors(const fs::path& path, const std::vector<F32Tensor>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const F32Tensor& t : tensors) {
    const uint64_t n = t.values.size() * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  const std::string text = header.dump();
  std::ofstream out(path, std::ios::binary);
  const uint64_t size = text.size();  // little-endian host assumed, as memra's targets are
  out.write(reinterpret_cast<const char*>(&size), 8);
  out << text;
  for (const F32Tensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.values.data()), std::streamsize(t.values.size() * 4));
}

class ModelArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("memra_arch_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_config(json config) { std::ofstream(dir_ / "config.json") << config.dump(); }
  std::string error_of() {
    try {
      archive_open(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "opened";
  }
  fs::path dir_;
};

// 2 q heads and 1 kv head of head_dim 4 over hidden 8.
json tiny_config(const char* arch, const char* model_type) {
  return {{"architectures", {arch}},  {"model_type", model_type},
          {"hidden_size", 8},         {"intermediate_size", 8},
          {"num_hidden_layers", 1},   {"num_attention_heads", 2},
          {"num_key_value_heads", 1}, {"head_dim", 4},
          {"vocab_size", 10},         {"tie_word_embeddings", true}};
}

std::vector<float> values_of(const TensorView* t) {
  std::vector<float> out(t->n_bytes / 4);
  std::memcpy(out.data(), t->data, t->n_bytes);
  return out;
}

TEST_F(ModelArchiveTest, LlamaPermutesQAndKRows) {
  write_config(tiny_config("LlamaForCausalLM", "llama"));
  write_safetensors(dir_ / "model.safetensors",
                    {ramp("model.embed_tokens.weight", {10, 8}, 0),
                     ramp("model.layers.0.self_attn.q_proj.weight", {8, 8}, 0),
                     ramp("model.layers.0.self_attn.k_proj.weight", {4, 8}, 100),
                     ramp("model.layers.0.self_attn.v_proj.weight", {4, 8}, 200)});
  const ModelArchive a = archive_open(dir_.string());
  EXPECT_EQ(a.kind, ArchiveKind::hf_folder);
  EXPECT_EQ(a.architecture(), "llama");
  const TensorView* q = a.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne[0], 8u);
  EXPECT_EQ(q->ne[1], 8u);
  // Per head of 4 rows, GGUF row order is HF rows 0, 2, 1, 3 (row j*2+p <- p*2+j).
  const std::vector<float> qv = values_of(q);
  const int expected_rows[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(qv[r * 8], float(expected_rows[r] * 8)) << r;
  const std::vector<float> kv = values_of(a.find_tensor("blk.0.attn_k.weight"));
  EXPECT_EQ(kv[1 * 8], 100.0f + 2 * 8);
  const std::vector<float> vv = values_of(a.find_tensor("blk.0.attn_v.weight"));
  EXPECT_EQ(vv[1 * 8], 200.0f + 8);                    // v untouched
  EXPECT_EQ(a.find_tensor("output.weight"), nullptr);  // tied
}

TEST_F(ModelArchiveTest, Gemma3NormsStoreOnePlusW) {
  write_config(tiny_config("Gemma3ForCausalLM", "gemma3_text"));
  write_safetensors(dir_ / "model.safetensors",
                    {ramp("model.norm.weight", {8}, -1),
                     ramp("model.layers.0.self_attn.q_norm.weight", {4}, 0.5f),
                     ramp("model.layers.0.post_feedforward_layernorm.weight", {8}, 0)});
  const ModelArchive a = archive_open(dir_.string());
  const std::vector<float> norm = values_of(a.find_tensor("output_norm.weight"));
  EXPECT_EQ(norm[0], 0.0f);
  EXPECT_EQ(norm[7], 7.0f);
  EXPECT_EQ(values_of(a.find_tensor("blk.0.attn_q_norm.weight"))[1], 2.5f);
  EXPECT_EQ(values_of(a.find_tensor("blk.0.post_ffw_norm.weight"))[3], 4.0f);
}

TEST_F(ModelArchiveTest, Refusals) {
  write_config(tiny_config("Qwen2ForCausalLM", "qwen2"));
  write_safetensors(dir_ / "model.safetensors",
                    {ramp("model.layers.0.self_attn.q_norm.weight", {4}, 0)});
  EXPECT_NE(error_of().find("'model.layers.0.self_attn.q_norm.weight' is not in the qwen2 name"),
            std::string::npos);
  write_safetensors(dir_ / "model.safetensors",
                    {ramp("model.layers.1.mlp.up_proj.weight", {8, 8}, 0)});
  EXPECT_NE(error_of().find("layer 1 but num_hidden_layers is 1"), std::string::npos);
  json llama = tiny_config("LlamaForCausalLM", "llama");
  write_config(llama);
  write_safetensors(dir_ / "model.safetensors",
                    {ramp("model.layers.0.self_attn.q_proj.weight", {6, 8}, 0)});
  EXPECT_NE(error_of().find("expected 8 rows (2 heads x head_dim 4)"), std::string::npos);
  fs::remove(dir_ / "config.json");
  EXPECT_NE(error_of().find("config.json does not exist"), std::string::npos);
  EXPECT_THROW(archive_open((dir_ / "missing.gguf").string()), Error);
  std::ofstream(dir_ / "m.pth") << "x";
  try {
    archive_open((dir_ / "m.pth").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("pickle"), std::string::npos);
  }
}

}  // namespace
}  // namespace memra
