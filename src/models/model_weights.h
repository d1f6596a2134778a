// The weights of a decoder model, bound by GGUF tensor name with their shapes checked against
// the config. Matrices keep their stored dtype (quantized matmul reads them as they are); small
// vectors (norm weights, biases) are converted to f32 once at load. Then the backend takes them:
// the CPU reads the mapped archive in place, CUDA holds device copies.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/ops.h"
#include "core/tensor.h"
#include "models/model_config.h"

namespace memra {

struct ModelArchive;

// A matrix maps n_in -> n_out features: ggml dims ne[0] = n_in, ne[1] = n_out. Vectors (norm
// weights, biases) are F32 views of [n]. An absent optional tensor has data == nullptr. After
// model_weights_upload every view points into backend memory.
struct LayerWeights {
  TensorView attn_norm;       // [n_embd]
  TensorView wq;              // n_embd -> n_heads * head_dim
  TensorView wk;              // n_embd -> n_kv_heads * head_dim
  TensorView wv;              // n_embd -> n_kv_heads * head_dim
  TensorView wo;              // n_heads * head_dim -> n_embd
  TensorView bq, bk, bv;      // qkv_bias: [n_heads * head_dim], [n_kv * head_dim] x2
  TensorView q_norm, k_norm;  // qk_norm: [head_dim]
  TensorView post_attn_norm;  // sandwich_norms: [n_embd]
  TensorView ffn_norm;        // [n_embd]
  TensorView w_gate;          // n_embd -> n_ff
  TensorView w_up;            // n_embd -> n_ff
  TensorView w_down;          // n_ff -> n_embd
  TensorView post_ffn_norm;   // sandwich_norms: [n_embd]
  // MoE layers (config.moe_layer[il]) instead of w_gate/w_up/w_down. The expert tensors stack
  // n_expert matrices: ne = {n_in, n_out, n_expert}, expert e's rows after expert e-1's.
  TensorView ffn_gate_inp;   // router: n_embd -> n_expert
  TensorView ffn_gate_exps;  // n_embd -> n_ff_exp, per expert
  TensorView ffn_up_exps;    // n_embd -> n_ff_exp, per expert
  TensorView ffn_down_exps;  // n_ff_exp -> n_embd, per expert
  // gemma4 (config.moe_beside_mlp): gate and up stacked per expert (n_embd -> 2 n_ff_exp, the
  // gate's rows first) instead of ffn_gate_exps / ffn_up_exps; the router input's scale; the
  // norms of the experts' input and of each branch's output; and the per-expert scale of the
  // routing weights (ffn_down_exps.scale).
  TensorView ffn_gate_up_exps;
  TensorView ffn_gate_inp_scale;                                // [n_embd]
  TensorView ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2;  // [n_embd]
  TensorView ffn_exp_scale;                                     // [n_expert]; absent = 1
  // gemma4: per-layer input (n_embd -> n_embd_per_layer gate, n_embd_per_layer -> n_embd
  // projection, its post norm), V's weightless RMSNorm (ones of head_dim), and the scale of
  // the layer's output (blk.N.layer_output_scale.weight, read at bind time).
  TensorView inp_gate, inp_proj, inp_post_norm, v_norm;
  float output_scale = 1.0f;
  // The shared expert (config.n_ff_shexp > 0) of an MoE layer and its gate.
  TensorView ffn_gate_inp_shexp;  // n_embd -> 1
  TensorView ffn_gate_shexp;      // n_embd -> n_ff_shexp
  TensorView ffn_up_shexp;        // n_embd -> n_ff_shexp
  TensorView ffn_down_shexp;      // n_ff_shexp -> n_embd
  // Gated attention (attn_output_gate): GGUF's attn_q holds per head the head_dim query rows
  // then head_dim gate rows; bound as two matrices (owned row copies) so one shared matmul
  // gives both.
  TensorView wq_gate;  // n_embd -> n_heads * head_dim
  // Gated delta-net layers (config.recurrent_layer[il]) instead of wq..wo; v heads in llama.cpp's
  // tiled order (ops.h DeltaNetParams).
  TensorView ssm_in_qkv;  // attn_qkv: n_embd -> conv_dim (q, k, v)
  TensorView ssm_in_z;    // attn_gate: n_embd -> n_v * v_dim (the output norm's gate)
  TensorView ssm_in_b;    // ssm_beta: n_embd -> n_v
  TensorView ssm_in_a;    // ssm_alpha: n_embd -> n_v
  TensorView ssm_conv;    // ssm_conv1d: f32 [conv_dim x kernel] (ggml ne {kernel, conv_dim})
  TensorView ssm_a;       // f32 [n_v] = -exp(A_log)
  TensorView ssm_dt;      // f32 [n_v] dt_bias
  TensorView ssm_norm;    // f32 [v_dim]
  TensorView ssm_out;     // n_v * v_dim -> n_embd
};

struct ModelWeights {
  TensorView token_embd;   // [n_embd x n_vocab]
  TensorView output;       // [n_embd x n_vocab]; the same tensor as token_embd when tied
  TensorView output_norm;  // [n_embd]
  // gemma4 per-layer input embeddings: token table [n_layers * n_embd_per_layer x n_vocab],
  // projection of the embeddings n_embd -> n_layers * n_embd_per_layer, its norm.
  TensorView per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm;
  std::vector<LayerWeights> layers;
  // Host storage of the vectors converted to f32 at bind time (the views above point into it
  // until they are uploaded).
  std::vector<std::vector<float>> host_vectors;
  std::vector<std::vector<uint8_t>> host_bytes;  // matrices split at bind time (wq / wq_gate)

  // Calls fn on every present tensor view (matrices and vectors).
  template <typename Fn>
  void for_each(Fn&& fn) {
    auto visit = [&](TensorView& t) {
      if (t.data) fn(t);
    };
    visit(token_embd);
    visit(output);
    visit(output_norm);
    visit(per_layer_token_embd);
    visit(per_layer_model_proj);
    visit(per_layer_proj_norm);
    for (LayerWeights& L : layers)
      for (TensorView* t : {&L.attn_norm,
                            &L.wq,
                            &L.wk,
                            &L.wv,
                            &L.wo,
                            &L.bq,
                            &L.bk,
                            &L.bv,
                            &L.q_norm,
                            &L.k_norm,
                            &L.post_attn_norm,
                            &L.ffn_norm,
                            &L.w_gate,
                            &L.w_up,
                            &L.w_down,
                            &L.post_ffn_norm,
                            &L.ffn_gate_inp,
                            &L.ffn_gate_exps,
                            &L.ffn_up_exps,
                            &L.ffn_down_exps,
                            &L.ffn_gate_up_exps,
                            &L.ffn_gate_inp_scale,
                            &L.ffn_exp_scale,
                            &L.ffn_pre_norm_2,
                            &L.ffn_post_norm_1,
                            &L.ffn_post_norm_2,
                            &L.inp_gate,
                            &L.inp_proj,
                            &L.inp_post_norm,
                            &L.v_norm,
                            &L.ffn_gate_inp_shexp,
                            &L.ffn_gate_shexp,
                            &L.ffn_up_shexp,
                            &L.ffn_down_shexp,
                            &L.wq_gate,
                            &L.ssm_in_qkv,
                            &L.ssm_in_z,
                            &L.ssm_in_b,
                            &L.ssm_in_a,
                            &L.ssm_conv,
                            &L.ssm_a,
                            &L.ssm_dt,
                            &L.ssm_norm,
                            &L.ssm_out})
        visit(*t);
  }
};

// Binds every tensor the config needs. Refuses a missing tensor, a wrong shape, a dtype the CPU
// cannot read, and any archive tensor the model would not use, each by name. Sets
// config.n_vocab from token_embd.
ModelWeights model_weights_bind(const ModelArchive& archive, ModelConfig& config);

// Makes every view backend-resident (Ops::weight_upload), once per distinct tensor (a tied output
// matrix is uploaded once). progress(done_bytes, total_bytes) is called after each tensor.
void model_weights_upload(ModelWeights& weights, Ops& ops,
                          const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace memra
