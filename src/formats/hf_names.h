// Hugging Face tensor names -> GGUF tensor names, per architecture, as llama.cpp's converter
// names them (gguf-py constants.py, MODEL_TENSORS). A name outside the table has no GGUF
// meaning for that architecture and is refused by the caller, never dropped silently.
#pragma once

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

// The GGUF name for hf_name under arch (llama, qwen2, qwen3, qwen3moe, gemma3, gemma4, qwen35,
// qwen35moe), or nullopt when the table has no entry. Layer numbers are plain decimal
// ("model.layers.07" is not a layer name).
std::optional<GgufTensorName> hf_tensor_name_to_gguf(std::string_view arch,
                                                     std::string_view hf_name);

// Checkpoint entries that are computed buffers rather than weights (rotary_emb.inv_freq in old
// transformers checkpoints); llama.cpp's converter skips them and so does the archive.
bool hf_tensor_is_buffer(std::string_view hf_name);

}  // namespace memra
