// Qwen3.5 (qwen35): a hybrid stack whose layers are either gated delta-net linear attention (a
// causal depthwise conv and the gated delta rule over a fixed-size state per sequence, then a
// gated RMSNorm) or gated full attention (qk-norm, partial rotary, a sigmoid output gate), each
// followed by the SiLU-gated MLP. transformers' Qwen3_5DecoderLayer / Qwen3_5GatedDeltaNet are
// the reference; the weights follow llama.cpp's qwen35 GGUF (norms stored as 1 + w, A as
// -exp(A_log), v heads in tiled order), which the HF archive produces from a checkpoint. The layer
// loop is llama's (models/llama.cpp): DecoderModel::mixer_block picks this block per layer.
#include "models/decoder.h"

namespace memra {

void DecoderModel::delta_net_block(int il, int64_t n, const BackendKvCache& kv, const float* h,
                                   float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t conv_dim = cfg_.ssm_conv_dim(), nv = cfg_.ssm_v_heads;
  const int64_t v_total = nv * cfg_.ssm_v_dim;
  float *qkv = s_.ssm_qkv.f32(), *z = s_.ssm_z.f32(), *b = s_.ssm_b.f32(), *a = s_.ssm_a.f32();
  const TensorView* in_w[] = {&L.ssm_in_qkv, &L.ssm_in_z, &L.ssm_in_b, &L.ssm_in_a};
  float* const in_y[] = {qkv, z, b, a};
  ops_->matmul_shared(in_w, h, n, in_y);
  trace("ssm_in_qkv", il, qkv, n, conv_dim);
  trace("ssm_in_z", il, z, n, v_total);
  trace("ssm_beta", il, b, n, nv);
  trace("ssm_alpha", il, a, n, nv);
  const StateLayerView state = kv.state(il);
  float* conv = s_.ssm_conv.f32();
  ops_->ssm_conv(state, qkv, conv_dim, cfg_.ssm_conv_kernel,
                 static_cast<const float*>(L.ssm_conv.data), conv);
  trace("ssm_conv", il, conv, n, conv_dim);
  float* core = s_.ssm_core.f32();
  const DeltaNetParams params{cfg_.ssm_k_heads, cfg_.ssm_v_heads, cfg_.ssm_k_dim, cfg_.ssm_v_dim};
  ops_->gated_delta_rule(state, conv, a, b, static_cast<const float*>(L.ssm_a.data),
                         static_cast<const float*>(L.ssm_dt.data), params, core);
  trace("ssm_delta", il, core, n, v_total);
  ops_->rms_norm_gated(core, static_cast<const float*>(L.ssm_norm.data), z, n * nv, cfg_.ssm_v_dim,
                       cfg_.norm_eps, core);
  trace("ssm_norm", il, core, n, v_total);
  ops_->matmul(L.ssm_out, core, n, out);
  trace("ssm_out", il, out, n, cfg_.n_embd);
}

}  // namespace memra
