// The padding of graph-replayed decode steps, proven on the CPU (no GPU in CI): a backend that
// wraps the CPU ops and claims graph support makes the decoder pad every pure decode step to its
// bucket (dummy tokens in the KV cache's scratch block, logit rows after the real ones) and run it
// through Ops::graph_run, which here just runs it. Greedy tokens must equal an unpadded CPU
// engine's, through the device-greedy path and through the host sampler's logits path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "../common/missing_data.h"
#include "engine/engine_impl.h"
#include "formats/model_archive.h"
#include "greedy_collector.h"
#include "memra/engine.h"

namespace memra {
namespace {

using test::Collected;

// The CPU ops, with graph_run taking every padded step (and remembering its key).
class GraphShapedCpuOps final : public Ops {
 public:
  GraphShapedCpuOps() : cpu_(ops_cpu_create({2, false})) {}
  std::set<GraphKey> keys;

  bool graphs_supported() const override { return true; }
  void graph_run(const GraphKey& key, const std::function<void()>& forward) override {
    keys.insert(key);
    forward();
  }

  std::string name() const override { return cpu_->name(); }
  bool host_memory() const override { return true; }
  DType kv_dtype_default() const override { return cpu_->kv_dtype_default(); }
  void kv_dtype_check(DType d) const override { cpu_->kv_dtype_check(d); }
  Buffer alloc(size_t n) override { return cpu_->alloc(n); }
  void upload(void* d, const void* s, size_t n) override { cpu_->upload(d, s, n); }
  void download(void* d, const void* s, size_t n) override { cpu_->download(d, s, n); }
  void copy(void* d, const void* s, size_t n) override { cpu_->copy(d, s, n); }
  TensorView weight_upload(const TensorView& t, WeightUse use) override {
    return cpu_->weight_upload(t, use);
  }
  void step_begin(const StepLayout& s) override { cpu_->step_begin(s); }
  void matmul(const TensorView& w, const float* x, int64_t n, float* y) override {
    cpu_->matmul(w, x, n, y);
  }
  void embed(const TensorView& t, float s, float* o) override { cpu_->embed(t, s, o); }
  void rms_norm(const float* x, const float* w, int64_t r, int64_t d, float e, float* y) override {
    cpu_->rms_norm(x, w, r, d, e, y);
  }
  void add_rms_norm(float* x, const float* d, const float* w, int64_t r, int64_t n, float e,
                    float* y) override {
    cpu_->add_rms_norm(x, d, w, r, n, e, y);
  }
  void rope(float* x, int h, int d, const RopeParams& p) override { cpu_->rope(x, h, d, p); }
  void kv_store(const KvLayerView& kv, const float* k, const float* v) override {
    cpu_->kv_store(kv, k, v);
  }
  void attention(const KvLayerView& kv, const float* q, const AttentionParams& p,
                 float* o) override {
    cpu_->attention(kv, q, p, o);
  }
  void gather_logit_rows(const float* x, int64_t d, float* o) override {
    cpu_->gather_logit_rows(x, d, o);
  }
  void argmax_rows(const float* x, int64_t r, int64_t c, int64_t ld, int32_t* ids) override {
    cpu_->argmax_rows(x, r, c, ld, ids);
  }
  void add(float* y, const float* x, int64_t n) override { cpu_->add(y, x, n); }
  void add_row(float* y, const float* b, int64_t n, int64_t d) override {
    cpu_->add_row(y, b, n, d);
  }
  void scale(float* y, float s, int64_t n) override { cpu_->scale(y, s, n); }
  void softcap(float* y, float c, int64_t n) override { cpu_->softcap(y, c, n); }
  void silu_mul(const float* g, const float* u, int64_t r, int64_t c, float* o) override {
    cpu_->silu_mul(g, u, r, c, o);
  }
  void gelu_tanh_mul(const float* g, const float* u, int64_t r, int64_t c, float* o) override {
    cpu_->gelu_tanh_mul(g, u, r, c, o);
  }
  // Linear attention and MoE (the hybrid and MoE fixtures).
  bool linear_attention_supported() const override { return cpu_->linear_attention_supported(); }
  void ssm_conv(const StateLayerView& s, const float* x, int64_t d, int k, const float* w,
                float* y) override {
    cpu_->ssm_conv(s, x, d, k, w, y);
  }
  void gated_delta_rule(const StateLayerView& s, const float* qkv, const float* a, const float* b,
                        const float* A, const float* dt, const DeltaNetParams& p,
                        float* o) override {
    cpu_->gated_delta_rule(s, qkv, a, b, A, dt, p, o);
  }
  void rms_norm_gated(const float* x, const float* w, const float* z, int64_t r, int64_t d, float e,
                      float* y) override {
    cpu_->rms_norm_gated(x, w, z, r, d, e, y);
  }
  void sigmoid_mul(float* y, const float* g, int64_t n) override { cpu_->sigmoid_mul(y, g, n); }
  bool moe_route_supported(int e, int k) const override { return cpu_->moe_route_supported(e, k); }
  void moe_route(const float* l, int64_t n, const MoeRouteParams& p, int32_t* ids,
                 float* w) override {
    cpu_->moe_route(l, n, p, ids, w);
  }
  void matmul_experts(std::span<const ExpertMatrix> ws, const float* x, int x_div,
                      const int32_t* ids, int64_t n_pairs, std::span<float* const> ys) override {
    cpu_->matmul_experts(ws, x, x_div, ids, n_pairs, ys);
  }
  bool matmul_experts_on_device(const ExpertMatrix& w, int64_t n_pairs) const override {
    return cpu_->matmul_experts_on_device(w, n_pairs);
  }
  void moe_combine(const float* y, const float* w, int64_t n, int k, int64_t d, float* o) override {
    cpu_->moe_combine(y, w, n, k, d, o);
  }
  void sigmoid_scale_rows(float* y, const float* g, int64_t r, int64_t d) override {
    cpu_->sigmoid_scale_rows(y, g, r, d);
  }

 private:
  std::unique_ptr<Ops> cpu_;
};

std::string fixture_dir(const std::string& arch) {
  const char* root = std::getenv("MEMRA_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/fixtures/models/" + arch;
}

// Request i stops after n - 2i tokens, so decode steps shrink from every sequence to one.
std::vector<std::vector<int32_t>> run_staggered(Engine& e,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t n, bool logprobs) {
  std::vector<Collected> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request q = test::greedy_request(
        prompts[i], std::max<int32_t>(1, n - 2 * static_cast<int32_t>(i)), results[i]);
    if (logprobs) q.sampling.top_logprobs = 0;
    e.submit(std::move(q));
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& r : results) {
    test::wait_done(r, std::chrono::seconds(120));
    out.push_back(r.ids);
  }
  return out;
}

class PaddedDecode : public ::testing::TestWithParam<const char*> {};

TEST_P(PaddedDecode, PaddedStepsGiveTheUnpaddedTokens) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  std::ifstream in(dir + "/reference.json");
  const auto prompt = nlohmann::json::parse(in).at("prompt").get<std::vector<int32_t>>();
  std::vector<std::vector<int32_t>> prompts;
  // 19 requests: decode steps of 17-19 sequences replay the 20-sequence graph (the default
  // buckets are every size to 16, then 20, 24, 28, 32, 40, ...), so padded steps are exercised.
  for (size_t cut : {48, 20, 33, 9, 41, 3, 27, 15, 37, 6, 44, 12, 30, 5, 39, 18, 24, 46, 1}) {
    const size_t len = std::min(cut, prompt.size());
    prompts.emplace_back(prompt.end() - static_cast<std::ptrdiff_t>(len), prompt.end());
  }
  const int32_t n = 40;  // request i stops after 40 - 2i tokens: steps shrink from 19 to 1
  EngineOptions o;
  o.model = dir;
  o.n_threads = 2;
  o.device = "cpu";
  o.context_length = 96;
  std::vector<std::vector<int32_t>> plain;
  {
    auto e = Engine::create(o);
    plain = run_staggered(*e, prompts, n, false);
  }
  auto ops = std::make_shared<GraphShapedCpuOps>();
  EngineParts parts;
  parts.ops = ops;
  parts.tokenizer = Tokenizer::from_hf_folder(dir);
  parts.eos_ids = parts.tokenizer->eos_ids();
  parts.model = model_load(std::make_shared<const ModelArchive>(archive_open(dir)), {ops});
  parts.info.architecture = parts.model->info().architecture;
  parts.info.n_vocab = parts.model->info().n_vocab;
  auto e = engine_start(std::move(parts), o);
  EXPECT_EQ(run_staggered(*e, prompts, n, false), plain) << "padded (device greedy) differs";
  EXPECT_EQ(run_staggered(*e, prompts, n, true), plain) << "padded (host sampler) differs";
  std::set<int32_t> buckets, contexts, argmax;
  for (const GraphKey& k : ops->keys) {
    buckets.insert(k.n_tokens);
    contexts.insert(k.max_context);
    argmax.insert(k.argmax_cols);
  }
  EXPECT_EQ(buckets,
            (std::set<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20}));
  EXPECT_EQ(contexts, (std::set<int32_t>{96}));  // the context bucket, capped by the context
  EXPECT_EQ(argmax.size(), 2u);                  // the greedy and the logits variants
}

INSTANTIATE_TEST_SUITE_P(Archs, PaddedDecode,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma3", "qwen3_moe",
                                           "qwen3_5", "qwen3_5_moe"));

}  // namespace
}  // namespace memra
