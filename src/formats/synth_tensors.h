// Internal to `memra synth`: the tensor list of a shape in llama.cpp's GGUF names, with each
// tensor's draw (Init and spread), for every architecture synth writes: llama / qwen3 / gemma3
// (dense), qwen35 and qwen35moe (gated delta-net hybrid), gemma4 (per-layer shapes, optional
// MoE block, per-layer inputs, KV sharing). Shapes come from the metadata hf_config wrote, the
// keys model code reads, so a plan and the loader cannot disagree on a width.
#pragma once

#include <vector>

#include "formats/hf_config.h"
#include "formats/synth.h"

namespace memra::synth {

// The tensors of the model `hf` describes, in no particular order (make_plan sorts them).
std::vector<TensorPlan> tensor_list(const HfModelConfig& hf);

}  // namespace memra::synth
