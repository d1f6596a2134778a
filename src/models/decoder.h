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

  const ModelInfo& info() const override { return info_; }
  uint64_t kv_bytes_per_token() const override;
  std::unique_ptr<KvCache> kv_cache_create(int32_t n_blocks, int32_t block_size) const override;
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
    Buffer logits;  // [n_logits x n_vocab] (backends whose memory is not the host's)
  };

  // Checks the batch and the logits span, builds the step layout and hands it to the backend,
  // sizes the scratch. Returns n_tokens.
  int64_t begin_step(const Batch& batch, const KvCache& kv, std::span<float> logits);
  const BackendKvCache& kv_cast(const KvCache& kv) const;

  // x = embedding rows of the batch's tokens, times config().embed_scale.
  void embed(float* x);
  // out = o_proj(attention(rope(qk_norm(q, k)), v)) of normed input h, via the layer's KV cache.
  void attention_block(int il, int64_t n, const BackendKvCache& kv, const float* h, float* out);
  // out = down(act(gate(h)) * up(h)).
  void mlp_block(int il, const float* h, int64_t n, float* out);
  // y = rms_norm(x) * w over rows of n_embd.
  void norm(const float* x, const TensorView& w, int64_t n, float* y, const char* name, int il);
  // x += d; y = rms_norm(x) * w (a residual add and the next block's norm, fused where the
  // backend can). Traces x as residual_name and y as norm_name.
  void add_norm(float* x, const float* d, const TensorView& w, int64_t n, float* y,
                const char* residual_name, int residual_il, const char* norm_name, int norm_il);
  // Final norm and output projection of the logit rows of x, soft-capped if configured, into
  // the host logits span.
  void logits_block(const float* x, std::span<float> logits);
  void trace(const char* name, int il, const float* data, int64_t n_rows, int64_t n_cols);

  std::shared_ptr<const ModelArchive> archive_;
  ModelConfig cfg_;
  std::shared_ptr<Ops> ops_;
  ModelWeights w_;
  DType kv_dtype_;
  ModelInfo info_;
  StepLayout step_;
  Scratch s_;
  std::vector<float> trace_host_;  // a traced activation downloaded from device memory
  std::function<void(const TraceEvent&)> trace_;
};

std::unique_ptr<Model> llama_model_create(std::shared_ptr<const ModelArchive> archive,
                                          const ModelLoadOptions& options);
std::unique_ptr<Model> gemma3_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options);

}  // namespace memra
