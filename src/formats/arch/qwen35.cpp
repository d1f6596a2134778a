// Qwen3.5 (qwen35) and Qwen3.5 MoE (qwen35moe), and the text model of their
// *ForConditionalGeneration wrappers: gated delta-net layers between gated attention layers
// (llama.cpp's qwen35 names; the archive converts A_log, the conv taps, the norms and the v head
// order), and for the MoE the routed experts plus a sigmoid-gated shared expert.
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

using gguf::Value;
using nlohmann::json;

// model.visual holds the vision tower and its merger (the projector).
constexpr HfTower kTowers[] = {{"model.visual.", "vision tower"}};

constexpr HfClass kQwen35Classes[] = {
    {"Qwen3_5ForCausalLM", "qwen3_5_text"},
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", "qwen3_5_text", kTowers},
};
constexpr HfClass kQwen35MoeClasses[] = {
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
    {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "qwen3_5_moe_text", kTowers},
};

// The norm before the MLP, and the gated delta-net layers' tensors.
constexpr HfNameMapping kLayer[] = {
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

// The router, the experts as transformers 5 saves them (one 3-D tensor each; gate_up_proj is
// split by the archive), and the sigmoid-gated shared expert.
constexpr HfNameMapping kMoeLayer[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};

// The multi-token-prediction head's own tensors (llama.cpp's nextn names); its decoder layer,
// mtp.layers.0, takes the ordinary layer names.
constexpr HfNameMapping kMtpNames[] = {
    {"mtp.fc.weight", "nextn.eh_proj.weight"},
    {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
    {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
    {"mtp.norm.weight", "nextn.shared_head_norm.weight"},
};
constexpr HfMtpHead kMtp{.prefix = "mtp.", .names = kMtpNames, .layer_prefix = "mtp.layers.0."};

constexpr HfNameTable kQwen35Layer[] = {kHfCommonLayerNames, kLayer, kHfQkNormNames};
constexpr HfNameTable kQwen35MoeLayer[] = {kHfCommonLayerNames, kLayer, kMoeLayer, kHfQkNormNames};

// Qwen3.5 (qwen35): gated delta-net linear-attention layers and gated full-attention layers
// (layer_types), partial rotary on the attention layers. GGUF (llama.cpp) says which layers
// are full attention by one interval, so layer_types must follow that pattern.
void read_qwen35(HfModelConfig& out, const HfConfigReader& r) {
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  const std::string act = r.opt_string("hidden_act").value_or("silu");
  if (act != "silu")
    fail(ErrorCode::unsupported, "{}: hidden_act '{}' is not supported for {} (only silu)", r.file,
         act, out.hf_architecture);
  if (r.opt_bool("attention_bias", false))
    fail(ErrorCode::unsupported, "{}: attention_bias = true is not supported for {}", r.file,
         out.hf_architecture);
  const json* params = r.find("rope_parameters");
  const HfRope rope = hf_read_rope(r, params, 10000.0);
  if (rope.type != "default")
    fail(ErrorCode::unsupported, "{}: rope type '{}' is not supported for {} (only default)",
         r.file, rope.type, out.hf_architecture);
  // transformers 5 keeps partial_rotary_factor in rope_parameters; older configs at the top.
  std::optional<double> factor;
  if (params != nullptr && params->is_object())
    factor = HfConfigReader{*params, r.file}.opt_float("partial_rotary_factor");
  if (!factor) factor = r.opt_float("partial_rotary_factor");
  const double rot = out.head_dim * factor.value_or(0.25);
  const auto n_rot = static_cast<int64_t>(rot);
  if (rot != static_cast<double>(n_rot) || n_rot < 2 || n_rot % 2 != 0 || n_rot > out.head_dim)
    fail(ErrorCode::unsupported,
         "{}: partial_rotary_factor {} gives {} rotary dims of head_dim {}; an even whole number "
         "is needed",
         r.file, factor.value_or(0.25), rot, out.head_dim);
  hf_set_f32(md, a + ".rope.freq_base", rope.theta);
  hf_set_u32(md, a + ".rope.dimension_count", n_rot);
  // Multimodal rope sections (llama.cpp writes them; text positions make them irrelevant).
  std::vector<Value> sections;
  for (int64_t v : {11, 11, 10, 0}) sections.push_back(Value::make_i32(static_cast<int32_t>(v)));
  md.set(a + ".rope.dimension_sections",
         Value::make_array(gguf::ValueType::i32, std::move(sections)));

  const json* types = r.find("layer_types");
  int64_t interval = r.opt_int("full_attention_interval", 1, out.n_layer).value_or(4);
  if (types != nullptr) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != out.n_layer)
      fail(ErrorCode::malformed_file, "{}: layer_types must list {} entries (num_hidden_layers)",
           r.file, out.n_layer);
    interval = 0;
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
      if (s != "linear_attention" && s != "full_attention")
        fail(ErrorCode::unsupported, "{}: layer_types[{}] = '{}' is not supported", r.file, i, s);
      if (s == "full_attention" && interval == 0) interval = static_cast<int64_t>(i) + 1;
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const bool full = (*types)[i].get<std::string>() == "full_attention";
      if (interval == 0 || full != ((static_cast<int64_t>(i) + 1) % interval == 0))
        fail(ErrorCode::unsupported,
             "{}: layer_types is not a repeating pattern of linear_attention layers closed by "
             "one full_attention layer (GGUF's full_attention_interval cannot express it)",
             r.file);
    }
  }
  hf_set_u32(md, a + ".full_attention_interval", interval);
  const int64_t nk = r.req_int("linear_num_key_heads", 1, 1024);
  const int64_t nv = r.req_int("linear_num_value_heads", 1, 1024);
  const int64_t dk = r.req_int("linear_key_head_dim", 1, 1024);
  const int64_t dv = r.req_int("linear_value_head_dim", 1, 1024);
  if (nv % nk != 0)
    fail(ErrorCode::unsupported,
         "{}: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}", r.file, nv,
         nk);
  hf_set_u32(md, a + ".ssm.conv_kernel", r.opt_int("linear_conv_kernel_dim", 1, 64).value_or(4));
  hf_set_u32(md, a + ".ssm.state_size", dk);
  hf_set_u32(md, a + ".ssm.group_count", nk);
  hf_set_u32(md, a + ".ssm.time_step_rank", nv);
  hf_set_u32(md, a + ".ssm.inner_size", nv * dv);
  if (!arch_find(out.arch)->routed_experts) return;
  // Every layer: softmax top-k over num_experts (always renormalized) plus a shared expert
  // whose output is gated by sigmoid(shared_expert_gate(h)).
  const int64_t n_expert = r.req_int("num_experts", 1, 1 << 16);
  hf_set_u32(md, a + ".expert_count", n_expert);
  hf_set_u32(md, a + ".expert_used_count", r.req_int("num_experts_per_tok", 1, n_expert));
  hf_set_u32(md, a + ".expert_feed_forward_length", r.req_int("moe_intermediate_size", 1, 1 << 22));
  hf_set_u32(md, a + ".expert_shared_feed_forward_length",
             r.req_int("shared_expert_intermediate_size", 1, 1 << 22));
  md.set(a + ".expert_weights_norm", Value::make_bool(true));
}

}  // namespace

extern constexpr ArchDescriptor kArchQwen35{
    .name = "qwen35",
    .hf_classes = kQwen35Classes,
    .global_names = {},
    .layer_names = kQwen35Layer,
    .mtp = kMtp,
    .read_hf_config = read_qwen35,
    .qk_norm = true,
    .delta_net = true,
};

extern constexpr ArchDescriptor kArchQwen35Moe{
    .name = "qwen35moe",
    .hf_classes = kQwen35MoeClasses,
    .global_names = {},
    .layer_names = kQwen35MoeLayer,
    .expert_slice_names = kHfExpertSliceNames,
    .mtp = kMtp,
    .read_hf_config = read_qwen35,
    .dense_ffn = false,
    .qk_norm = true,
    .routed_experts = true,
    .delta_net = true,
    .split_gate_up_experts = true,
};

}  // namespace memra
