// Llama (LlamaForCausalLM): attention, SiLU-gated MLP, one norm before each.
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

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
    .read_hf_config = hf_config_read_dense,
    .default_context_length = 2048,
    .rope_adjacent_pairs = true,
};

}  // namespace memra
