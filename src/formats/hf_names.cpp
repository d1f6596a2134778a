// The per-architecture name tables. Global tensors map one to one; per-layer tensors are
// "model.layers.N.<suffix>" -> "blk.N.<gguf suffix>".
#include "formats/hf_names.h"

#include <charconv>

namespace memra {
namespace {

struct Mapping {
  std::string_view hf;
  std::string_view gguf;
};

// Shared by every supported architecture.
constexpr Mapping kCommonLayer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
};

// Llama, Qwen2, Qwen3: one norm before the MLP.
constexpr Mapping kDenseLayer[] = {
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

constexpr Mapping kQkNormLayer[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};

// Gemma 3 normalizes after attention and around the MLP; HF's post_attention_layernorm is the
// norm applied to the attention output, not the one before the MLP.
constexpr Mapping kGemma3Layer[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// Qwen3 MoE: the router; the experts' matrices are slices of stacked tensors (expert_suffix).
constexpr Mapping kMoeLayer[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
};

constexpr Mapping kExpertSuffix[] = {
    {"gate_proj.weight", "ffn_gate_exps.weight"},
    {"up_proj.weight", "ffn_up_exps.weight"},
    {"down_proj.weight", "ffn_down_exps.weight"},
};

// Gemma 4: per-layer input embeddings (llama.cpp's gemma3n names) and the layer output scale.
constexpr Mapping kGemma4Layer[] = {
    {"per_layer_input_gate.weight", "inp_gate.weight"},
    {"per_layer_projection.weight", "proj.weight"},
    {"post_per_layer_input_norm.weight", "post_norm.weight"},
    {"layer_scalar", "layer_output_scale.weight"},
};

// Gemma 4's MoE block (enable_moe_block; llama.cpp's gemma4 names): the router's projection,
// its input scale and per-expert output scale, the experts as transformers saves them (one 3-D
// tensor each, gate_up_proj kept fused as llama.cpp keeps it), and the block's extra norms.
constexpr Mapping kGemma4MoeLayer[] = {
    {"router.proj.weight", "ffn_gate_inp.weight"},
    {"router.scale", "ffn_gate_inp.scale"},
    {"router.per_expert_scale", "ffn_down_exps.scale"},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"experts.down_proj", "ffn_down_exps.weight"},
    {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
    {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
    {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
};

constexpr Mapping kGemma4Global[] = {
    {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
    {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
    {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
};

// Qwen3.5: the norm before the MLP, and the gated delta-net layers' tensors (llama.cpp's qwen35
// names; the archive converts A_log, the conv taps, the norms and the v head order).
constexpr Mapping kQwen35Layer[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
};

// Qwen3.5 MoE: the router, the experts as transformers 5 saves them (one 3-D tensor each;
// gate_up_proj is split by the archive), and the sigmoid-gated shared expert.
constexpr Mapping kQwen35MoeLayer[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};

constexpr Mapping kGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// A plain decimal number without leading zeros (at most 5 digits), or -1.
int parse_index(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || (digits.size() > 1 && digits[0] == '0')) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() ? value : -1;
}

template <size_t N>
std::optional<std::string_view> look_up(const Mapping (&table)[N], std::string_view hf) {
  for (const Mapping& m : table) {
    if (m.hf == hf) return m.gguf;
  }
  return std::nullopt;
}

std::optional<std::string_view> layer_suffix(std::string_view arch, std::string_view suffix) {
  if (auto g = look_up(kCommonLayer, suffix)) return g;
  if (arch == "gemma3" || arch == "gemma4") {
    if (auto g = look_up(kGemma3Layer, suffix)) return g;
    if (arch == "gemma4") {
      if (auto g = look_up(kGemma4Layer, suffix)) return g;
      if (auto g = look_up(kGemma4MoeLayer, suffix)) return g;
    }
    return look_up(kQkNormLayer, suffix);
  }
  if (arch == "qwen35" || arch == "qwen35moe") {
    if (auto g = look_up(kQwen35Layer, suffix)) return g;
    if (arch == "qwen35moe") {
      if (auto g = look_up(kQwen35MoeLayer, suffix)) return g;
    }
    return look_up(kQkNormLayer, suffix);
  }
  if (auto g = look_up(kDenseLayer, suffix)) return g;
  if (arch == "qwen3moe") {
    if (auto g = look_up(kMoeLayer, suffix)) return g;
  }
  if (arch == "qwen3" || arch == "qwen3moe") return look_up(kQkNormLayer, suffix);
  return std::nullopt;
}

// "mlp.experts.E.<suffix>" -> the stacked tensor's suffix, with E in *expert.
std::optional<std::string_view> expert_suffix(std::string_view suffix, int* expert) {
  constexpr std::string_view kExperts = "mlp.experts.";
  if (!suffix.starts_with(kExperts)) return std::nullopt;
  const std::string_view rest = suffix.substr(kExperts.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  *expert = parse_index(rest.substr(0, dot));
  if (*expert < 0) return std::nullopt;
  return look_up(kExpertSuffix, rest.substr(dot + 1));
}

}  // namespace

std::optional<GgufTensorName> hf_tensor_name_to_gguf(std::string_view arch,
                                                     std::string_view hf_name) {
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" &&
      arch != "gemma3" && arch != "gemma4" && arch != "qwen35" && arch != "qwen35moe")
    return std::nullopt;
  if (auto g = look_up(kGlobal, hf_name)) return GgufTensorName{std::string(*g), -1};
  if (arch == "gemma4")
    if (auto g = look_up(kGemma4Global, hf_name)) return GgufTensorName{std::string(*g), -1};

  constexpr std::string_view kPrefix = "model.layers.";
  if (!hf_name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view rest = hf_name.substr(kPrefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const int layer = parse_index(rest.substr(0, dot));
  if (layer < 0) return std::nullopt;
  int expert = -1;
  auto suffix = layer_suffix(arch, rest.substr(dot + 1));
  if (!suffix && (arch == "qwen3moe" || arch == "qwen35moe"))
    suffix = expert_suffix(rest.substr(dot + 1), &expert);
  if (!suffix) return std::nullopt;
  return GgufTensorName{"blk." + std::to_string(layer) + "." + std::string(*suffix), layer, expert};
}

std::optional<std::string> hf_wrapper_text_name(std::string_view hf_name) {
  static constexpr Mapping kPrefixes[] = {
      {"model.language_model.", "model."},
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"lm_head.", "lm_head."},
      {"mtp.", "mtp."},
  };
  for (const Mapping& m : kPrefixes) {
    if (hf_name.starts_with(m.hf))
      return std::string(m.gguf) + std::string(hf_name.substr(m.hf.size()));
  }
  return std::nullopt;
}

std::optional<std::string_view> hf_wrapper_tower(std::string_view hf_architecture,
                                                 std::string_view hf_name) {
  // Prefix -> part, per wrapper, as transformers 5.17 saves them (Gemma 3 also in its hub
  // checkpoints' top-level layout). Qwen3.5's model.visual holds its merger (the projector).
  struct Tower {
    std::string_view hf_architecture, prefix, part;
  };
  static constexpr Tower kTowers[] = {
      {"Gemma3ForConditionalGeneration", "vision_tower.", "vision tower"},
      {"Gemma3ForConditionalGeneration", "model.vision_tower.", "vision tower"},
      {"Gemma3ForConditionalGeneration", "multi_modal_projector.", "multimodal projector"},
      {"Gemma3ForConditionalGeneration", "model.multi_modal_projector.", "multimodal projector"},
      {"Gemma4ForConditionalGeneration", "model.vision_tower.", "vision tower"},
      {"Gemma4ForConditionalGeneration", "model.embed_vision.", "vision embedder"},
      {"Gemma4ForConditionalGeneration", "model.audio_tower.", "audio tower"},
      {"Gemma4ForConditionalGeneration", "model.embed_audio.", "audio embedder"},
      {"Qwen3_5ForConditionalGeneration", "model.visual.", "vision tower"},
      {"Qwen3_5MoeForConditionalGeneration", "model.visual.", "vision tower"},
  };
  for (const Tower& t : kTowers) {
    if (t.hf_architecture == hf_architecture && hf_name.starts_with(t.prefix)) return t.part;
  }
  return std::nullopt;
}

bool hf_tensor_is_buffer(std::string_view hf_name) {
  return hf_name.ends_with("rotary_emb.inv_freq");
}

}  // namespace memra
