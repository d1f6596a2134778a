// Gemma 3 (text): embeddings scaled by sqrt(n_embd), sandwich norms around attention and the
// GeGLU MLP (gelu-tanh), qk-norm, sliding-window layers with their own rope base interleaved
// with global layers (config.window), tied output embeddings. Norm weights arrive as (1 + w).
#include "models/decoder.h"

namespace memra {

namespace {

class Gemma3Model final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void forward_layers(int64_t n, const BackendKvCache& kv) override {
    float *x = s_.x.f32(), *h = s_.h.f32(), *out = s_.out.f32();
    embed(x);
    norm(x, w_.layers[0].attn_norm, n, h, "attn_norm", 0);
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& L = w_.layers[il];
      attention_block(il, n, kv, h, out);
      norm(out, L.post_attn_norm, n, out, "post_attn_norm", il);
      add_norm(x, out, L.ffn_norm, n, h, "attn_residual", il, "ffn_norm", il);
      mlp_block(il, h, n, out);
      norm(out, L.post_ffn_norm, n, out, "post_ffn_norm", il);
      // The residual add fuses with the next layer's attention norm.
      if (il + 1 < cfg_.n_layers) {
        add_norm(x, out, w_.layers[il + 1].attn_norm, n, h, "ffn_residual", il, "attn_norm",
                 il + 1);
      } else {
        ops_->add(x, out, n * cfg_.n_embd);
        trace("ffn_residual", il, x, n, cfg_.n_embd);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Model> gemma3_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options) {
  return std::make_unique<Gemma3Model>(std::move(archive), options);
}

}  // namespace memra
