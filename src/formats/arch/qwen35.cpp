// Qwen3.5 (qwen35) and Qwen3.5 MoE (qwen35moe), and the text model of their
// *ForConditionalGeneration wrappers: gated delta-net layers between gated attention layers
// (llama.cpp's qwen35 names; the archive converts A_log, the conv taps, the norms and the v head
// order), and for the MoE the routed experts plus a sigmoid-gated shared expert.
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

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

constexpr HfNameTable kQwen35Layer[] = {kHfCommonLayerNames, kLayer, kHfQkNormNames};
constexpr HfNameTable kQwen35MoeLayer[] = {kHfCommonLayerNames, kLayer, kMoeLayer, kHfQkNormNames};

}  // namespace

extern constexpr ArchDescriptor kArchQwen35{
    .name = "qwen35",
    .hf_classes = kQwen35Classes,
    .global_names = {},
    .layer_names = kQwen35Layer,
    .read_hf_config = hf_config_read_qwen35,
    .qk_norm = true,
    .delta_net = true,
};

extern constexpr ArchDescriptor kArchQwen35Moe{
    .name = "qwen35moe",
    .hf_classes = kQwen35MoeClasses,
    .global_names = {},
    .layer_names = kQwen35MoeLayer,
    .expert_slice_names = kHfExpertSliceNames,
    .read_hf_config = hf_config_read_qwen35,
    .dense_ffn = false,
    .qk_norm = true,
    .routed_experts = true,
    .delta_net = true,
    .split_gate_up_experts = true,
};

}  // namespace memra
