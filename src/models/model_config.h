// The hyperparameters of a decoder model, read from GGUF-convention metadata (formats/
// hf_config.h lists the keys and the defaults llama.cpp assumes for GGUFs that lack gemma3 keys).
// Every architecture variant is a field here, so the model files branch on config, not on names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace memra {

struct ModelArchive;

enum class Activation { silu, gelu_tanh };

struct ModelConfig {
  std::string arch;  // llama, qwen2, qwen3, qwen3moe, gemma3, gemma4, qwen35, qwen35moe
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  float norm_eps = 1e-5f;

  RopeParams rope_global;       // full-attention layers
  RopeParams rope_local;        // sliding-window layers (gemma3); same as global elsewhere
  std::vector<int32_t> window;  // [n_layers] sliding window in tokens, 0 = full attention

  bool qkv_bias = false;        // qwen2
  bool qk_norm = false;         // qwen3, gemma3: RMSNorm over each head's q and k
  bool sandwich_norms = false;  // gemma3: post-attention and post-ffn norms
  float embed_scale = 1.0f;     // gemma3: sqrt(n_embd)
  float attn_scale = 0.0f;      // multiplies q.k
  float attn_softcap = 0.0f;    // 0 = none
  float final_softcap = 0.0f;   // 0 = none
  Activation activation = Activation::silu;

  // Mixture of experts (qwen3moe): the layers with moe_layer[il] route each token to the
  // n_expert_used best of n_expert SiLU-gated experts of width n_ff_exp (softmax router, weights
  // renormalized over the chosen ones when expert_weights_norm); the others use the dense MLP.
  int32_t n_expert = 0;  // 0 = no MoE layers
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  bool expert_weights_norm = false;
  std::vector<bool> moe_layer;  // [n_layers]
  // gemma4 (HF enable_moe_block): the routed experts run beside the layer's dense MLP instead of
  // replacing it. The router reads rms_norm(x) * ffn_gate_inp.scale / sqrt(n_embd) of the
  // residual x, the experts pre_ffw_norm_2(x); each expert's gate and up are one stacked tensor
  // (ffn_gate_up_exps), its activation is `activation`, and its routing weight is times its
  // ffn_down_exps.scale; the two branches are normed (post_ffw_norm_1 / _2) and summed.
  bool moe_beside_mlp = false;

  // gemma4 (empty elsewhere, where the uniform fields apply): per-layer head dims, kv heads and
  // feed-forward widths (head_dim, n_kv_heads and n_ff above then hold the maxima, which size
  // the scratch), the layer whose KV a layer attends over (itself, or for the last
  // shared_kv_layers layers the last earlier layer of the same kind, whose KV it reuses), and
  // whether a layer's V is its K projection (attention_k_eq_v: no attn_v tensor).
  std::vector<int32_t> layer_head_dim, layer_n_kv_heads, layer_n_ff, kv_source;
  std::vector<bool> v_from_k;
  int32_t n_embd_per_layer = 0;  // gemma4 per-layer input embedding width; 0 = none
  // qwen35moe: a shared expert (SiLU-gated MLP of this width) beside the routed ones, its output
  // times sigmoid(ffn_gate_inp_shexp . h); 0 = none.
  int32_t n_ff_shexp = 0;

  // Hybrid stacks (qwen35): the layers with recurrent_layer[il] are gated delta-net linear
  // attention (no KV; a fixed-size state per sequence), the others gated full attention.
  std::vector<bool> recurrent_layer;  // [n_layers]; empty for plain decoders
  bool attn_output_gate = false;      // q_proj doubles as an output gate (sigmoid) per head
  int32_t ssm_conv_kernel = 0;        // causal depthwise conv width
  int32_t ssm_k_heads = 0;            // linear_num_key_heads (ssm.group_count)
  int32_t ssm_v_heads = 0;            // linear_num_value_heads (ssm.time_step_rank)
  int32_t ssm_k_dim = 0;              // linear_key_head_dim (ssm.state_size)
  int32_t ssm_v_dim = 0;              // linear_value_head_dim (ssm.inner_size / v heads)
  int32_t n_nextn_layers = 0;         // multi-token-prediction blocks after the n_layers (unused)

  bool hybrid() const { return !recurrent_layer.empty(); }
  // Channels of the causal conv: q, k (n_k heads of k_dim each) and v (n_v of v_dim).
  int64_t ssm_conv_dim() const {
    return 2 * int64_t{ssm_k_heads} * ssm_k_dim + int64_t{ssm_v_heads} * ssm_v_dim;
  }
};

// Reads and validates the config for archive.architecture(); refuses unknown architectures and
// unsupported values (rope scaling type, partial rotary dims that are odd, ...) by name.
ModelConfig model_config_read(const ModelArchive& archive);

}  // namespace memra
