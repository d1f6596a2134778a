// Tests of the convert engine without a tokenizer: the type policy reproduces the tensor types of
// a real llama-quantize Q4_K_M file (the packaged Gemma 3 270M), and write_gguf output reads back
// in memra's GGUF reader with the policy's types, the right metadata and values within error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "../common/missing_data.h"
#include "core/error.h"
#include "formats/convert.h"
#include "formats/gguf.h"
#include "formats/quant.h"

namespace memra {
namespace {

std::filesystem::path default_model() {
  const char* dir = std::getenv("MEMRA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base =
      dir ? std::filesystem::path(dir)
          : std::filesystem::path(home ? home : ".") / ".cache" / "memra" / "models";
  return base / "gemma-3-270m-q4_k_m.gguf";
}

TEST(ConvertPolicy, ReproducesLlamaQuantizeQ4KM) {
  const auto path = default_model();
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(path)) << path << " (scripts/setup.sh)";
  const gguf::File file = gguf::File::open(path.string());
  std::vector<TensorView> views;
  for (const gguf::TensorInfo& info : file.tensors()) {
    TensorView v;
    v.name = info.name;
    v.n_dims = info.n_dims;
    v.ne = info.ne;
    views.push_back(v);
  }
  const convert::PolicyContext ctx = convert::make_policy_context(convert::Mix::q4_k_m, views);
  EXPECT_FALSE(ctx.has_output);  // tied embeddings: token_embd is the output
  EXPECT_EQ(ctx.n_attn_v, 18);
  size_t checked = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_EQ(dtype_name(convert::choose_type(ctx, views[i])), dtype_name(file.tensors()[i].dtype))
        << views[i].name;
    ++checked;
  }
  EXPECT_GT(checked, 200u);
  EXPECT_EQ(file.metadata().get_int("general.file_type"),
            convert::llama_file_type(convert::Mix::q4_k_m));
}

TEST(ConvertPolicy, NamesAndFileTypes) {
  EXPECT_EQ(convert::mix_from_name("Q4_K_M"), convert::Mix::q4_k_m);
  EXPECT_FALSE(convert::mix_from_name("q3_k_s").has_value());
  EXPECT_EQ(convert::llama_file_type(convert::Mix::bf16), 32u);
  EXPECT_EQ(convert::llama_file_type(convert::Mix::q8_0), 7u);
  TensorView norm;
  norm.name = "blk.0.attn_norm.weight";
  norm.n_dims = 1;
  norm.ne = {256, 1, 1, 1};
  const auto ctx = convert::make_policy_context(convert::Mix::q8_0, {norm});
  EXPECT_EQ(convert::choose_type(ctx, norm), DType::f32);
  TensorView odd = norm;
  odd.name = "blk.0.ffn_down.weight";
  odd.n_dims = 2;
  odd.ne = {200, 64, 1, 1};  // 200 is no multiple of 32: F16
  EXPECT_EQ(convert::choose_type(ctx, odd), DType::f16);
  // MoE routers stay F32 in every mix; the stacked expert matrices are quantized.
  TensorView router = norm;
  router.name = "blk.0.ffn_gate_inp.weight";
  router.n_dims = 2;
  router.ne = {256, 8, 1, 1};
  TensorView experts = router;
  experts.name = "blk.0.ffn_up_exps.weight";
  experts.n_dims = 3;
  experts.ne = {256, 64, 8, 1};
  for (convert::Mix mix : {convert::Mix::q8_0, convert::Mix::q4_k_m, convert::Mix::bf16}) {
    const auto c = convert::make_policy_context(mix, {router, experts});
    EXPECT_EQ(convert::choose_type(c, router), DType::f32);
    EXPECT_NE(convert::choose_type(c, experts), DType::f32);
  }
}

// A two-tensor archive in memory, written and read back by memra's own reader.
TEST(ConvertWrite, ReadsBackInOurReader) {
  std::vector<float> weight(256 * 8), norm(256, 1.5f);
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0, 0.1f);
  for (float& w : weight) w = dist(rng);
  ModelArchive archive;
  archive.kind = ArchiveKind::hf_folder;
  archive.metadata.set("general.architecture", gguf::Value::make_string("llama"));
  TensorView w;
  w.name = "blk.0.attn_q.weight";
  w.n_dims = 2;
  w.ne = {256, 8, 1, 1};
  w.data = weight.data();
  w.n_bytes = weight.size() * 4;
  TensorView n;
  n.name = "blk.0.attn_norm.weight";
  n.n_dims = 1;
  n.ne = {256, 1, 1, 1};
  n.data = norm.data();
  n.n_bytes = norm.size() * 4;
  archive.tensors = {w, n};
  gguf::Metadata extra;
  extra.set("tokenizer.chat_template", gguf::Value::make_string("{{ x }}"));
  const auto out = std::filesystem::temp_directory_path() /
                   ("memra_convert_test_" + std::to_string(std::random_device{}()) + ".gguf");
  convert::Options options;
  options.output_path = out.string();
  options.mix = convert::Mix::q6_k;
  const convert::Summary summary = convert::write_gguf(archive, extra, options);
  EXPECT_EQ(summary.n_tensors, 2u);

  const gguf::File file = gguf::File::open(out.string());
  EXPECT_EQ(file.metadata().get_int("general.file_type"), 18);
  EXPECT_EQ(file.metadata().get_int("general.quantization_version"), 2);
  EXPECT_EQ(file.metadata().get_string("tokenizer.chat_template"), "{{ x }}");
  const gguf::TensorInfo* q = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::q6_k);
  std::vector<float> back(weight.size());
  const TensorView view = file.view(*q);
  for (int r = 0; r < 8; ++r) {
    quant::dequantize_row(DType::q6_k, static_cast<const uint8_t*>(view.data) + r * 210,
                          back.data() + r * 256, 256);
  }
  double err = 0, ref = 0;
  for (size_t i = 0; i < weight.size(); ++i) {
    err += (back[i] - weight[i]) * (back[i] - weight[i]);
    ref += weight[i] * weight[i];
  }
  EXPECT_LT(std::sqrt(err / ref), 0.02);
  const gguf::TensorInfo* nt = file.find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(nt, nullptr);
  EXPECT_EQ(nt->dtype, DType::f32);
  EXPECT_EQ(static_cast<const float*>(file.view(*nt).data)[17], 1.5f);

  // A NaN in a quantized tensor is refused naming the tensor; no file is left behind.
  weight[300] = std::nanf("");
  std::filesystem::remove(out);
  try {
    convert::write_gguf(archive, extra, options);
    FAIL() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace memra
