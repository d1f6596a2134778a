// Tests of `memra synth` (formats/synth.h): the counter-based generator and the thread split give
// the same bytes, --fast-quant blocks decode to the planned spread, plans carry the shapes'
// metadata and mix types, the synthetic vocabularies load in memra's tokenizer at the vocab size,
// and a small synth file loads through the model loader and gives peaked next-token logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "../common/missing_data.h"
#include "backend/ops.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/model_archive.h"
#include "formats/quant.h"
#include "formats/synth.h"
#include "models/model.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace memra {
namespace {

synth::Plan plan_of(const std::string& shape, convert::Mix mix, int layers = 0) {
  synth::Options o;
  o.shape = shape;
  o.mix = mix;
  o.layers = layers;
  return synth::make_plan(o);
}

const synth::TensorPlan& tensor(const synth::Plan& plan, const std::string& name) {
  for (const synth::TensorPlan& t : plan.tensors)
    if (t.view.name == name) return t;
  throw Error(ErrorCode::not_found, name);
}

std::vector<uint8_t> fill(const synth::TensorPlan& t, uint64_t seed, bool fast, int threads) {
  std::vector<uint8_t> out(dtype_row_bytes(t.type, t.view.ne[0], t.view.name) * t.view.n_rows());
  synth::fill_tensor(t, seed, fast, threads, out);
  return out;
}

std::pair<double, double> mean_std(const std::vector<float>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double sq = 0;
  for (float x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / double(v.size()))};
}

TEST(SynthRng, CounterBasedAndNormal) {
  std::vector<float> all(1 << 16), part(96);
  synth::fill_normal(7, 11, 0, all);
  synth::fill_normal(7, 11, 1000, part);  // a worker starting mid-stream sees the same values
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 1000));
  const auto [mean, std] = mean_std(all);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std, 1.0, 0.02);
  std::vector<float> other(96);
  synth::fill_normal(8, 11, 1000, other);
  EXPECT_NE(other, part) << "a different seed must give different values";
  synth::fill_normal(7, 12, 1000, other);
  EXPECT_NE(other, part) << "a different stream must give different values";
}

TEST(SynthTensors, ThreadsOneAndThreeGiveIdenticalBytes) {
  const synth::Plan plan = plan_of("qwen3-0.6b", convert::Mix::q4_k_m, 1);
  for (const char* name : {"blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_norm.weight"})
    for (bool fast : {false, true}) {
      const synth::TensorPlan& t = tensor(plan, name);
      EXPECT_EQ(fill(t, 5, fast, 1), fill(t, 5, fast, 3)) << name << " fast " << fast;
      EXPECT_NE(fill(t, 5, fast, 1), fill(t, 6, fast, 1)) << name << " seed must matter";
    }
  EXPECT_EQ(dtype_name(tensor(plan, "blk.0.attn_k.weight").type), "Q4_K");
  EXPECT_EQ(dtype_name(tensor(plan, "blk.0.attn_v.weight").type), "Q6_K");  // more bits
}

// The default path is memra's reference encoder applied to the drawn values.
TEST(SynthTensors, ExactPathQuantizesTheDrawnRows) {
  const synth::Plan plan = plan_of("qwen3-0.6b", convert::Mix::q4_k_m, 1);
  const synth::TensorPlan& t = tensor(plan, "blk.0.attn_k.weight");
  const std::vector<uint8_t> bytes = fill(t, 3, false, 2);
  const uint64_t n = t.view.ne[0];
  const uint64_t row = 17;
  std::vector<float> drawn(n);
  synth::fill_normal(3, t.stream, row * n, drawn);
  for (float& v : drawn) v *= t.std;
  std::vector<uint8_t> expect(dtype_row_bytes(t.type, n, t.view.name));
  quant::quantize_row(t.type, drawn.data(), expect.data(), static_cast<int64_t>(n));
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), bytes.begin() + row * expect.size()));
  EXPECT_NEAR(t.std, 1.0 / 32.0, 1e-6);  // 1/sqrt(fan-in 1024)
}

TEST(SynthTensors, FastBlocksDecodeToThePlannedSpread) {
  for (DType type : {DType::q4_k, DType::q5_k, DType::q6_k}) {
    synth::TensorPlan t;
    t.view.name = "blk.0.ffn_down.weight";
    t.view.n_dims = 2;
    t.view.ne = {4096, 64, 1, 1};
    t.type = type;
    t.std = 1.0f / 128.0f;  // the smallest std of the shapes' matrices is ~1/124 (fan-in 15360)
    const std::vector<uint8_t> bytes = fill(t, 1, true, 2);
    std::vector<float> values(t.view.n_elements());
    quant::dequantize_row(type, bytes.data(), values.data(), static_cast<int64_t>(values.size()));
    ASSERT_TRUE(
        std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }));
    const auto [mean, std] = mean_std(values);
    EXPECT_LT(std::abs(mean), 0.05 * t.std) << dtype_name(type);
    EXPECT_NEAR(std / t.std, 1.0, 0.1) << dtype_name(type);
  }
}

TEST(SynthPlan, ShapesCarryTheirConfig) {
  const synth::Plan q = plan_of("qwen3-8b", convert::Mix::q4_k_m);
  EXPECT_EQ(q.metadata.get_int("qwen3.block_count"), 36);
  EXPECT_EQ(q.metadata.get_int("qwen3.attention.head_count"), 32);
  EXPECT_EQ(q.metadata.get_int("qwen3.attention.head_count_kv"), 8);
  EXPECT_EQ(q.metadata.get_int("qwen3.feed_forward_length"), 12288);
  EXPECT_EQ(q.metadata.get_int("general.file_type"), 15);
  EXPECT_EQ(q.tensors.size(), 2u + 36u * 11u + 1u);
  EXPECT_EQ(q.tensors.front().view.name, "token_embd.weight");
  EXPECT_EQ(dtype_name(tensor(q, "output.weight").type), "Q6_K");
  EXPECT_EQ(tensor(q, "blk.3.ffn_up.weight").view.ne[1], 12288u);

  const synth::Plan l = plan_of("llama3-8b", convert::Mix::bf16, 2);
  EXPECT_EQ(l.metadata.get_int("llama.block_count"), 2);
  EXPECT_EQ(l.metadata.get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_NE(l.metadata.get_string("general.name")->find("layers 2"), std::string::npos);
  const synth::TensorPlan& freqs = tensor(l, "rope_freqs.weight");
  ASSERT_EQ(freqs.values.size(), 64u);
  EXPECT_EQ(freqs.values.front(), 1.0f);  // high frequencies unscaled
  EXPECT_EQ(freqs.values.back(), 8.0f);   // low frequencies divided by the factor

  const synth::Plan g = plan_of("gemma3-12b", convert::Mix::q8_0);
  EXPECT_EQ(g.metadata.get_int("gemma3.attention.sliding_window"), 1024);
  EXPECT_EQ(g.metadata.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(g.metadata.get_float("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_FLOAT_EQ(*g.metadata.get_float("gemma3.attention.scale"), 1.0 / 16.0);
  EXPECT_EQ(g.metadata.find("gemma3.final_logit_softcapping"), nullptr);
  const auto& pattern =
      std::get<gguf::Array>(g.metadata.find("gemma3.attention.sliding_window_pattern")->data).items;
  ASSERT_EQ(pattern.size(), 48u);
  EXPECT_FALSE(std::get<bool>(pattern[5].data));  // every sixth layer is global
  EXPECT_TRUE(std::get<bool>(pattern[6].data));
  EXPECT_EQ(g.n_vocab, 262208);
}

TEST(SynthPlan, RefusesUnknownShapeAndLayers) {
  try {
    plan_of("qwen9-1t", convert::Mix::f16);
    FAIL() << "unknown shape accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("qwen9-1t"), std::string::npos);
  }
  EXPECT_THROW(plan_of("gemma3-270m", convert::Mix::f16, 19), Error);
}

TEST(SynthVocab, LoadsInMemraAtTheVocabSize) {
  for (const char* shape : {"qwen3-0.6b", "llama3-8b", "gemma3-270m"}) {
    const synth::Plan plan = plan_of(shape, convert::Mix::bf16, 1);
    const auto tok = Tokenizer::from_gguf(plan.metadata);
    EXPECT_EQ(tok->n_vocab(), plan.n_vocab) << shape;
    const std::vector<int32_t> ids = tok->encode("hello world", {false, false});
    EXPECT_GE(ids.size(), 2u) << shape;
    EXPECT_LE(ids.size(), 8u) << shape << ": merges should make word pieces";
    EXPECT_EQ(tok->decode(ids, false), "hello world") << shape;
    EXPECT_FALSE(tok->eos_ids().empty()) << shape;
  }
}

// --vocab-from: llama.cpp's Qwen2 vocabulary file (151,936 tokens, with a chat template) over the
// qwen3-0.6b shape tokenizes and renders as that file does; a file of another size is refused,
// naming both counts.
TEST(SynthVocab, TakesARealTokenizerFromAnotherFile) {
  MEMRA_REQUIRE_PINNED_TEST_DATA(data);
  const std::string qwen2 = (data / "vocab" / "ggml-vocab-qwen2.gguf").string();
  synth::Options o;
  o.shape = "qwen3-0.6b";
  o.mix = convert::Mix::bf16;
  o.layers = 1;
  o.vocab_from = qwen2;
  const synth::Plan plan = synth::make_plan(o);
  const gguf::File real = gguf::File::open(qwen2);
  const auto mine = Tokenizer::from_gguf(plan.metadata);
  const auto theirs = Tokenizer::from_gguf(real.metadata());
  const std::string text = "Hello world, 1234 <|im_start|>user\nça va?<|im_end|>";
  EXPECT_EQ(mine->encode(text, {false, true}), theirs->encode(text, {false, true}));
  EXPECT_EQ(plan.metadata.get_string("tokenizer.chat_template"),
            real.metadata().get_string("tokenizer.chat_template"));
  EXPECT_EQ(plan.metadata.get_string("general.architecture"), "qwen3");  // the shape's keys stay

  o.shape = "gemma3-270m";  // 262,144 tokens
  try {
    synth::make_plan(o);
    FAIL() << "a vocabulary of another size was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("151936 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("262144"), std::string::npos) << e.what();
  }
}

// Loads a one-layer qwen3-0.6b (full vocab) through the model loader and checks the logits of a
// short prompt are finite and peaked (top token above half the probability on most rows).
TEST(SynthFile, LoadsAndGivesPeakedLogits) {
  synth::Options o;
  o.shape = "qwen3-0.6b";
  o.mix = convert::Mix::q4_k_m;
  o.layers = 1;
  o.fast_quant = true;
  o.threads = 2;
  o.output_path = (std::filesystem::temp_directory_path() / "memra_synth_test.gguf").string();
  synth::write_gguf(o);
  ModelLoadOptions load;
  load.ops = ops_cpu_create({2, false});
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(o.output_path)), load);
  std::filesystem::remove(o.output_path);  // the mapping keeps the data
  EXPECT_EQ(model->info().architecture, "qwen3");
  EXPECT_EQ(model->info().n_vocab, 151936);
  EXPECT_EQ(model->info().n_layers, 1);
  EXPECT_EQ(model->info().n_embd, 1024);

  const std::vector<int32_t> prompt{791, 4062, 13876, 38835, 34208, 927, 279, 16053};
  auto kv = model->kv_cache_create(1, 16);
  Batch batch;
  BatchSeq seq;
  seq.n_tokens = static_cast<int32_t>(prompt.size());
  seq.block_table = {0};
  for (int32_t p = 0; p < seq.n_tokens; ++p) {
    batch.tokens.push_back(prompt[p]);
    batch.positions.push_back(p);
    batch.logit_tokens.push_back(p);
  }
  batch.seqs.push_back(seq);
  const size_t n_vocab = 151936;
  std::vector<float> logits(prompt.size() * n_vocab);
  model->forward(batch, *kv, logits);
  int peaked = 0;
  for (size_t r = 0; r < prompt.size(); ++r) {
    const float* row = logits.data() + r * n_vocab;
    ASSERT_TRUE(std::all_of(row, row + n_vocab, [](float v) { return std::isfinite(v); }));
    const float top = *std::max_element(row, row + n_vocab);
    double sum = 0;
    for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(double(row[i] - top));
    if (1.0 / sum > 0.5) ++peaked;
  }
  EXPECT_GE(peaked, 5) << "most rows should put over half the mass on one token";
}

}  // namespace
}  // namespace memra
