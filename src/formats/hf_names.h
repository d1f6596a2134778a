// Hugging Face tensor names -> GGUF tensor names, per architecture, as llama.cpp's converter
// names them (gguf-py constants.py, MODEL_TENSORS); the tables are the architecture
// descriptors' (formats/arch/arch.h). A name outside the table has no GGUF
// meaning for that architecture and is refused by the caller, never dropped silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memra {

struct GgufTensorName {
  std::string name;  // e.g. "blk.3.attn_q.weight"
  int layer = -1;    // block index, -1 for global tensors (token_embd, output_norm, output)
  // qwen3moe: HF stores one matrix per expert ("mlp.experts.E.gate_proj.weight"); GGUF stacks
  // them into one 3-D tensor (blk.N.ffn_gate_exps.weight, ne = {n_in, n_out, n_expert}). This is
  // E for such a slice, -1 for a whole tensor.
  int expert = -1;
};

// The GGUF name for hf_name under arch (a GGUF architecture name with a descriptor in
// formats/arch/), or nullopt when its tables have no entry. Layer numbers are plain decimal
// ("model.layers.07" is not a layer name).
std::optional<GgufTensorName> hf_tensor_name_to_gguf(std::string_view arch,
                                                     std::string_view hf_name);

// The GGUF name for hf_name in arch's multi-token-prediction head (ArchDescriptor::mtp) in a
// model of n_layer layers: blk.{n_layer}.<name> for the head's own tensors, layer n_layer's
// names for its decoder layer's; nullopt when arch has no such head or no entry for hf_name.
std::optional<GgufTensorName> hf_mtp_tensor_name_to_gguf(std::string_view arch,
                                                         std::string_view hf_name, int64_t n_layer);

// A *ForConditionalGeneration checkpoint's text-model tensor under the name the text-only class
// saves it as: model.language_model.X (transformers 5) and language_model.model.X (the layout
// of Gemma 3's hub checkpoints, which transformers still writes) -> model.X,
// language_model.lm_head.X -> lm_head.X; lm_head.X and a multi-token-prediction head's tensors
// (ArchDescriptor::mtp, Qwen3.5's mtp.X) keep their names. nullopt for any other name (a tower's,
// or one no wrapper uses).
std::optional<std::string> hf_wrapper_text_name(std::string_view hf_name);

// The non-text part of the wrapper hf_architecture that hf_name belongs to, by prefix ("vision
// tower", "audio tower", "multimodal projector", ...), or nullopt when it is none of them.
std::optional<std::string_view> hf_wrapper_tower(std::string_view hf_architecture,
                                                 std::string_view hf_name);

// Checkpoint entries that are computed buffers rather than weights (rotary_emb.inv_freq in old
// transformers checkpoints); llama.cpp's converter skips them and so does the archive.
bool hf_tensor_is_buffer(std::string_view hf_name);

}  // namespace memra
