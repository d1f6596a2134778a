// Shared blocks of the decoder-only transformer families: the base class holds the config,
// weights, ops and per-step scratch, and offers the blocks (embed, attention, mlp, logits) that
// each architecture file composes into its forward pass.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "formats/model_archive.h"
#include "models/kv_cache_cpu.h"
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
  // Activations of one step, [n_tokens x width] each; grown, never shrunk, between steps.
  struct Scratch {
    std::vector<float> x;     // residual stream [n x n_embd]
    std::vector<float> h;     // normed input of a block [n x n_embd]
    std::vector<float> out;   // a block's output [n x n_embd]
    std::vector<float> q;     // [n x n_heads x head_dim]
    std::vector<float> k;     // [n x n_kv_heads x head_dim]
    std::vector<float> v;     // [n x n_kv_heads x head_dim]
    std::vector<float> attn;  // attention output before o-proj [n x n_heads x head_dim]
    std::vector<float> gate;  // [n x n_ff]
    std::vector<float> up;    // [n x n_ff]
    std::vector<float> sel;   // residual rows that need logits [n_logits x n_embd]
  };

  // Checks the batch against itself and the logits span; sizes the scratch. Returns n_tokens.
  int64_t begin_step(const Batch& batch, std::span<float> logits);
  CpuKvCache& kv_cast(KvCache& kv) const;

  // x = embedding rows of the batch's tokens, times config().embed_scale.
  void embed(const Batch& batch, float* x);
  // out = o_proj(attention(rope(qk_norm(q, k)), v)) of normed input h, via the layer's KV cache.
  void attention_block(int il, const Batch& batch, CpuKvCache& kv, const float* h, float* out);
  // out = down(act(gate(h)) * up(h)).
  void mlp_block(int il, const float* h, int64_t n, float* out);
  // y = rms_norm(x) * w over rows of n_embd.
  void norm(const float* x, const std::vector<float>& w, int64_t n, float* y, const char* name,
            int il);
  // Final norm and output projection of the logit_tokens rows of x, soft-capped if configured.
  void logits_block(const Batch& batch, const float* x, std::span<float> logits);
  void trace(const char* name, int il, const float* data, int64_t n_rows, int64_t n_cols) const;

  std::shared_ptr<const ModelArchive> archive_;
  ModelConfig cfg_;
  ModelWeights w_;
  std::unique_ptr<Ops> ops_;
  ModelInfo info_;
  Scratch s_;
  std::function<void(const TraceEvent&)> trace_;
};

std::unique_ptr<Model> llama_model_create(std::shared_ptr<const ModelArchive> archive,
                                          const ModelLoadOptions& options);
std::unique_ptr<Model> gemma3_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options);

}  // namespace memra
