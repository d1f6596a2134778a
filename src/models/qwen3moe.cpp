// Qwen3 MoE: the Qwen3 decoder (qk-norm, neox rope, SiLU) whose feed-forward is a top-k softmax
// mixture of experts in the sparse layers (config.moe_layer: decoder_sparse_step minus
// mlp_only_layers) and the dense MLP elsewhere.
#include "models/decoder.h"

namespace memra {

namespace {

class Qwen3MoeModel final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void forward_layers(int64_t n, const BackendKvCache& kv) override {
    float *x = s_.x.f32(), *h = s_.h.f32(), *out = s_.out.f32();
    embed(x);
    norm(x, w_.layers[0].attn_norm, n, h, "attn_norm", 0);
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& L = w_.layers[il];
      attention_block(il, n, kv, h, out);
      add_norm(x, out, L.ffn_norm, n, h, "attn_residual", il, "ffn_norm", il);
      if (cfg_.moe_layer[il])
        moe_block(il, h, n, out);
      else
        mlp_block(il, h, n, out);
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

std::unique_ptr<Model> qwen3moe_model_create(std::shared_ptr<const ModelArchive> archive,
                                             const ModelLoadOptions& options) {
  return std::make_unique<Qwen3MoeModel>(std::move(archive), options);
}

}  // namespace memra
