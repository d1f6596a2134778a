// Model loading refuses what it cannot run, by name: unknown architecture, unknown rope scaling,
// missing tensor, wrong shape, unexpected tensor, bad batches. Starts from the committed
// fixtures (tests/fixtures/models) and breaks one thing at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "formats/model_archive.h"
#include "models/kv_cache.h"
#include "models/model.h"

namespace memra {
namespace {

ModelLoadOptions cpu_options() {
  ModelLoadOptions o;
  o.ops = ops_cpu_create({1, false});
  return o;
}

std::string fixture(const std::string& arch) {
  const char* root = std::getenv("MEMRA_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/models/" + arch;
}

// Loads `archive` and expects Error(code) whose message contains `needle`.
// Loading `archive` with `o` fails with `code`, and the message names every needle.
void expect_refused_by(ModelArchive archive, const ModelLoadOptions& o, ErrorCode code,
                       std::initializer_list<std::string_view> needles) {
  try {
    model_load(std::make_shared<const ModelArchive>(std::move(archive)), o);
    FAIL() << "loaded, expected a refusal naming " << *needles.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (std::string_view needle : needles)
      EXPECT_NE(std::string_view(e.what()).find(needle), std::string_view::npos) << e.what();
  }
}

void expect_refused(ModelArchive archive, ErrorCode code, const std::string& needle) {
  expect_refused_by(std::move(archive), cpu_options(), code, {needle});
}

TEST(ModelLoad, FixturesLoad) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3"}) {
    auto model = model_load(std::make_shared<const ModelArchive>(archive_open(fixture(arch))),
                            cpu_options());
    EXPECT_EQ(model->info().architecture, arch);
    EXPECT_EQ(model->info().n_vocab, 128);
    EXPECT_EQ(model->info().n_layers, 2);
  }
}

TEST(ModelLoad, MoeFixturesLoad) {
  for (const auto& [fixture_name, n_layers] :
       {std::pair{"qwen3_moe", 3}, std::pair{"qwen3_moe_sparse_step", 2}}) {
    auto model = model_load(
        std::make_shared<const ModelArchive>(archive_open(fixture(fixture_name))), cpu_options());
    EXPECT_EQ(model->info().architecture, "qwen3moe");
    EXPECT_EQ(model->info().n_layers, n_layers);
  }
}

TEST(ModelLoad, MoeRefusals) {
  // The stacked expert tensors must hold expert_count matrices.
  ModelArchive a = archive_open(fixture("qwen3_moe"));
  a.metadata.set("qwen3moe.expert_count", gguf::Value::make_u32(4));
  expect_refused(std::move(a), ErrorCode::malformed_file, "blk.0.ffn_gate_inp.weight");
  ModelArchive b = archive_open(fixture("qwen3_moe"));
  b.metadata.set("qwen3moe.expert_used_count", gguf::Value::make_u32(9));
  expect_refused(std::move(b), ErrorCode::unsupported, "qwen3moe.expert_used_count");
  ModelArchive c = archive_open(fixture("qwen3_moe"));
  c.metadata.set("qwen3moe.expert_weights_norm", gguf::Value::make_u32(1));
  expect_refused(std::move(c), ErrorCode::malformed_file, "expert_weights_norm");
  // A sparse layer's expert tensor missing, or a dense layer's MLP beside a router.
  ModelArchive d = archive_open(fixture("qwen3_moe"));
  std::erase_if(d.tensors,
                [](const TensorView& t) { return t.name == "blk.2.ffn_down_exps.weight"; });
  expect_refused(std::move(d), ErrorCode::not_found, "blk.2.ffn_down_exps.weight");
  ModelArchive e = archive_open(fixture("qwen3_moe"));
  TensorView router = *e.find_tensor("blk.0.ffn_gate_inp.weight");
  router.name = "blk.1.ffn_gate_inp.weight";  // layer 1 is dense (mlp_only_layers)
  e.tensors.push_back(router);
  expect_refused(std::move(e), ErrorCode::not_found, "blk.1.ffn_gate_exps.weight");
}

// The HF folder's tensors must match the config's sparse layers.
TEST(ModelLoad, MoeConfigMustMatchCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "qwen3_moe_mismatch";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "generation_config.json"})
    fs::copy_file(fs::path(fixture("qwen3_moe")) / f, dir / f);
  std::ifstream in(fs::path(fixture("qwen3_moe")) / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "\"mlp_only_layers\": [\n    1\n  ]";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"mlp_only_layers\": []");
  std::ofstream(dir / "config.json") << config;
  try {
    archive_open(dir.string());
    FAIL() << "opened a checkpoint whose layer 1 is dense while the config makes it sparse";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1 should be sparse"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// A token's KV bytes follow the cache type's element size (F8_E4M3: one byte), over the layers
// that keep KV; a type no backend keeps as KV is refused by name.
TEST(ModelLoad, KvBytesPerTokenFollowTheCacheType) {
  const std::vector<KvLayerShape> shapes = {{2, 64}, {0, 0}, {1, 32}};
  EXPECT_EQ(BackendKvCache::bytes_per_token(DType::f32, shapes), 2u * 4 * (128 + 32));
  EXPECT_EQ(BackendKvCache::bytes_per_token(DType::f16, shapes), 2u * 2 * (128 + 32));
  EXPECT_EQ(BackendKvCache::bytes_per_token(DType::f8_e4m3, shapes), 2u * 1 * (128 + 32));
  try {
    BackendKvCache::bytes_per_token(DType::q8_0, shapes);
    FAIL() << "a Q8_0 KV cache was sized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
  }
}

// Qwen3.5's hybrid stack: state only in the linear-attention layers, KV only in the others,
// the prefix cache allowed (the engine resumes it from state snapshots).
TEST(ModelLoad, Qwen35FixtureLoadsAsAHybridStack) {
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(fixture("qwen3_5"))),
                          cpu_options());
  EXPECT_EQ(model->info().architecture, "qwen35");
  EXPECT_EQ(model->info().n_layers, 4);
  EXPECT_TRUE(model->info().prefix_cache_unsupported.empty());
  // One attention layer of 1 kv head x 32 dims, K and V in f32.
  EXPECT_EQ(model->kv_bytes_per_token(), 2u * 4 * 1 * 32);
  // Three linear layers: conv (4 - 1) x (2 x 2 x 16 + 4 x 24) and 4 heads x 16 x 24, f32.
  EXPECT_EQ(model->state_bytes_per_seq(), 3u * 4 * (3 * 160 + 4 * 16 * 24));
  auto kv = model->kv_cache_create(4, 4, 2);
  EXPECT_EQ(kv->n_state_slots(), 2);
  EXPECT_EQ(kv->state_bytes(), 2 * model->state_bytes_per_seq());
  EXPECT_EQ(kv->bytes(), 4u * 4 * model->kv_bytes_per_token());
  // A step whose sequence names no state slot (or one outside the cache) is refused.
  std::vector<float> logits(128);
  Batch b;
  b.tokens = {5};
  b.positions = {0};
  b.seqs.push_back(BatchSeq{0, 1, 0, {0}});
  b.logit_tokens = {0};
  EXPECT_THROW(model->forward(b, *kv, logits), Error);
  b.seqs[0].state_slot = 2;
  EXPECT_THROW(model->forward(b, *kv, logits), Error);
  b.seqs[0].state_slot = 1;
  model->forward(b, *kv, logits);
}

// A state slot copied to another (a prefix-cache snapshot taken, then restored) continues exactly
// as the original: the next token's logits from the copy equal those from the source, bit for
// bit, and differ from a slot that missed the copy.
TEST(ModelLoad, Qwen35StateSlotCopyContinuesIdentically) {
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(fixture("qwen3_5"))),
                          cpu_options());
  auto kv = model->kv_cache_create(8, 4, 3);
  const int32_t n_vocab = model->info().n_vocab;
  auto step = [&](std::vector<int32_t> tokens, int32_t n_past, int32_t slot,
                  std::vector<int32_t> blocks) {
    Batch b;
    b.tokens = tokens;
    for (size_t i = 0; i < tokens.size(); ++i) b.positions.push_back(n_past + int32_t(i));
    b.seqs.push_back(BatchSeq{0, int32_t(tokens.size()), n_past, std::move(blocks), slot});
    b.logit_tokens = {int32_t(tokens.size()) - 1};
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    model->forward(b, *kv, logits);
    return logits;
  };
  // Slot 0 runs 4 tokens into block 0; slot 2 runs other tokens (a different state).
  step({5, 9, 2, 7}, 0, 0, {0});
  step({3, 3, 8, 1}, 0, 2, {1});
  kv->copy_state_slot(0, 1);
  // The same next token from slot 0 and from its copy, over the same KV block.
  const std::vector<float> from_source = step({11}, 4, 0, {0, 2});
  const std::vector<float> from_copy = step({11}, 4, 1, {0, 3});
  EXPECT_EQ(from_source, from_copy);
  const std::vector<float> from_other = step({11}, 4, 2, {0, 4});
  EXPECT_NE(from_source, from_other);
  EXPECT_THROW(kv->copy_state_slot(0, 3), Error);  // outside the 3 slots
}

TEST(ModelLoad, Qwen35MoeFixtureLoads) {
  auto model = model_load(
      std::make_shared<const ModelArchive>(archive_open(fixture("qwen3_5_moe"))), cpu_options());
  EXPECT_EQ(model->info().architecture, "qwen35moe");
  EXPECT_EQ(model->info().n_layers, 4);
  EXPECT_TRUE(model->info().prefix_cache_unsupported.empty());
  // Every layer routes to experts: a missing router is refused by name.
  ModelArchive a = archive_open(fixture("qwen3_5_moe"));
  std::erase_if(a.tensors,
                [](const TensorView& t) { return t.name == "blk.1.ffn_gate_inp.weight"; });
  expect_refused(std::move(a), ErrorCode::not_found, "blk.1.ffn_gate_inp.weight");
  ModelArchive b = archive_open(fixture("qwen3_5_moe"));
  std::erase_if(b.tensors,
                [](const TensorView& t) { return t.name == "blk.2.ffn_up_shexp.weight"; });
  expect_refused(std::move(b), ErrorCode::not_found, "blk.2.ffn_up_shexp.weight");
}

// Gemma 4's MoE block: every layer routes beside its MLP; the block's tensors and its renormalized
// softmax routing are required by name.
TEST(ModelLoad, Gemma4MoeFixtureLoadsAndRefusals) {
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(fixture("gemma4_moe"))),
                          cpu_options());
  EXPECT_EQ(model->info().architecture, "gemma4");
  EXPECT_EQ(model->info().n_layers, 4);
  for (const char* name : {"blk.3.ffn_down_exps.scale", "blk.0.ffn_gate_inp.scale",
                           "blk.2.pre_ffw_norm_2.weight", "blk.1.ffn_gate_up_exps.weight"}) {
    ModelArchive a = archive_open(fixture("gemma4_moe"));
    std::erase_if(a.tensors, [&](const TensorView& t) { return t.name == name; });
    expect_refused(std::move(a), ErrorCode::not_found, name);
  }
  ModelArchive b = archive_open(fixture("gemma4_moe"));
  b.metadata.set("gemma4.expert_weights_norm", gguf::Value::make_bool(false));
  expect_refused(std::move(b), ErrorCode::unsupported, "gemma4.expert_weights_norm");
  ModelArchive c = archive_open(fixture("gemma4_moe"));
  c.metadata.set("gemma4.expert_gating_func", gguf::Value::make_u32(2));  // sigmoid
  expect_refused(std::move(c), ErrorCode::unsupported, "gemma4.expert_gating_func");
  ModelArchive d = archive_open(fixture("gemma4_moe"));
  d.metadata.set("gemma4.expert_feed_forward_length", gguf::Value::make_u32(8));
  expect_refused(std::move(d), ErrorCode::malformed_file, "blk.0.ffn_gate_up_exps.weight");
  // The dense fixture said to have experts lacks them, by name.
  ModelArchive e = archive_open(fixture("gemma4"));
  for (const char* key : {"expert_count", "expert_used_count", "expert_feed_forward_length"})
    e.metadata.set(std::string("gemma4.") + key, gguf::Value::make_u32(2));
  expect_refused(std::move(e), ErrorCode::not_found, "blk.0.ffn_gate_inp.weight");
}

TEST(ModelLoad, Qwen35Refusals) {
  ModelArchive a = archive_open(fixture("qwen3_5"));
  a.metadata.set("qwen35.ssm.time_step_rank", gguf::Value::make_u32(3));  // 3 v heads, 2 k heads
  expect_refused(std::move(a), ErrorCode::unsupported, "ssm.time_step_rank");
  ModelArchive b = archive_open(fixture("qwen3_5"));
  b.metadata.set("qwen35.full_attention_interval", gguf::Value::make_u32(2));  // layer 1 full
  expect_refused(std::move(b), ErrorCode::not_found, "blk.1.attn_q.weight");
  ModelArchive c = archive_open(fixture("qwen3_5"));
  std::erase_if(c.tensors, [](const TensorView& t) { return t.name == "blk.3.ssm_a"; });
  expect_refused(std::move(c), ErrorCode::not_found, "blk.3.ssm_a");
}

// A multi-token-prediction block after the layers (llama.cpp: block_count counts it,
// nextn_predict_layers says how many) loads and is not run.
TEST(ModelLoad, Qwen35MtpBlockDoesNotBreakLoading) {
  ModelArchive a = archive_open(fixture("qwen3_5"));
  a.metadata.set("qwen35.block_count", gguf::Value::make_u32(5));
  a.metadata.set("qwen35.nextn_predict_layers", gguf::Value::make_u32(1));
  for (const char* name : {"blk.4.nextn.eh_proj.weight", "blk.4.attn_q.weight"}) {
    TensorView t = *a.find_tensor("blk.2.attn_q.weight");
    t.name = name;
    a.tensors.push_back(t);
  }
  auto model = model_load(std::make_shared<const ModelArchive>(std::move(a)), cpu_options());
  EXPECT_EQ(model->info().n_layers, 4);
}

// A backend without the linear-attention ops is refused at load, by the ops' names, before any
// weight is uploaded; so is one whose attention lacks a head size, and one whose delta rule lacks
// a key head size (both: 32 and wider only; narrow_heads_f16: attention also takes narrower heads
// with an F16 cache, as CUDA takes head_dim 512 with F16 or BF16 but not F32).
class LimitedOps final : public Ops {
 public:
  explicit LimitedOps(bool linear_attention = false, bool narrow_heads_f16 = false,
                      int max_experts = 8)
      : linear_attention_(linear_attention),
        narrow_heads_f16_(narrow_heads_f16),
        max_experts_(max_experts) {}
  std::string name() const override { return "test-gpu"; }
  bool attention_head_dim_supported(int head_dim, DType cache) const override {
    return head_dim >= 32 || (narrow_heads_f16_ && cache == DType::f16);
  }
  bool linear_attention_supported() const override { return linear_attention_; }
  bool moe_route_supported(int n_expert, int) const override { return n_expert <= max_experts_; }
  bool delta_rule_k_dim_supported(int k_dim) const override { return k_dim >= 32; }
  bool host_memory() const override { return false; }
  DType kv_dtype_default() const override { return DType::f16; }
  void kv_dtype_check(DType) const override {}
  Buffer alloc(size_t) override { fail(ErrorCode::internal, "no memory here"); }
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  TensorView weight_upload(const TensorView&, WeightUse) override {
    fail(ErrorCode::internal, "uploaded");
  }
  void step_begin(const StepLayout&) override {}
  void matmul(const TensorView&, const float*, int64_t, float*) override {}
  void embed(const TensorView&, float, float*) override {}
  void rms_norm(const float*, const float*, int64_t, int64_t, float, float*) override {}
  void rope(float*, int, int, const RopeParams&) override {}
  void kv_store(const KvLayerView&, const float*, const float*) override {}
  void attention(const KvLayerView&, const float*, const AttentionParams&, float*) override {}
  void gather_logit_rows(const float*, int64_t, float*) override {}
  void argmax_rows(const float*, int64_t, int64_t, int64_t, int32_t*) override {}
  void add(float*, const float*, int64_t) override {}
  void add_row(float*, const float*, int64_t, int64_t) override {}
  void scale(float*, float, int64_t) override {}
  void softcap(float*, float, int64_t) override {}
  void silu_mul(const float*, const float*, int64_t, int64_t, float*) override {}
  void gelu_tanh_mul(const float*, const float*, int64_t, int64_t, float*) override {}

 private:
  bool linear_attention_;
  bool narrow_heads_f16_;
  int max_experts_;  // moe_route's largest router
};

TEST(ModelLoad, Qwen35RefusesABackendWithoutLinearAttentionOps) {
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>();
  expect_refused_by(archive_open(fixture("qwen3_5")), o, ErrorCode::unsupported,
                    {"test-gpu", "gated_delta_rule", "ssm_conv", "--device cpu"});
  EXPECT_THROW(
      o.ops->gated_delta_rule({}, nullptr, nullptr, nullptr, nullptr, nullptr, {}, nullptr), Error);
}

TEST(ModelLoad, Qwen35RefusesABackendWithoutItsDeltaRuleKeySize) {
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>(/*linear_attention=*/true);
  // The qwen3_5 fixture's key heads are 16 wide.
  expect_refused_by(archive_open(fixture("qwen3_5")), o, ErrorCode::unsupported,
                    {"test-gpu", "gated_delta_rule", "key heads of 16", "--device cpu"});
}

TEST(ModelLoad, RefusesABackendWithoutAttentionForAHeadDim) {
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>();
  // The gemma4 fixture: 16-wide heads on its sliding layers, 32 on its full ones.
  expect_refused_by(archive_open(fixture("gemma4")), o, ErrorCode::unsupported,
                    {"test-gpu", "head_dim 16", "layer 0", "--device cpu"});
}

TEST(ModelLoad, RefusesAKvCacheTypeWithoutAttentionForAHeadDim) {
  // A head size the backend runs with its default cache type (F16) but not with the one asked
  // for: the refusal names both types and the option.
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>(/*linear_attention=*/false, /*narrow_heads_f16=*/true);
  o.kv_dtype = DType::f32;
  expect_refused_by(
      archive_open(fixture("gemma4")), o, ErrorCode::unsupported,
      {"test-gpu", "head_dim 16", "F32 KV cache", "layer 0", "--kv-dtype F16", "--device cpu"});
}

TEST(ModelLoad, RefusesABackendThatCannotRouteTheExperts) {
  // This backend routes at most 4 experts; the qwen3_moe fixture has 8.
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>(false, false, /*max_experts=*/4);
  expect_refused_by(archive_open(fixture("qwen3_moe")), o, ErrorCode::unsupported,
                    {"test-gpu", "cannot route", "qwen3moe", "--device cpu"});
}

TEST(ModelLoad, Gemma4LoadsOnADeviceBackendWithItsHeads) {
  // Heads the backend runs (F16 cache, its default): Gemma 4 is no longer opt-in on a device
  // backend (MEMRA_CUDA_GEMMA4 is gone), so loading goes on to the upload, which this backend
  // refuses.
  ModelLoadOptions o;
  o.ops = std::make_shared<LimitedOps>(/*linear_attention=*/false, /*narrow_heads_f16=*/true);
  expect_refused_by(archive_open(fixture("gemma4_moe")), o, ErrorCode::internal, {"uploaded"});
}

TEST(ModelLoad, RefusesUnknownArchitecture) {
  ModelArchive a = archive_open(fixture("llama"));
  a.metadata.set("general.architecture", gguf::Value::make_string("mamba"));
  expect_refused(std::move(a), ErrorCode::unsupported, "mamba");
}

TEST(ModelLoad, RefusesUnknownRopeScaling) {
  ModelArchive a = archive_open(fixture("llama"));
  a.metadata.set("llama.rope.scaling.type", gguf::Value::make_string("yarn"));
  expect_refused(std::move(a), ErrorCode::unsupported, "yarn");
}

TEST(ModelLoad, RefusesMissingTensor) {
  ModelArchive a = archive_open(fixture("qwen3"));
  std::erase_if(a.tensors,
                [](const TensorView& t) { return t.name == "blk.1.attn_k_norm.weight"; });
  expect_refused(std::move(a), ErrorCode::not_found, "blk.1.attn_k_norm.weight");
}

TEST(ModelLoad, RefusesWrongShape) {
  ModelArchive a = archive_open(fixture("gemma3"));
  for (TensorView& t : a.tensors)
    if (t.name == "blk.0.ffn_up.weight") t.ne[1] -= 1;  // claims fewer rows than the config
  expect_refused(std::move(a), ErrorCode::malformed_file, "blk.0.ffn_up.weight");
}

TEST(ModelLoad, RefusesUnusedTensor) {
  ModelArchive a = archive_open(fixture("llama"));
  TensorView extra = a.tensors.front();
  extra.name = "blk.0.attn_q.bias";  // a bias the llama config does not use
  a.tensors.push_back(extra);
  expect_refused(std::move(a), ErrorCode::unsupported, "blk.0.attn_q.bias");
}

TEST(ModelLoad, RefusesBadMetadataValues) {
  ModelArchive a = archive_open(fixture("llama"));
  a.metadata.set("llama.attention.head_count_kv", gguf::Value::make_u32(2));  // 3 % 2 != 0
  expect_refused(std::move(a), ErrorCode::unsupported, "kv heads");
  ModelArchive b = archive_open(fixture("gemma3"));
  b.metadata.set("gemma3.attention.sliding_window_pattern",
                 gguf::Value::make_array(gguf::ValueType::boolean, {gguf::Value::make_bool(true)}));
  expect_refused(std::move(b), ErrorCode::malformed_file, "sliding_window_pattern");
}

// The last-position logits of 12 tokens (full layers' rope matters past position 0).
std::vector<float> gemma4_logits(ModelArchive archive) {
  auto model = model_load(std::make_shared<const ModelArchive>(std::move(archive)), cpu_options());
  auto kv = model->kv_cache_create(4, 4);
  Batch b;
  for (int32_t i = 0; i < 12; ++i) {
    b.tokens.push_back(7 + 9 * i);
    b.positions.push_back(i);
  }
  b.seqs = {BatchSeq{0, 12, 0, {0, 1, 2}}};
  b.logit_tokens = {11};
  std::vector<float> logits(128);
  model->forward(b, *kv, logits);
  return logits;
}

// Gemma 4's proportional rope reads in both forms: llama.cpp's (rope.dimension_count = the full
// head, rope_freqs.weight dividing the unrotated pairs' frequencies by 1e30; what the HF archive
// and our GGUFs now carry) and the older one (dimension_count = the rotated dims, no rope_freqs).
TEST(ModelForward, Gemma4ProportionalRopeInBothForms) {
  const ModelArchive hf = archive_open(fixture("gemma4"));
  ASSERT_NE(hf.find_tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(hf.metadata.get_int("gemma4.rope.dimension_count"), 32);
  const std::vector<float> want = gemma4_logits(hf);
  ModelArchive older = hf;
  std::erase_if(older.tensors, [](const TensorView& t) { return t.name == "rope_freqs.weight"; });
  older.metadata.set("gemma4.rope.dimension_count", gguf::Value::make_u32(8));  // 0.25 of 32
  const std::vector<float> got = gemma4_logits(older);
  float err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  EXPECT_LE(err, 1e-6f * scale);
  // Teeth: without its divisors every pair of the full layers rotates, and the logits move.
  ModelArchive whole = hf;
  std::erase_if(whole.tensors, [](const TensorView& t) { return t.name == "rope_freqs.weight"; });
  const std::vector<float> rotated = gemma4_logits(whole);
  float moved = 0;
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(rotated[i] - want[i]));
  EXPECT_GT(moved, 1e-3f * scale);
}

TEST(ModelForward, RefusesInconsistentBatches) {
  auto model = model_load(std::make_shared<const ModelArchive>(archive_open(fixture("llama"))),
                          cpu_options());
  auto kv = model->kv_cache_create(4, 4);
  std::vector<float> logits(128);
  Batch good;
  good.tokens = {5, 6};
  good.positions = {0, 1};
  good.seqs = {BatchSeq{0, 2, 0, {0}}};
  good.logit_tokens = {1};
  model->forward(good, *kv, logits);

  Batch bad_pos = good;
  bad_pos.positions = {0, 3};
  EXPECT_THROW(model->forward(bad_pos, *kv, logits), Error);
  Batch bad_token = good;
  bad_token.tokens = {5, 128};  // vocabulary is 128
  EXPECT_THROW(model->forward(bad_token, *kv, logits), Error);
  Batch bad_block = good;
  bad_block.seqs[0].block_table = {9};
  EXPECT_THROW(model->forward(bad_block, *kv, logits), Error);
  Batch bad_logit = good;
  bad_logit.logit_tokens = {2};
  EXPECT_THROW(model->forward(bad_logit, *kv, logits), Error);
  std::vector<float> short_logits(10);
  EXPECT_THROW(model->forward(good, *kv, short_logits), Error);
}

}  // namespace
}  // namespace memra
