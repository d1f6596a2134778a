// The shapes `memra synth` knows, each as the fields of its public config.json that memra reads,
// and the plan built from one: metadata through hf_config (so keys, types and rope_freqs are
// exactly what `memra convert` writes for the real checkpoint), the tensor list in llama.cpp's
// names (synth_tensors.cpp), and each tensor's type from convert's mix policy.
#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_config.h"
#include "formats/synth.h"
#include "formats/synth_tensors.h"
#include "formats/synth_vocab.h"

namespace memra::synth {
namespace {

struct ShapeDef {
  ShapeInfo info;
  VocabKind vocab;
  const char* config;  // config.json of the public checkpoint (the fields memra reads)
};

const ShapeDef kShapes[] = {
    {{"qwen3-0.6b", "Qwen3-0.6B: hidden 1024, 28 layers, 16/8 heads, ffn 3072, tied"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
         "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
         "tie_word_embeddings": true})"},
    {{"qwen3-8b", "Qwen3-8B: hidden 4096, 36 layers, 32/8 heads, ffn 12288, untied"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
         "tie_word_embeddings": false})"},
    {{"llama3-8b", "Llama-3.1-8B: hidden 4096, 32 layers, 32/8 heads, ffn 14336, llama3 rope"},
     VocabKind::llama3,
     R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
         "tie_word_embeddings": false})"},
    {{"gemma3-270m", "Gemma-3-270M: hidden 640, 18 layers, 4/1 heads, head_dim 256, window 512"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640,
         "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
         "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": null, "sliding_window": 512,
         "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
         "final_logit_softcapping": null, "attn_logit_softcapping": null,
         "tie_word_embeddings": true})"},
    {{"gemma3-12b", "Gemma-3-12B: hidden 3840, 48 layers, 16/8 heads, head_dim 256, window 1024"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 3840,
         "intermediate_size": 15360, "num_hidden_layers": 48, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 262208,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
         "sliding_window": 1024, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
         "final_logit_softcapping": null, "attn_logit_softcapping": null,
         "tie_word_embeddings": true})"},
    // Qwen3.5 / 3.6 (qwen35, qwen35moe): the text decoders of the published image-text
    // checkpoints. Hidden, layers, layout, heads, head dims, widths, vocab and context are the
    // model cards' (as quoted by public pages; the official config.json files were not read
    // directly); rope_theta 1e7, partial_rotary_factor 0.25, conv kernel 4 and rms_norm_eps 1e-6
    // are from copies of their text_config. tie_word_embeddings false: 27B's card says untied;
    // for 9B it is inferred from the checkpoint's 19.3 GB (tied would be ~1B short), for 35B-A3B
    // assumed as 9B (34.66B vs 34.15B tied; both round to 35B). Not written: the vision tower
    // (memra runs text only) and the multi-token-prediction block (the loader would skip it).
    {{"qwen3.5-9b", "Qwen3.5-9B: hidden 4096, 32 layers (3 delta-net : 1 attention), ffn 12288"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": 4096,
         "intermediate_size": 12288, "num_hidden_layers": 32, "num_attention_heads": 16,
         "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 248320,
         "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                             "partial_rotary_factor": 0.25},
         "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
         "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
         "tie_word_embeddings": false})"},
    {{"qwen3.6-27b", "Qwen3.6-27B: hidden 5120, 64 layers (3 delta-net : 1 attention), ffn 17408"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": 5120,
         "intermediate_size": 17408, "num_hidden_layers": 64, "num_attention_heads": 24,
         "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 248320,
         "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                             "partial_rotary_factor": 0.25},
         "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
         "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
         "tie_word_embeddings": false})"},
    {{"qwen3-30b-a3b",
      "Qwen3-30B-A3B: hidden 2048, 48 layers, 32/4 heads, 128 experts of 768 (top 8)"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
         "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
         "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
         "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "num_experts": 128,
         "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": true,
         "decoder_sparse_step": 1, "mlp_only_layers": [], "intermediate_size": 6144,
         "tie_word_embeddings": false})"},
    {{"qwen3.6-35b-a3b",
      "Qwen3.6-35B-A3B: hidden 2048, 40 layers, 256 experts of 512 (top 8) + shared expert"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
         "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
         "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
         "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                             "partial_rotary_factor": 0.25},
         "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
         "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
         "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
         "shared_expert_intermediate_size": 512, "tie_word_embeddings": false})"},
    // Gemma 4 (gemma4): the text decoders, from copies of the checkpoints' text_config (in
    // public test code) and the model cards: five sliding layers (head dim 256, window 1024, rope
    // 1e4) then one full layer (head dim 512, fewer kv heads, V = K, proportional rope 1e6 over a
    // quarter of the pairs), final softcap 30, tied embeddings, no per-layer inputs or KV
    // sharing. max_position_embeddings: copies disagree (131072 / 262144); the cards' 256K wins.
    // Vision tower not written.
    {{"gemma-4-31b", "Gemma-4-31B: hidden 5376, 60 layers, 32/16 heads (full: 512-wide, 4 kv)"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "hidden_size": 5376,
         "intermediate_size": 21504, "num_hidden_layers": 60, "num_attention_heads": 32,
         "num_key_value_heads": 16, "head_dim": 256, "global_head_dim": 512,
         "num_global_key_value_heads": 4, "attention_k_eq_v": true, "vocab_size": 262144,
         "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "sliding_window": 1024,
         "sliding_window_pattern": 6, "final_logit_softcapping": 30.0,
         "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
         "use_double_wide_mlp": false, "enable_moe_block": false,
         "rope_parameters": {"full_attention": {"rope_type": "proportional",
                                                "partial_rotary_factor": 0.25,
                                                "rope_theta": 1000000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
         "tie_word_embeddings": true})"},
    {{"gemma-4-26b-a4b",
      "Gemma-4-26B-A4B: hidden 2816, 30 layers, MLP 2112 + 128 experts of 704 (top 8)"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "hidden_size": 2816,
         "intermediate_size": 2112, "num_hidden_layers": 30, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
         "num_global_key_value_heads": 2, "attention_k_eq_v": true, "vocab_size": 262144,
         "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "sliding_window": 1024,
         "sliding_window_pattern": 6, "final_logit_softcapping": 30.0,
         "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
         "use_double_wide_mlp": false, "enable_moe_block": true, "num_experts": 128,
         "top_k_experts": 8, "moe_intermediate_size": 704,
         "rope_parameters": {"full_attention": {"rope_type": "proportional",
                                                "partial_rotary_factor": 0.25,
                                                "rope_theta": 1000000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
         "tie_word_embeddings": true})"},
};

const ShapeDef& find_shape(const std::string& name) {
  for (const ShapeDef& s : kShapes)
    if (s.info.name == name) return s;
  fail(ErrorCode::invalid_argument, "unknown shape '{}' (known: {})", name, shape_names());
}

}  // namespace

const std::vector<ShapeInfo>& shapes() {
  static const std::vector<ShapeInfo> list = [] {
    std::vector<ShapeInfo> v;
    for (const ShapeDef& s : kShapes) v.push_back(s.info);
    return v;
  }();
  return list;
}

std::string shape_names() {
  std::string out;
  for (const ShapeDef& s : kShapes) out += (out.empty() ? "" : ", ") + std::string(s.info.name);
  return out;
}

Plan make_plan(const Options& options) {
  const ShapeDef& shape = find_shape(options.shape);
  nlohmann::json config = nlohmann::json::parse(shape.config);
  if (!options.config_patch.empty()) {
    const nlohmann::json patch = nlohmann::json::parse(options.config_patch, nullptr, false);
    if (!patch.is_object())
      fail(ErrorCode::invalid_argument, "config patch for {} is not a JSON object: {}",
           shape.info.name, options.config_patch);
    config.merge_patch(patch);
  }
  const int64_t own_layers = config["num_hidden_layers"].get<int64_t>();
  if (options.layers < 0 || options.layers > own_layers)
    fail(ErrorCode::invalid_argument, "--layers {} is not in 1..{} (the {} block count)",
         options.layers, own_layers, shape.info.name);
  // GGUF says which qwen35 layers are full attention by one interval, which must not exceed the
  // block count: fewer layers would leave no attention layer (and no file the loader accepts).
  const int64_t interval = config.value("full_attention_interval", int64_t{0});
  if (options.layers > 0 && options.layers < interval)
    fail(ErrorCode::invalid_argument,
         "--layers {} keeps no full-attention layer of {} (every {}th is one); use at least {}",
         options.layers, shape.info.name, interval, interval);
  std::string name = fmt::format("memra synth {} seed {}", shape.info.name, options.seed);
  if (options.layers > 0) {
    config["num_hidden_layers"] = options.layers;
    name += fmt::format(" layers {}", options.layers);
  }
  if (!options.config_patch.empty()) name += " (scaled-down)";
  const HfModelConfig hf = hf_config_from_json(config, nlohmann::json(), name);

  Plan plan;
  plan.n_vocab = hf.vocab_size;
  plan.metadata = hf.metadata;
  // As memra convert writes them (convert.cpp write_gguf).
  plan.metadata.set("general.file_type",
                    gguf::Value::make_u32(convert::llama_file_type(options.mix)));
  plan.metadata.set("general.quantization_version", gguf::Value::make_u32(2));
  if (options.vocab_from.empty())
    vocab_write(shape.vocab, hf.vocab_size, plan.metadata);
  else
    vocab_copy(options.vocab_from, hf.vocab_size, plan.metadata);

  plan.tensors = tensor_list(hf);
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [](const TensorPlan& a, const TensorPlan& b) {
                     return convert::tensor_order_less(a.view, b.view);
                   });
  std::vector<TensorView> views;
  for (const TensorPlan& t : plan.tensors) views.push_back(t.view);
  const convert::PolicyContext policy = convert::make_policy_context(options.mix, views);
  for (TensorPlan& t : plan.tensors) t.type = convert::choose_type(policy, t.view);
  return plan;
}

}  // namespace memra::synth
