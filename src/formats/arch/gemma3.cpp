// Gemma 3 (Gemma3ForCausalLM, and the text model of Gemma3ForConditionalGeneration): q/k norms
// and the sandwich norms around attention and the MLP.
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

// As transformers 5.17 saves the wrapper, and in its hub checkpoints' top-level layout.
constexpr HfTower kTowers[] = {
    {"vision_tower.", "vision tower"},
    {"model.vision_tower.", "vision tower"},
    {"multi_modal_projector.", "multimodal projector"},
    {"model.multi_modal_projector.", "multimodal projector"},
};

constexpr HfClass kClasses[] = {
    {"Gemma3ForCausalLM", "gemma3_text"},
    {"Gemma3ForConditionalGeneration", "gemma3", "gemma3_text", kTowers},
};

constexpr HfNameTable kLayer[] = {kHfCommonLayerNames, kHfGemmaNormNames, kHfQkNormNames};

}  // namespace

extern constexpr ArchDescriptor kArchGemma3{
    .name = "gemma3",
    .hf_classes = kClasses,
    .global_names = {},
    .layer_names = kLayer,
    .read_hf_config = hf_config_read_gemma3,
    .default_context_length = 131072,
    .tied_by_default = true,
    .model = ArchModel::gemma3,
    .qk_norm = true,
    .norms_plus_one = true,
};

}  // namespace memra
