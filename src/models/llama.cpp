// The Llama family of decoders: Llama 3 (GGUF "normal" rope layout, llama3 rope scaling via
// rope_freqs), Qwen2 (qkv bias), Qwen3 (qk-norm) and Qwen3 MoE (Qwen3 whose feed-forward is a
// top-k softmax mixture of experts in the sparse layers: config.moe_layer, from
// decoder_sparse_step minus mlp_only_layers), and Qwen3.5 dense / MoE (gated delta-net layers in
// config.recurrent_layer, models/qwen35.cpp), as config variants of one forward pass.
#include "models/decoder.h"

namespace memra {

namespace {

class LlamaModel final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void forward_layers(int64_t n, const BackendKvCache& kv) override {
    float *x = s_.x.f32(), *h = s_.h.f32(), *out = s_.out.f32();
    embed(x);
    norm(x, w_.layers[0].attn_norm, n, h, "attn_norm", 0);
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& L = w_.layers[il];
      mixer_block(il, n, kv, h, out);
      add_norm(x, out, L.ffn_norm, n, h, "attn_residual", il, "ffn_norm", il);
      ffn_block(il, h, n, out);
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

std::unique_ptr<Model> llama_model_create(std::shared_ptr<const ModelArchive> archive,
                                          const ModelLoadOptions& options) {
  return std::make_unique<LlamaModel>(std::move(archive), options);
}

}  // namespace memra
