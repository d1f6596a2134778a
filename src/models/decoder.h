// Shared blocks of the decoder-only transformer families: the base class holds the config,
// weights (backend-resident), the backend and per-step scratch in backend memory, and offers the
// blocks (embed, attention, mlp, logits) that each architecture file composes into its forward
// pass.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "formats/model_archive.h"
#include "models/kv_cache.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/model_weights.h"

namespace memra {

class DecoderModel : public Model {
 public:
  DecoderModel(std::shared_ptr<const ModelArchive> archive, const ModelLoadOptions& options);
  ~DecoderModel() override;  // recorded graphs point into its buffers: the backend forgets them

  const ModelInfo& info() const override { return info_; }
  void forward(const Batch& batch, KvCache& kv, std::span<float> logits) final;
  void forward_greedy(const Batch& batch, KvCache& kv, int32_t n_cols,
                      std::span<int32_t> ids) final;
  void forward_hidden(const Batch& batch, KvCache& kv, std::span<float> hidden) final;
  bool samples_on_backend(int32_t n_cols) const final {
    return !ops_->host_memory() && n_cols >= 1 && n_cols <= cfg_.n_vocab &&
           ops_->sample_rows_supported(n_cols);
  }
  void forward_sample(const Batch& batch, KvCache& kv, int32_t n_cols, const SampleRows& rows,
                      std::span<sampling::RowResult> out) final;
  void logits_row(size_t row, std::span<float> out) final;
  std::vector<int32_t> prepare(const StepLimits& limits) override;
  uint64_t kv_bytes_per_token() const override;
  uint64_t state_bytes_per_seq() const override;
  using Model::kv_cache_create;
  std::unique_ptr<KvCache> kv_cache_create(int32_t n_blocks, int32_t block_size,
                                           int32_t n_state_slots) const override;
  const ModelConfig& config() const { return cfg_; }

 protected:
  // Activations of one step in backend memory, [n_tokens x width] each; grown, never shrunk.
  struct Scratch {
    Buffer x;       // residual stream [n x n_embd]
    Buffer h;       // normed input of a block [n x n_embd]
    Buffer out;     // a block's output [n x n_embd]
    Buffer q;       // [n x n_heads x head_dim]
    Buffer k;       // [n x n_kv_heads x head_dim]
    Buffer v;       // [n x n_kv_heads x head_dim]
    Buffer attn;    // attention output before o-proj [n x n_heads x head_dim]
    Buffer gate;    // [n x n_ff]
    Buffer up;      // [n x n_ff]
    Buffer sel;     // residual rows that need logits [n_logits x n_embd]
    Buffer logits;  // [n_logits x n_vocab] (backends whose memory is not the host's; greedy)
    Buffer ids;     // [n_logits] int32 greedy tokens
    // MoE layers (config n_expert > 0): router logits [n x n_expert]; the routing's expert ids
    // and weights [n x k] (int32, f32); the experts' gate and up [n k x n_ff_exp] and output
    // rows [n k x n_embd], one row per (token, expert) pair.
    Buffer moe_logits, moe_ids, moe_weights, moe_gate, moe_up, moe_y;
    // MoE beside the MLP (config moe_beside_mlp): the router's input and the routed branch's
    // output [n x n_embd] each, while h and out hold the experts' input and the MLP's output.
    Buffer moe_router_in, moe_out;
    // Gated attention (attn_output_gate): the output gate [n x n_heads x head_dim].
    Buffer attn_gate;
    // Gated delta-net layers (hybrid): projections [n x conv_dim] before and after the conv,
    // z and the recurrence's output [n x n_v x v_dim], a and b [n x n_v].
    Buffer ssm_qkv, ssm_conv, ssm_z, ssm_core, ssm_a, ssm_b;
  };

  // The architecture's forward pass over the step's n tokens, from the embeddings to the last
  // residual add, leaving the residual stream in s_.x. Ops only, no host reads: on a GPU a pure
  // decode step is recorded once and replayed as a graph.
  virtual void forward_layers(int64_t n, const BackendKvCache& kv) = 0;

  // x = embedding rows of the batch's tokens, times config().embed_scale.
  void embed(float* x);
  // out = o_proj(attention(rope(qk_norm(q, k)), v)) of normed input h, via the layer's KV cache.
  void attention_block(int il, int64_t n, const BackendKvCache& kv, const float* h, float* out);
  // out = down(act(gate(h)) * up(h)).
  void mlp_block(int il, const float* h, int64_t n, float* out);
  // Mixture of experts (models/moe.cpp): out[t] = sum of w_j * expert_j(h[t]) over the token's
  // top-k experts by softmax router probability (w renormalized over the k when configured, then
  // times the layer's expert_scale where it has one), each expert an MLP gated by
  // config.activation; the sum runs in increasing expert index, so a token's result is the same
  // whatever else shares the step. The router reads router_in when given (gemma4), else h.
  // Routing, expert matmuls and the weighted sum are backend ops (ops.h): a step with MoE layers
  // is recorded as a graph where the backend keeps the routing on the device
  // (matmul_experts_on_device). Traces the result as out_name.
  void moe_block(int il, const float* h, int64_t n, float* out, const float* router_in = nullptr,
                 const char* out_name = "ffn_out");
  void shared_expert(int il, const float* h, int64_t n, float* out);  // part of moe_block
  // Whether the backend keeps every MoE layer's routing on the device for a step of n_tokens
  // (true without MoE layers): the graph buckets it allows.
  bool moe_on_device(int64_t n_tokens) const;
  // Gated delta-net linear attention (models/qwen35.cpp): out = out_proj(gated_norm(
  // delta_rule(conv(qkv(h)), gates a, b), z(h))), through the layer's recurrent state slots.
  void delta_net_block(int il, int64_t n, const BackendKvCache& kv, const float* h, float* out);
  // The layer's feed-forward: moe_block in the MoE layers (config.moe_layer), mlp_block elsewhere.
  void ffn_block(int il, const float* h, int64_t n, float* out);
  // The layer's token mixer: delta_net_block in the linear-attention layers
  // (config.recurrent_layer), attention_block elsewhere.
  void mixer_block(int il, int64_t n, const BackendKvCache& kv, const float* h, float* out);
  // y = rms_norm(x) * w over rows of n_embd.
  void norm(const float* x, const TensorView& w, int64_t n, float* y, const char* name, int il);
  // x += d; y = rms_norm(x) * w (a residual add and the next block's norm, fused where the
  // backend can). Traces x as residual_name and y as norm_name.
  void add_norm(float* x, const float* d, const TensorView& w, int64_t n, float* y,
                const char* residual_name, int residual_il, const char* norm_name, int norm_il);
  // Final norm and output projection of the logit rows of x, soft-capped if configured, into
  // out (backend memory; the host logits span on the CPU), then the greedy ids when argmax_cols.
  void logits_block(const float* x, float* out, int32_t argmax_cols);
  void trace(const char* name, int il, const float* data, int64_t n_rows, int64_t n_cols);
  // Grows b to hold `bytes`; a move forgets the backend's graphs (they point into b). For an
  // architecture's own step buffers too, so recorded decode steps never read a freed one.
  void grow(Buffer& b, size_t bytes);

  std::shared_ptr<const ModelArchive> archive_;
  ModelConfig cfg_;
  std::shared_ptr<Ops> ops_;
  ModelWeights w_;
  DType kv_dtype_;
  ModelInfo info_;
  StepLayout step_;
  Scratch s_;
  size_t kept_rows_ = 0;           // logit rows forward_sample left in s_.logits
  std::vector<float> trace_host_;  // a traced activation downloaded from device memory
  std::function<void(const TraceEvent&)> trace_;
  // ModelLoadOptions::moe_routes (a test hook) and its host copies of a layer's routing.
  std::function<void(int, int64_t, std::span<const float>, std::span<int32_t>, std::span<float>)>
      moe_routes_;
  std::vector<float> routes_logits_;
  std::vector<int32_t> routes_ids_;
  std::vector<float> routes_weights_;

 private:
  // One step: logits into the span, or (argmax_cols > 0) greedy ids, or (keep) logits left in
  // s_.logits for forward_sample.
  void run(const Batch& batch, KvCache& kv, std::span<float> logits, int32_t argmax_cols,
           std::span<int32_t> ids, bool keep = false);
  // Builds the step layout (padded to a graph shape when the step is a pure decode that fits
  // one) and hands it to the backend, sizes the scratch. Returns the key to record the step
  // under, or a key with n_tokens 0 for an eager step.
  GraphKey begin_step(const Batch& batch, const BackendKvCache& kv, int32_t argmax_cols);
  const BackendKvCache& kv_cast(const KvCache& kv) const;
  // One KV shape per layer, empty where the layer keeps no KV (a linear-attention layer; a
  // gemma4 layer that reads an earlier layer's KV).
  std::vector<KvLayerShape> kv_shapes() const;
  RecurrentStateShape state_shape(int32_t n_slots) const;
  // Grows the step buffers to n tokens and n_logits logit rows (the logits and ids buffers only
  // when asked: the CPU writes logits into the caller's span).
  void reserve(int64_t n, int64_t n_logits, bool logits, bool ids);

  std::vector<int32_t> graph_buckets_;  // empty: every step eager
  int32_t graph_context_limit_ = 0;
};

std::unique_ptr<Model> llama_model_create(std::shared_ptr<const ModelArchive> archive,
                                          const ModelLoadOptions& options);
std::unique_ptr<Model> gemma3_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options);
std::unique_ptr<Model> gemma4_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options);

}  // namespace memra
