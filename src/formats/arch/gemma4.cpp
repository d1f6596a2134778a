// Gemma 4 (Gemma4ForCausalLM, and the text model of Gemma4ForConditionalGeneration): Gemma 3's
// layer plus per-layer input embeddings, the layer output scale and the MoE block beside the
// MLP (llama.cpp's gemma3n / gemma4 names).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

using gguf::Value;
using nlohmann::json;

// As transformers 5.17 saves the wrapper.
constexpr HfTower kTowers[] = {
    {"model.vision_tower.", "vision tower"},
    {"model.embed_vision.", "vision embedder"},
    {"model.audio_tower.", "audio tower"},
    {"model.embed_audio.", "audio embedder"},
};

constexpr HfClass kClasses[] = {
    {"Gemma4ForCausalLM", "gemma4_text"},
    {"Gemma4ForConditionalGeneration", "gemma4", "gemma4_text", kTowers},
};

constexpr HfNameMapping kPerLayerGlobal[] = {
    {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
    {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
    {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
};

// Per-layer input embeddings and the layer output scale.
constexpr HfNameMapping kPerLayer[] = {
    {"per_layer_input_gate.weight", "inp_gate.weight"},
    {"per_layer_projection.weight", "proj.weight"},
    {"post_per_layer_input_norm.weight", "post_norm.weight"},
    {"layer_scalar", "layer_output_scale.weight"},
};

// The MoE block (enable_moe_block): the router's projection, its input scale and per-expert
// output scale, the experts as transformers saves them (one 3-D tensor each, gate_up_proj kept
// fused as llama.cpp keeps it), and the block's extra norms.
constexpr HfNameMapping kMoe[] = {
    {"router.proj.weight", "ffn_gate_inp.weight"},
    {"router.scale", "ffn_gate_inp.scale"},
    {"router.per_expert_scale", "ffn_down_exps.scale"},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"experts.down_proj", "ffn_down_exps.weight"},
    {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
    {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
    {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
};

constexpr HfNameTable kGlobal[] = {kPerLayerGlobal};
constexpr HfNameTable kLayer[] = {kHfCommonLayerNames, kHfGemmaNormNames, kPerLayer, kMoe,
                                  kHfQkNormNames};

// Gemma 4's mixture-of-experts block (enable_moe_block): every layer routes to top_k_experts of
// num_experts GeGLU experts of moe_intermediate_size beside its dense MLP. The keys are
// llama.cpp's (A.expert_count, A.expert_used_count, A.expert_feed_forward_length); like its
// converter we write no A.expert_weights_norm: Gemma 4 always renormalizes the top-k weights.
void read_gemma4_moe(HfModelConfig& out, const HfConfigReader& r) {
  const std::string& a = out.arch;
  const int64_t n_expert = r.req_int("num_experts", 1, 1 << 16);
  hf_set_u32(out.metadata, a + ".expert_count", n_expert);
  hf_set_u32(out.metadata, a + ".expert_used_count", r.req_int("top_k_experts", 1, n_expert));
  hf_set_u32(out.metadata, a + ".expert_feed_forward_length",
             r.req_int("moe_intermediate_size", 1, 1 << 22));
}

// Gemma 4 (text): per-layer head dims and kv heads (per_layer_config, or the older
// global_head_dim / num_global_key_value_heads), proportional partial rotary on full layers,
// KV sharing, double-wide MLP in the sharing layers, per-layer input embeddings, the MoE block
// beside the MLP (enable_moe_block). Keys beyond gemma3's: A.attention.key_length_swa /
// value_length_swa (sliding head dim; key_length is the full layers'), A.attention.head_count_kv
// and A.feed_forward_length as per-layer u32 arrays, A.rope.dimension_count (= key_length; the
// proportional rope's unrotated pairs are in rope_freqs.weight) and dimension_count_swa,
// A.attention.shared_kv_layers,
// A.embedding_length_per_layer_input, and read_gemma4_moe's. attention_k_eq_v has no key: a full
// layer without attn_v.weight takes V from K (the archive checks the config).
void read_gemma4(HfModelConfig& out, const HfConfigReader& r) {
  const std::string act = r.opt_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    fail(ErrorCode::unsupported, "{}: hidden_activation '{}' is not supported (gelu_pytorch_tanh)",
         r.file, act);
  if (const auto bidi = r.opt_string("use_bidirectional_attention"))
    fail(ErrorCode::unsupported, "{}: use_bidirectional_attention = '{}' is not supported", r.file,
         *bidi);
  if (r.opt_bool("attention_bias", false))
    fail(ErrorCode::unsupported, "{}: attention_bias = true is not supported for gemma4", r.file);
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  const int64_t L = out.n_layer;
  if (r.opt_bool("enable_moe_block", false)) read_gemma4_moe(out, r);
  const std::vector<bool> sliding = hf_gemma3_sliding_layers(r, L);
  const bool k_eq_v = r.opt_bool("attention_k_eq_v", false);
  out.gemma4_k_eq_v = k_eq_v;
  std::vector<int64_t> head_dim(L), kv_heads(L, out.n_head_kv);
  for (int64_t il = 0; il < L; ++il) head_dim[il] = out.head_dim;
  if (const json* plc = r.find("per_layer_config")) {
    if (!plc->is_object())
      fail(ErrorCode::malformed_file, "{}: per_layer_config must be an object", r.file);
    for (const auto& [key, over] : plc->items()) {
      std::vector<int64_t> layers;
      if (key == "full_attention" || key == "sliding_attention") {
        for (int64_t il = 0; il < L; ++il)
          if (sliding[il] == (key == "sliding_attention")) layers.push_back(il);
      } else {
        size_t used = 0;
        int64_t il = -1;
        try {
          il = std::stoll(key, &used);
        } catch (...) {
        }
        if (used != key.size() || il < 0 || il >= L)
          fail(ErrorCode::unsupported, "{}: per_layer_config key '{}' is not a layer index", r.file,
               key);
        layers.push_back(il);
      }
      if (!over.is_object())
        fail(ErrorCode::malformed_file, "{}: per_layer_config[{}] must be an object", r.file, key);
      const HfConfigReader o{over, r.file};
      for (const auto& [field, value] : over.items())
        if (field != "head_dim" && field != "num_key_value_heads")
          fail(ErrorCode::unsupported, "{}: per_layer_config[{}].{} is not supported", r.file, key,
               field);
      for (int64_t il : layers) {
        head_dim[il] = o.opt_int("head_dim", 2, 1 << 14).value_or(head_dim[il]);
        kv_heads[il] = o.opt_int("num_key_value_heads", 1, out.n_head).value_or(kv_heads[il]);
      }
    }
  } else {
    const int64_t global = r.opt_int("global_head_dim", 2, 1 << 14).value_or(512);
    const auto global_kv = r.opt_int("num_global_key_value_heads", 1, out.n_head);
    for (int64_t il = 0; il < L; ++il) {
      if (sliding[il]) continue;
      head_dim[il] = global;
      if (k_eq_v && global_kv) kv_heads[il] = *global_kv;
    }
  }
  int64_t hd_full = 0, hd_swa = 0;
  for (int64_t il = 0; il < L; ++il) {
    int64_t& hd = sliding[il] ? hd_swa : hd_full;
    if (hd != 0 && hd != head_dim[il])
      fail(ErrorCode::unsupported,
           "{}: per_layer_config gives {} layers different head dims ({} and {})", r.file,
           sliding[il] ? "sliding" : "full", hd, head_dim[il]);
    hd = head_dim[il];
    if (hd % 2 || out.n_head % kv_heads[il])
      fail(ErrorCode::malformed_file, "{}: layer {} has head_dim {} and {} kv heads", r.file, il,
           hd, kv_heads[il]);
  }
  if (hd_full == 0) hd_full = hd_swa;
  if (hd_swa == 0) hd_swa = hd_full;
  hf_set_u32(md, a + ".attention.key_length", hd_full);
  hf_set_u32(md, a + ".attention.value_length", hd_full);
  hf_set_u32(md, a + ".attention.key_length_swa", hd_swa);
  hf_set_u32(md, a + ".attention.value_length_swa", hd_swa);
  const int64_t shared = r.opt_int("num_kv_shared_layers", 0, L - 1).value_or(0);
  hf_set_u32(md, a + ".attention.shared_kv_layers", shared);
  const int64_t ff = r.req_int("intermediate_size", 1, 1 << 22);
  const bool double_wide = r.opt_bool("use_double_wide_mlp", false);
  std::vector<Value> kv_list, ff_list;
  for (int64_t il = 0; il < L; ++il) {
    kv_list.push_back(Value::make_u32(static_cast<uint32_t>(kv_heads[il])));
    const bool wide = double_wide && il >= L - shared && L - shared > 0;
    ff_list.push_back(Value::make_u32(static_cast<uint32_t>(ff * (wide ? 2 : 1))));
  }
  md.set(a + ".attention.head_count_kv", Value::make_array(gguf::ValueType::u32, kv_list));
  md.set(a + ".feed_forward_length", Value::make_array(gguf::ValueType::u32, ff_list));
  const int64_t ple = r.opt_int("hidden_size_per_layer_input", 0, 1 << 16).value_or(256);
  if (ple > 0) {
    const int64_t ple_vocab =
        r.opt_int("vocab_size_per_layer_input", 1, 1 << 24).value_or(out.vocab_size);
    if (ple_vocab != out.vocab_size)
      fail(ErrorCode::unsupported,
           "{}: vocab_size_per_layer_input {} differs from vocab_size {}; not supported", r.file,
           ple_vocab, out.vocab_size);
    hf_set_u32(md, a + ".embedding_length_per_layer_input", ple);
  }
  // HfRope per layer type; transformers' defaults when rope_parameters is absent.
  const json* params = r.find("rope_parameters");
  if (params != nullptr && !params->is_object())
    fail(ErrorCode::malformed_file, "{}: rope_parameters must be an object", r.file);
  const json empty = json::object();
  auto rope_of = [&](const char* type) -> const json& {
    if (params == nullptr || !params->contains(type)) return empty;
    return (*params)[type];
  };
  const HfConfigReader full{rope_of("full_attention"), r.file};
  const HfConfigReader swa{rope_of("sliding_attention"), r.file};
  const std::string full_type =
      full.opt_string("rope_type").value_or(params ? "default" : "proportional");
  const std::string swa_type = swa.opt_string("rope_type").value_or("default");
  if (swa_type != "default")
    fail(ErrorCode::unsupported,
         "{}: rope_parameters.sliding_attention rope_type '{}' is not "
         "supported (default)",
         r.file, swa_type);
  if (full_type != "default" && full_type != "proportional")
    fail(ErrorCode::unsupported,
         "{}: rope_parameters.full_attention rope_type '{}' is not "
         "supported (default, proportional)",
         r.file, full_type);
  if (full.positive_float("factor", 1.0) != 1.0)
    fail(ErrorCode::unsupported, "{}: rope_parameters.full_attention.factor != 1 is not supported",
         r.file);
  int64_t n_rot = hd_full;
  if (full_type == "proportional") {
    const double prf = full.positive_float("partial_rotary_factor", params ? 1.0 : 0.25);
    n_rot = 2 * static_cast<int64_t>(std::floor(prf * static_cast<double>(hd_full) / 2));
  }
  hf_set_f32(md, a + ".rope.freq_base", full.positive_float("rope_theta", 1e6));
  hf_set_f32(md, a + ".rope.freq_base_swa", swa.positive_float("rope_theta", 10000.0));
  // As llama.cpp's converter: ggml's neox rope can leave only the tail of a head unrotated, while
  // proportional rope leaves the tail of each half, so the full layers rotate their whole head
  // (A.rope.dimension_count = key_length) with a per-frequency divisor of 1e30 (frequency ~0) on
  // the pairs past n_rot / 2, in rope_freqs.weight.
  hf_set_u32(md, a + ".rope.dimension_count", hd_full);
  if (n_rot < hd_full) {
    out.rope_freqs.assign(static_cast<size_t>(hd_full / 2), 1e30f);
    std::fill_n(out.rope_freqs.begin(), n_rot / 2, 1.0f);
  }
  hf_set_u32(md, a + ".rope.dimension_count_swa", hd_swa);
  hf_set_u32(md, a + ".attention.sliding_window",
             r.opt_int("sliding_window", 1, kHfU32Max).value_or(512));
  std::vector<Value> flags;
  for (bool s : sliding) flags.push_back(Value::make_bool(s));
  md.set(a + ".attention.sliding_window_pattern",
         Value::make_array(gguf::ValueType::boolean, std::move(flags)));
  if (const auto cap = r.opt_float("final_logit_softcapping"))
    hf_set_f32(md, a + ".final_logit_softcapping", *cap);
}

}  // namespace

extern constexpr ArchDescriptor kArchGemma4{
    .name = "gemma4",
    .hf_classes = kClasses,
    .global_names = kGlobal,
    .layer_names = kLayer,
    .read_hf_config = read_gemma4,
    .tied_by_default = true,
    .model = ArchModel::gemma4,
};

}  // namespace memra
