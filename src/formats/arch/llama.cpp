// Llama (LlamaForCausalLM): attention, SiLU-gated MLP, one norm before each.
#include "formats/arch/arch.h"

namespace memra {
namespace {

constexpr HfClass kClasses[] = {{"LlamaForCausalLM", "llama"}};
constexpr HfNameTable kLayer[] = {kHfCommonLayerNames, kHfDenseNormNames};

}  // namespace

extern constexpr ArchDescriptor kArchLlama{
    .name = "llama",
    .hf_classes = kClasses,
    .global_names = {},
    .layer_names = kLayer,
};

}  // namespace memra
