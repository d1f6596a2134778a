// Qwen2 (q/k/v biases), Qwen3 (q/k norms) and Qwen3 MoE (Qwen3 with a router and per-expert
// matrices in the sparse layers): Llama's layer names plus each one's extras.
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

constexpr HfClass kQwen2Classes[] = {{"Qwen2ForCausalLM", "qwen2"}};
constexpr HfClass kQwen3Classes[] = {{"Qwen3ForCausalLM", "qwen3"}};
constexpr HfClass kQwen3MoeClasses[] = {{"Qwen3MoeForCausalLM", "qwen3_moe"}};

// The router; the experts' matrices are slices of stacked tensors (kHfExpertSliceNames).
constexpr HfNameMapping kRouter[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
};

constexpr HfNameTable kQwen2Layer[] = {kHfCommonLayerNames, kHfDenseNormNames};
constexpr HfNameTable kQwen3Layer[] = {kHfCommonLayerNames, kHfDenseNormNames, kHfQkNormNames};
constexpr HfNameTable kQwen3MoeLayer[] = {kHfCommonLayerNames, kHfDenseNormNames, kRouter,
                                          kHfQkNormNames};

}  // namespace

extern constexpr ArchDescriptor kArchQwen2{
    .name = "qwen2",
    .hf_classes = kQwen2Classes,
    .global_names = {},
    .layer_names = kQwen2Layer,
    .read_hf_config = hf_config_read_dense,
    .qkv_bias = true,
};

extern constexpr ArchDescriptor kArchQwen3{
    .name = "qwen3",
    .hf_classes = kQwen3Classes,
    .global_names = {},
    .layer_names = kQwen3Layer,
    .read_hf_config = hf_config_read_dense,
    .qk_norm = true,
};

extern constexpr ArchDescriptor kArchQwen3Moe{
    .name = "qwen3moe",
    .hf_classes = kQwen3MoeClasses,
    .global_names = {},
    .layer_names = kQwen3MoeLayer,
    .expert_slice_names = kHfExpertSliceNames,
    .read_hf_config = hf_config_read_qwen3moe,
    .qk_norm = true,
    .routed_experts = true,
};

}  // namespace memra
