// Qwen2 (q/k/v biases), Qwen3 (q/k norms) and Qwen3 MoE (Qwen3 with a router and per-expert
// matrices in the sparse layers): Llama's layer names plus each one's extras.
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"

namespace memra {
namespace {

using gguf::Value;
using nlohmann::json;

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

// Qwen3 MoE: a top-k softmax router over num_experts SiLU-gated experts in the layers that
// decoder_sparse_step selects ((i + 1) % step == 0) minus mlp_only_layers; the other layers keep
// the dense MLP of intermediate_size. Qwen3's keys first.
void read_qwen3moe(HfModelConfig& out, const HfConfigReader& r) {
  hf_config_read_dense(out, r);
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  // Hub checkpoints say num_experts; transformers 5 writes its alias num_local_experts.
  const auto experts = r.opt_int("num_experts", 1, 1 << 16);
  const auto local = r.opt_int("num_local_experts", 1, 1 << 16);
  if (experts && local && *experts != *local)
    fail(ErrorCode::malformed_file, "{}: num_experts {} differs from num_local_experts {}", r.file,
         *experts, *local);
  if (!experts && !local)
    fail(ErrorCode::malformed_file,
         "{}: required field num_experts (or num_local_experts) is "
         "missing",
         r.file);
  const int64_t n_expert = experts ? *experts : *local;
  const int64_t n_used = r.req_int("num_experts_per_tok", 1, n_expert);
  const int64_t step = r.opt_int("decoder_sparse_step", 1, 1 << 12).value_or(1);
  hf_set_u32(md, a + ".expert_count", n_expert);
  hf_set_u32(md, a + ".expert_used_count", n_used);
  hf_set_u32(md, a + ".expert_feed_forward_length", r.req_int("moe_intermediate_size", 1, 1 << 22));
  md.set(a + ".expert_weights_norm", Value::make_bool(r.opt_bool("norm_topk_prob", false)));
  std::vector<bool> dense(static_cast<size_t>(out.n_layer), false);
  if (const json* only = r.find("mlp_only_layers")) {
    if (!only->is_array())
      fail(ErrorCode::malformed_file, "{}: mlp_only_layers must be an array of layer indices",
           r.file);
    for (const json& i : *only) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= out.n_layer)
        fail(ErrorCode::malformed_file, "{}: mlp_only_layers entry {} is not a layer below {}",
             r.file, i.dump(), out.n_layer);
      dense[i.get<size_t>()] = true;
    }
  }
  out.moe_layers.resize(dense.size());
  for (size_t i = 0; i < dense.size(); ++i)
    out.moe_layers[i] = !dense[i] && (int64_t(i) + 1) % step == 0;
}

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
    .read_hf_config = read_qwen3moe,
    .qk_norm = true,
    .routed_experts = true,
};

}  // namespace memra
