// Gemma 3 (Gemma3ForCausalLM, and the text model of Gemma3ForConditionalGeneration): q/k norms
// and the sandwich norms around attention and the MLP.
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

// Gemma 3: GeGLU, sliding-window + global layers with their own rope bases, extra norms.
void read_gemma3(HfModelConfig& out, const HfConfigReader& r) {
  const std::string act = r.opt_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    fail(ErrorCode::unsupported,
         "{}: hidden_activation '{}' is not supported (only "
         "gelu_pytorch_tanh)",
         r.file, act);
  if (r.opt_bool("use_bidirectional_attention", false))
    fail(ErrorCode::unsupported, "{}: use_bidirectional_attention = true is not supported", r.file);
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;

  const json* params = r.find("rope_parameters");
  HfRope global;
  HfRope local;
  if (params != nullptr && params->is_object() && params->contains("full_attention")) {
    global =
        hf_rope_from(&(*params)["full_attention"], 1e6, "rope_parameters.full_attention", r.file);
    const auto it = params->find("sliding_attention");
    local = hf_rope_from(it == params->end() ? nullptr : &*it, 10000.0,
                         "rope_parameters.sliding_attention", r.file);
  } else {
    global = hf_read_rope(r, params, 1e6);
    local.theta = r.positive_float("rope_local_base_freq", 10000.0);
  }
  if (local.type != "default")
    fail(ErrorCode::unsupported,
         "{}: rope scaling '{}' on sliding-window layers is not "
         "supported",
         r.file, local.type);
  hf_set_f32(md, a + ".rope.freq_base", global.theta);
  hf_set_f32(md, a + ".rope.freq_base_swa", local.theta);
  hf_write_rope_scaling(out, global, r.file);

  const std::vector<bool> sliding = hf_gemma3_sliding_layers(r, out.n_layer);
  hf_set_u32(md, a + ".attention.sliding_window",
             r.opt_int("sliding_window", 1, kHfU32Max).value_or(4096));
  std::vector<Value> flags;
  for (bool s : sliding) flags.push_back(Value::make_bool(s));
  md.set(a + ".attention.sliding_window_pattern",
         Value::make_array(gguf::ValueType::boolean, std::move(flags)));
  const double scalar = r.positive_float("query_pre_attn_scalar", 256.0);
  hf_set_f32(md, a + ".attention.scale", 1.0 / std::sqrt(scalar));
  if (const auto cap = r.opt_float("final_logit_softcapping"))
    hf_set_f32(md, a + ".final_logit_softcapping", *cap);
  if (const auto cap = r.opt_float("attn_logit_softcapping"))
    hf_set_f32(md, a + ".attn_logit_softcapping", *cap);
}

}  // namespace

extern constexpr ArchDescriptor kArchGemma3{
    .name = "gemma3",
    .hf_classes = kClasses,
    .global_names = {},
    .layer_names = kLayer,
    .read_hf_config = read_gemma3,
    .default_context_length = 131072,
    .tied_by_default = true,
    .model = ArchModel::gemma3,
    .qk_norm = true,
    .norms_plus_one = true,
};

}  // namespace memra
