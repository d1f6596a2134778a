// The weights of a decoder model, bound by GGUF tensor name with their shapes checked against
// the config. Matrices stay in the archive in their stored dtype (quantized matmul reads them in
// place); small vectors (norm weights, biases) are converted to f32 once at load.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/model_config.h"

namespace memra {

struct ModelArchive;

// A matrix maps n_in -> n_out features: ggml dims ne[0] = n_in, ne[1] = n_out.
struct LayerWeights {
  std::vector<float> attn_norm;        // [n_embd]
  const TensorView* wq = nullptr;      // n_embd -> n_heads * head_dim
  const TensorView* wk = nullptr;      // n_embd -> n_kv_heads * head_dim
  const TensorView* wv = nullptr;      // n_embd -> n_kv_heads * head_dim
  const TensorView* wo = nullptr;      // n_heads * head_dim -> n_embd
  std::vector<float> bq, bk, bv;       // qkv_bias: [n_heads * head_dim], [n_kv * head_dim] x2
  std::vector<float> q_norm, k_norm;   // qk_norm: [head_dim]
  std::vector<float> post_attn_norm;   // sandwich_norms: [n_embd]
  std::vector<float> ffn_norm;         // [n_embd]
  const TensorView* w_gate = nullptr;  // n_embd -> n_ff
  const TensorView* w_up = nullptr;    // n_embd -> n_ff
  const TensorView* w_down = nullptr;  // n_ff -> n_embd
  std::vector<float> post_ffn_norm;    // sandwich_norms: [n_embd]
};

struct ModelWeights {
  const TensorView* token_embd = nullptr;  // [n_embd x n_vocab]
  const TensorView* output = nullptr;      // [n_embd x n_vocab]; token_embd when tied
  std::vector<float> output_norm;          // [n_embd]
  std::vector<LayerWeights> layers;
};

// Binds every tensor the config needs. Refuses a missing tensor, a wrong shape, a dtype the CPU
// cannot read, and any archive tensor the model would not use, each by name. Sets
// config.n_vocab from token_embd.
ModelWeights model_weights_bind(const ModelArchive& archive, ModelConfig& config);

}  // namespace memra
