// Tests of the `memra synth` shapes of the hybrid (qwen35, qwen35moe) and Gemma 4 families: each
// shape's parameter count (and active count for MoE) against the published one, its metadata,
// and a scaled-down variant of each (Options::config_patch: same architecture, 256 wide) written
// at bf16, q8_0 and q4_k_m --fast-quant, loaded through the model loader (which refuses a missing
// or an extra tensor by name) and run on the CPU, a prompt then one decode step, finite logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "formats/model_archive.h"
#include "formats/synth.h"
#include "models/model.h"

namespace memra {
namespace {

synth::Options options_of(const std::string& shape, convert::Mix mix, std::string patch = {}) {
  synth::Options o;
  o.shape = shape;
  o.mix = mix;
  o.config_patch = std::move(patch);
  return o;
}

bool has(const synth::Plan& plan, const std::string& name) {
  return std::any_of(plan.tensors.begin(), plan.tensors.end(),
                     [&](const synth::TensorPlan& t) { return t.view.name == name; });
}

struct Counts {
  double total = 0, active = 0;
};

// Parameters of the plan; active ones count expert_used_count of each stacked expert tensor's
// experts (ne[2]) and everything else in full, the tied embedding table once.
Counts count(const synth::Plan& plan) {
  const std::string arch = *plan.metadata.get_string("general.architecture");
  const double used =
      static_cast<double>(plan.metadata.get_int(arch + ".expert_used_count").value_or(0));
  Counts c;
  for (const synth::TensorPlan& t : plan.tensors) {
    const double n = static_cast<double>(t.view.n_elements());
    c.total += n;
    c.active += t.view.n_dims == 3 ? n * used / static_cast<double>(t.view.ne[2]) : n;
  }
  return c;
}

// Published counts are of the whole checkpoints: the Qwen ones include a vision tower and a
// multi-token-prediction block, the Gemma ones a ~0.55B vision encoder (vast.ai's card of
// 26B-A4B), none of which synth writes; the shapes count the text decoder. The tolerances below
// cover that, and are stated per shape. Sources: the model cards (Qwen3.5-9B "9B", Qwen3.6-27B
// "27B", Qwen3.6-35B-A3B "35B in total and 3B activated"), apxml.com's Gemma 4 pages (31B:
// 30.7B; 26B-A4B: 25.2B total, 3.8B active).
struct Published {
  const char* shape;
  double total, total_tolerance;
  double active, active_tolerance;  // active 0: a dense model
};

constexpr Published kPublished[] = {
    {"qwen3.5-9b", 9.0e9, 0.03, 0, 0},    // text decoder 8.95B
    {"qwen3.6-27b", 27.0e9, 0.03, 0, 0},  // text decoder 26.90B
    // Active 3.45B counting both untied embedding tables; "A3B" rounds and, as is common, leaves
    // the input table (a row lookup) out: 2.94B without it. 20% covers either convention.
    {"qwen3.6-35b-a3b", 35.0e9, 0.03, 3.0e9, 0.2},
    // Qwen3-30B-A3B's card: 30.5B in total, 3.3B activated.
    {"qwen3-30b-a3b", 30.5e9, 0.01, 3.3e9, 0.05},
    {"gemma-4-31b", 30.7e9, 0.01, 0, 0},             // text decoder 30.70B
    {"gemma-4-26b-a4b", 25.2e9, 0.01, 3.8e9, 0.02},  // 25.23B, 3.82B active
};

TEST(SynthShapes, ParameterCountsMatchThePublishedOnes) {
  for (const Published& p : kPublished) {
    const synth::Plan plan = synth::make_plan(options_of(p.shape, convert::Mix::bf16));
    const Counts c = count(plan);
    std::printf("%s: %.2fB parameters, %.2fB active\n", p.shape, c.total / 1e9, c.active / 1e9);
    EXPECT_NEAR(c.total / p.total, 1.0, p.total_tolerance) << p.shape << ": " << c.total;
    if (p.active > 0)
      EXPECT_NEAR(c.active / p.active, 1.0, p.active_tolerance) << p.shape << ": " << c.active;
    else
      EXPECT_EQ(c.active, c.total) << p.shape;
    // bf16 matrices, f32 vectors: the file's tensor bytes are ~2 per parameter.
    double bytes = 0;
    for (const synth::TensorPlan& t : plan.tensors)
      bytes += static_cast<double>(dtype_row_bytes(t.type, t.view.ne[0], t.view.name)) *
               static_cast<double>(t.view.n_rows());
    EXPECT_NEAR(bytes / (2 * c.total), 1.0, 0.001) << p.shape;
  }
}

TEST(SynthShapes, HybridShapesCarryTheirConfig) {
  const synth::Plan q = synth::make_plan(options_of("qwen3.6-27b", convert::Mix::q4_k_m));
  EXPECT_EQ(q.metadata.get_string("general.architecture"), "qwen35");
  EXPECT_EQ(q.metadata.get_int("qwen35.block_count"), 64);
  EXPECT_EQ(q.metadata.get_int("qwen35.full_attention_interval"), 4);
  EXPECT_EQ(q.metadata.get_int("qwen35.attention.head_count"), 24);
  EXPECT_EQ(q.metadata.get_int("qwen35.rope.dimension_count"), 64);  // a quarter of 256
  EXPECT_EQ(q.metadata.get_int("qwen35.ssm.group_count"), 16);
  EXPECT_EQ(q.metadata.get_int("qwen35.ssm.time_step_rank"), 48);
  EXPECT_EQ(q.metadata.get_int("qwen35.ssm.inner_size"), 48 * 128);
  EXPECT_EQ(q.n_vocab, 248320);
  EXPECT_TRUE(has(q, "blk.0.ssm_conv1d.weight"));
  EXPECT_TRUE(has(q, "blk.3.attn_q_norm.weight"));  // every fourth layer is attention
  EXPECT_FALSE(has(q, "blk.3.ssm_a"));
  EXPECT_TRUE(has(q, "output.weight"));

  const synth::Plan m = synth::make_plan(options_of("qwen3.6-35b-a3b", convert::Mix::q4_k_m));
  EXPECT_EQ(m.metadata.get_string("general.architecture"), "qwen35moe");
  EXPECT_EQ(m.metadata.get_int("qwen35moe.expert_count"), 256);
  EXPECT_EQ(m.metadata.get_int("qwen35moe.expert_used_count"), 8);
  EXPECT_EQ(m.metadata.get_int("qwen35moe.expert_shared_feed_forward_length"), 512);
  EXPECT_EQ(m.metadata.find("qwen35moe.feed_forward_length"), nullptr);
  EXPECT_TRUE(has(m, "blk.39.ffn_down_exps.weight"));
  EXPECT_FALSE(has(m, "blk.0.ffn_down.weight"));

  // Fewer layers than the attention interval would leave no attention layer: refused by name.
  synth::Options few = options_of("qwen3.5-9b", convert::Mix::bf16);
  few.layers = 2;
  try {
    synth::make_plan(few);
    FAIL() << "--layers 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--layers 2"), std::string::npos) << e.what();
  }
}

TEST(SynthShapes, GemmaFourShapesCarryTheirConfig) {
  const synth::Plan g = synth::make_plan(options_of("gemma-4-31b", convert::Mix::q8_0));
  EXPECT_EQ(g.metadata.get_int("gemma4.attention.key_length"), 512);
  EXPECT_EQ(g.metadata.get_int("gemma4.attention.key_length_swa"), 256);
  EXPECT_EQ(g.metadata.get_int("gemma4.attention.sliding_window"), 1024);
  const auto kv = *g.metadata.get_int_array("gemma4.attention.head_count_kv");
  ASSERT_EQ(kv.size(), 60u);
  EXPECT_EQ(kv[0], 16);
  EXPECT_EQ(kv[5], 4);  // full layers: 4 kv heads
  EXPECT_TRUE(has(g, "blk.0.attn_v.weight"));
  EXPECT_FALSE(has(g, "blk.5.attn_v.weight"));  // V = K on full layers
  EXPECT_TRUE(has(g, "rope_freqs.weight"));     // proportional rope
  EXPECT_FALSE(has(g, "output.weight"));        // tied
  EXPECT_FALSE(has(g, "per_layer_token_embd.weight"));

  const synth::Plan m = synth::make_plan(options_of("gemma-4-26b-a4b", convert::Mix::q4_k_m));
  EXPECT_EQ(m.metadata.get_int("gemma4.expert_count"), 128);
  EXPECT_EQ(m.metadata.get_int("gemma4.expert_used_count"), 8);
  EXPECT_EQ(m.metadata.get_int("gemma4.expert_feed_forward_length"), 704);
  EXPECT_TRUE(has(m, "blk.29.ffn_gate_up_exps.weight"));
  EXPECT_TRUE(has(m, "blk.29.ffn_down.weight"));  // the dense MLP beside the experts
}

// Scaled-down variants: 256 wide (the K-quant block) so q4_k_m's fast path writes real K blocks,
// every tensor kind of the architecture present (both layer kinds; for Gemma 4 also the per-layer
// inputs, KV sharing and a double-wide MLP, which the published shapes lack).
struct Tiny {
  const char* shape;
  const char* patch;
};

constexpr const char* kQwenTiny =
    R"("hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
       "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
       "linear_value_head_dim": 64)";
constexpr const char* kGemmaTiny =
    R"("hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 6,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "global_head_dim": 128,
       "num_global_key_value_heads": 1, "sliding_window": 4)";

std::vector<Tiny> tiny_variants() {
  auto patch = [](const char* base, const char* extra) {
    std::string out(1, '{');
    out.append(base).append(extra).push_back('}');
    return out;
  };
  static const std::vector<std::string> patches = {
      patch(kQwenTiny, ""),
      patch(kQwenTiny, ""),
      patch(kQwenTiny, R"(, "num_experts": 8, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 256, "shared_expert_intermediate_size": 256)"),
      patch(kGemmaTiny, ""),
      patch(kGemmaTiny, R"(, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 256)"),
      // The per-layer input and KV-sharing paths (Gemma 4's small models) on the 31B's layers.
      patch(kGemmaTiny, R"(, "num_hidden_layers": 8, "hidden_size_per_layer_input": 32,
                           "num_kv_shared_layers": 2, "use_double_wide_mlp": true,
                           "attention_k_eq_v": false)"),
  };
  return {{"qwen3.5-9b", patches[0].c_str()},      {"qwen3.6-27b", patches[1].c_str()},
          {"qwen3.6-35b-a3b", patches[2].c_str()}, {"gemma-4-31b", patches[3].c_str()},
          {"gemma-4-26b-a4b", patches[4].c_str()}, {"gemma-4-31b", patches[5].c_str()}};
}

// Writes the variant, loads it, runs 6 prompt tokens and one decode token; returns the logits
// of the last prompt token and the decode token.
std::vector<float> run_tiny(const Tiny& v, convert::Mix mix, bool fast, int32_t* n_vocab) {
  synth::Options o = options_of(v.shape, mix, v.patch);
  o.fast_quant = fast;
  o.threads = 2;
  o.output_path = (std::filesystem::temp_directory_path() /
                   ("memra_synth_shapes_" + std::string(v.shape) + ".gguf"))
                      .string();
  synth::write_gguf(o);
  ModelLoadOptions load;
  load.ops = ops_cpu_create({2, false});
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(o.output_path)), load);
  std::filesystem::remove(o.output_path);  // the mapping keeps the data
  *n_vocab = model->info().n_vocab;
  auto kv = model->kv_cache_create(1, 16);
  const std::vector<int32_t> prompt{791, 4062, 13876, 38835, 34208, 927, 279};
  std::vector<float> logits(2 * static_cast<size_t>(*n_vocab));
  for (int step = 0; step < 2; ++step) {
    Batch batch;
    BatchSeq seq;
    seq.n_past = step == 0 ? 0 : 6;
    seq.n_tokens = step == 0 ? 6 : 1;
    seq.block_table = {0};
    seq.state_slot = model->state_bytes_per_seq() > 0 ? 0 : -1;
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      batch.tokens.push_back(prompt[seq.n_past + i]);
      batch.positions.push_back(seq.n_past + i);
    }
    batch.logit_tokens.push_back(seq.n_tokens - 1);
    batch.seqs.push_back(seq);
    model->forward(batch, *kv,
                   std::span<float>(logits).subspan(step * static_cast<size_t>(*n_vocab),
                                                    static_cast<size_t>(*n_vocab)));
  }
  return logits;
}

TEST(SynthShapes, ScaledDownVariantsLoadAndRunOnTheCpu) {
  struct MixCase {
    convert::Mix mix;
    bool fast;
  };
  // Every variant at q4_k_m with --fast-quant (the benchmark recipe); bf16 and q8_0 on one dense
  // and one MoE variant of each family, which keeps the test's files and CPU time small.
  const std::vector<std::vector<MixCase>> mixes = {
      {{convert::Mix::q4_k_m, true}, {convert::Mix::q8_0, false}},
      {{convert::Mix::q4_k_m, true}},
      {{convert::Mix::q4_k_m, true}, {convert::Mix::bf16, false}},
      {{convert::Mix::q4_k_m, true}, {convert::Mix::q8_0, false}},
      {{convert::Mix::q4_k_m, true}, {convert::Mix::bf16, false}},
      {{convert::Mix::q4_k_m, true}},
  };
  const std::vector<Tiny> variants = tiny_variants();
  ASSERT_EQ(variants.size(), mixes.size());
  for (size_t i = 0; i < variants.size(); ++i) {
    const Tiny& v = variants[i];
    for (const MixCase& m : mixes[i]) {
      SCOPED_TRACE(std::string(v.shape) + " " + std::string(convert::mix_name(m.mix)) + " " +
                   v.patch);
      int32_t n_vocab = 0;
      const std::vector<float> logits = run_tiny(v, m.mix, m.fast, &n_vocab);
      ASSERT_TRUE(
          std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
      // Not degenerate: the two rows differ and each spreads over the vocabulary.
      EXPECT_FALSE(std::equal(logits.begin(), logits.begin() + n_vocab, logits.begin() + n_vocab));
      const auto [lo, hi] = std::minmax_element(logits.begin(), logits.begin() + n_vocab);
      EXPECT_GT(*hi - *lo, 1.0f);
    }
  }
}

}  // namespace
}  // namespace memra
