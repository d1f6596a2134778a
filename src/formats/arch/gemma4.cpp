// Gemma 4 (Gemma4ForCausalLM, and the text model of Gemma4ForConditionalGeneration): Gemma 3's
// layer plus per-layer input embeddings, the layer output scale and the MoE block beside the
// MLP (llama.cpp's gemma3n / gemma4 names).
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

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

}  // namespace

extern constexpr ArchDescriptor kArchGemma4{
    .name = "gemma4",
    .hf_classes = kClasses,
    .global_names = kGlobal,
    .layer_names = kLayer,
    .read_hf_config = hf_config_read_gemma4,
    .tied_by_default = true,
    .model = ArchModel::gemma4,
};

}  // namespace memra
