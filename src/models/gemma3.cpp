// Gemma 3 (text): embeddings scaled by sqrt(n_embd), sandwich norms around attention and the
// GeGLU MLP (gelu-tanh), qk-norm, sliding-window layers with their own rope base interleaved
// with global layers (config.window), tied output embeddings. Norm weights arrive as (1 + w).
#include "models/decoder.h"

namespace memra {

namespace {

class Gemma3Model final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void forward(const Batch& batch, KvCache& kv_cache, std::span<float> logits) override {
    CpuKvCache& kv = kv_cast(kv_cache);
    const int64_t n = begin_step(batch, logits);
    const int64_t width = n * cfg_.n_embd;
    float *x = s_.x.data(), *h = s_.h.data(), *out = s_.out.data();
    embed(batch, x);
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& L = w_.layers[il];
      norm(x, L.attn_norm, n, h, "attn_norm", il);
      attention_block(il, batch, kv, h, out);
      norm(out, L.post_attn_norm, n, out, "post_attn_norm", il);
      ops_->add(x, out, width);
      trace("attn_residual", il, x, n, cfg_.n_embd);
      norm(x, L.ffn_norm, n, h, "ffn_norm", il);
      mlp_block(il, h, n, out);
      norm(out, L.post_ffn_norm, n, out, "post_ffn_norm", il);
      ops_->add(x, out, width);
      trace("ffn_residual", il, x, n, cfg_.n_embd);
    }
    logits_block(batch, x, logits);
  }
};

}  // namespace

std::unique_ptr<Model> gemma3_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options) {
  return std::make_unique<Gemma3Model>(std::move(archive), options);
}

}  // namespace memra
