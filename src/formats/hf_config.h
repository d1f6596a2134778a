// Hugging Face config.json + generation_config.json -> GGUF-convention metadata, with the keys
// and value types llama.cpp's converter writes, so an HF folder and a GGUF of the same model
// give model code the same metadata. Supported: LlamaForCausalLM (llama), Qwen2ForCausalLM
// (qwen2), Qwen3ForCausalLM (qwen3), Qwen3MoeForCausalLM (qwen3moe, model_type qwen3_moe),
// Gemma3ForCausalLM (gemma3, model_type gemma3_text), Gemma4ForCausalLM (gemma4, model_type
// gemma4_text), Qwen3_5ForCausalLM (qwen35, model_type qwen3_5_text) and Qwen3_5MoeForCausalLM
// (qwen35moe, model_type qwen3_5_moe_text); gemma4's keys: read_gemma4 in arch/gemma4.cpp.
// The multimodal wrappers Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration,
// Qwen3_5ForConditionalGeneration and Qwen3_5MoeForConditionalGeneration give their text model:
// text_config is read as the text class's config (its model_type must be that class's), the
// top-level tie_word_embeddings ties the lm_head (as transformers does), bos/eos/pad come from
// generation_config.json, then the top level, then text_config; vision/audio configs and image
// token ids are not read (the archive skips the towers: model_archive_hf.cpp).
// Unknown architectures and config values that change the math without a mapping are refused
// by name.
//
// Keys written (A = architecture; u32 unless noted):
//   general.architecture, general.name (strings); A.vocab_size, A.context_length
//   (max_position_embeddings), A.embedding_length, A.block_count, A.feed_forward_length,
//   A.attention.head_count, A.attention.head_count_kv, A.attention.key_length and
//   A.attention.value_length (head_dim), A.attention.layer_norm_rms_epsilon (f32),
//   A.rope.freq_base (f32); llama/qwen2/qwen3 also A.rope.dimension_count (= head_dim).
//   tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id (generation_config.json
//   first, then config.json). When eos_token_id is a list, eos_token_id is its first entry and
//   tokenizer.ggml.eos_token_ids (array of u32, a memra extension) holds all of them.
//   Rope scaling "linear": A.rope.scaling.type = "linear", A.rope.scaling.factor (f32), as
//   llama.cpp. Rope scaling "llama3": as llama.cpp's converter, no scaling.type key (llama.cpp
//   would refuse an unknown type); instead the archive adds the tensor rope_freqs.weight (F32,
//   head_dim/2 per-frequency divisors, see hf_llama3_rope_factors) and, for information,
//   A.rope.scaling.llama3.{factor, low_freq_factor, high_freq_factor} (f32) and
//   A.rope.scaling.llama3.original_context_length (u32). Any other rope type is refused.
//   gemma3: A.attention.sliding_window, A.rope.freq_base_swa (f32, the sliding layers' base),
//   A.attention.sliding_window_pattern (array of bool per layer, true = sliding window),
//   A.attention.scale (f32, 1/sqrt(query_pre_attn_scalar)), and when the config sets them
//   A.final_logit_softcapping / A.attn_logit_softcapping (f32).
//   qwen3moe: A.expert_count (num_experts), A.expert_used_count (num_experts_per_tok),
//   A.expert_feed_forward_length (moe_intermediate_size), A.expert_weights_norm (bool,
//   norm_topk_prob). Which layers are sparse (decoder_sparse_step, mlp_only_layers) has no GGUF
//   key: a layer is sparse when it has blk.N.ffn_gate_inp.weight (llama.cpp's qwen3moe expects
//   every layer sparse), and the archive checks the checkpoint's tensors against the config.
//   A GGUF without A.expert_weights_norm renormalizes the top-k weights (llama.cpp hard-codes
//   that for qwen3moe).
//   qwen35 (llama.cpp's keys): A.rope.dimension_count = head_dim * partial_rotary_factor (from
//   rope_parameters, else the top level, default 0.25), A.rope.dimension_sections (i32 array,
//   [11, 11, 10, 0]: multimodal rope sections, irrelevant to text positions),
//   A.full_attention_interval (layer i is full attention when (i + 1) % interval == 0;
//   layer_types must follow that pattern or are refused), A.ssm.conv_kernel
//   (linear_conv_kernel_dim), A.ssm.state_size (linear_key_head_dim), A.ssm.group_count
//   (linear_num_key_heads), A.ssm.time_step_rank (linear_num_value_heads), A.ssm.inner_size
//   (linear_value_head_dim * linear_num_value_heads). hidden_act other than silu,
//   attention_bias and rope types other than default are refused. qwen35moe: the same, no
//   A.feed_forward_length, and A.expert_count (num_experts), A.expert_used_count,
//   A.expert_feed_forward_length (moe_intermediate_size),
//   A.expert_shared_feed_forward_length (shared_expert_intermediate_size),
//   A.expert_weights_norm = true.
//
// What model code must assume when a GGUF from llama.cpp lacks a gemma3 key (llama.cpp
// hard-codes these for gemma3):
//   - no A.attention.sliding_window_pattern: layer i uses the sliding window unless
//     (i + 1) % 6 == 0 (pattern 6: five sliding layers, then one global);
//   - no A.rope.freq_base_swa: sliding layers use rope base 10000 and never rope scaling;
//     A.rope.freq_base and any A.rope.scaling.* apply to global layers only;
//   - no A.attention.scale: 1/sqrt(key_length), except the 27B shape (block_count 62) which
//     uses 1/sqrt(embedding_length / head_count);
//   - no softcapping keys: no softcapping.
//   - RMSNorm weights are stored as (1 + w) (GGUF semantics: y = x_hat * w_stored), embeddings
//     are scaled by sqrt(embedding_length) in model code, the MLP is GeGLU with tanh-gelu.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"

namespace memra {

inline constexpr uint64_t kMaxHfConfigBytes = 4u << 20;

struct HfModelConfig {
  std::string arch;             // GGUF architecture name: llama, qwen2, qwen3, gemma3, qwen35
  std::string hf_architecture;  // e.g. "LlamaForCausalLM"
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  bool tied_embeddings = false;
  gguf::Metadata metadata;  // GGUF-convention keys listed above
  // Contents of rope_freqs.weight (llama3 rope scaling; gemma4's proportional rope), else empty.
  std::vector<float> rope_freqs;
  std::vector<bool> moe_layers;  // qwen3moe: [n_layer] true where the layer routes to experts
  bool gemma4_k_eq_v = false;    // gemma4 attention_k_eq_v: full layers have no v_proj
  // A *ForConditionalGeneration wrapper: tensors are in its layout (hf_wrapper_text_name) and
  // its vision/audio towers are skipped (hf_wrapper_tower).
  bool multimodal = false;
};

// Maps parsed config.json (and generation_config.json, null when absent) to metadata. `name` is
// general.name (usually the folder's name). Errors name the config field.
HfModelConfig hf_config_from_json(const nlohmann::json& config,
                                  const nlohmann::json& generation_config, std::string_view name);

// Reads folder/config.json (required) and folder/generation_config.json (optional).
HfModelConfig hf_config_load(const std::string& folder);

// llama.cpp's rope_freqs for Llama 3 rope scaling: for each of head_dim/2 frequencies
// theta^(-2i/head_dim), wavelengths shorter than original_context/high_freq_factor keep factor
// 1, longer than original_context/low_freq_factor get `factor`, and those between are smoothly
// interpolated. Model code divides frequency i by the entry. Computed in double, stored as f32.
std::vector<float> hf_llama3_rope_factors(double theta, int64_t head_dim, double factor,
                                          double low_freq_factor, double high_freq_factor,
                                          double original_context);

}  // namespace memra
