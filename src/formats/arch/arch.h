// One descriptor per supported architecture: its GGUF name, the Hugging Face classes that open
// as it, the HF -> GGUF tensor-name tables (llama.cpp's converter names, gguf-py constants.py
// MODEL_TENSORS), the config.json -> GGUF metadata reader, and the per-architecture facts the
// loaders act on. The loaders look an architecture up here instead of branching on its name;
// a family is added by writing one file under arch/ and listing it in registry.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace memra {

struct HfModelConfig;
struct HfConfigReader;

// Which forward pass (src/models/<file>.cpp) runs the architecture, and with it which metadata
// reader fills its ModelConfig (model_config.cpp): the plain pre-norm decoder (its layers'
// mixer and feed-forward chosen by config), or Gemma 3's / Gemma 4's.
enum class ArchModel { decoder, gemma3, gemma4 };

struct HfNameMapping {
  std::string_view hf;
  std::string_view gguf;
};
using HfNameTable = std::span<const HfNameMapping>;

// A part of a multimodal wrapper's checkpoint that is not its text model, by name prefix.
struct HfTower {
  std::string_view prefix;  // e.g. "model.vision_tower."
  std::string_view part;    // e.g. "vision tower", as the skip log line names it
};

// A multi-token-prediction head stored beside the layers (qwen35's mtp.*), which llama.cpp's
// converter writes as one block after the n_layer layers: the head's own tensors by `names`
// (-> blk.{n_layer}.<gguf name>), and those of its decoder layer, under `layer_prefix`, by the
// architecture's layer tables as layer n_layer's.
struct HfMtpHead {
  std::string_view prefix = {};        // e.g. "mtp."; empty where the architecture has no such head
  HfNameTable names = {};              // e.g. "mtp.fc.weight" -> "nextn.eh_proj.weight"
  std::string_view layer_prefix = {};  // e.g. "mtp.layers.0."
};

// One Hugging Face class that opens as the architecture.
struct HfClass {
  std::string_view hf_architecture;  // config.json architectures[0], e.g. "LlamaForCausalLM"
  std::string_view model_type;       // config.json model_type that goes with it
  // Multimodal wrappers (*ForConditionalGeneration): their text_config's model_type, and the
  // parts of the checkpoint that are not the text model (skipped, one log line). Empty for a
  // text-only class.
  std::string_view text_model_type = {};
  std::span<const HfTower> towers = {};
};

struct ArchDescriptor {
  std::string_view name;  // GGUF general.architecture, e.g. "qwen3moe"
  std::span<const HfClass> hf_classes;
  // Global tensors beyond kHfGlobalNames (token_embd, output_norm, output), e.g. gemma4's
  // per-layer embeddings.
  std::span<const HfNameTable> global_names;
  // "model.layers.N.<hf suffix>" -> "blk.N.<gguf suffix>", searched in order.
  std::span<const HfNameTable> layer_names;
  // Per-expert matrices "model.layers.N.mlp.experts.E.<hf suffix>" that the archive stacks into
  // one 3-D "blk.N.<gguf suffix>" (qwen3moe's layout); empty where experts come pre-stacked.
  HfNameTable expert_slice_names = {};
  HfMtpHead mtp = {};

  // config.json keys -> GGUF metadata beyond the shapes every architecture shares
  // (hf_config_reader.h).
  void (*read_hf_config)(HfModelConfig&, const HfConfigReader&) = nullptr;
  // Class defaults transformers applies when config.json leaves a key out.
  int64_t default_context_length = 32768;  // max_position_embeddings
  bool tied_by_default = false;            // tie_word_embeddings
  // Has a dense MLP width (intermediate_size -> A.feed_forward_length); false where every layer
  // routes to experts (qwen35moe).
  bool dense_ffn = true;

  ArchModel model = ArchModel::decoder;
  // Facts the GGUF metadata does not carry (llama.cpp hard-codes them per architecture too):
  // rope rotates adjacent pairs (GGUF's "normal" layout; HF's checkpoints rotate halves, so the
  // archive permutes q/k rows as llama.cpp's converter does) rather than halves (neox).
  bool rope_adjacent_pairs = false;
  bool qkv_bias = false;  // q/k/v projections have biases
  bool qk_norm = false;   // RMSNorm over each head's q and k (gemma4's reader sets its own)
  // Routed experts in the layers with a router tensor (expert_* keys, moe.cpp); gemma4's MoE
  // block beside the MLP is its reader's.
  bool routed_experts = false;
  // Gated delta-net layers between gated attention layers (qwen35): the archive converts their
  // tensors, the config reader the ssm.* keys.
  bool delta_net = false;
  // Every *norm.weight is stored as 1 + w (Gemma 3 RMSNorm multiplies by 1 + w), as llama.cpp's
  // converter does, so model code applies plain x_hat * w.
  bool norms_plus_one = false;
  // The experts' gate_up_proj is split into ffn_gate_exps / ffn_up_exps (llama.cpp's qwen35moe
  // names); gemma4 keeps it fused.
  bool split_gate_up_experts = false;
};

// Every supported architecture, in the order refusals list them.
std::span<const ArchDescriptor* const> arch_all();

// The descriptor for GGUF architecture `name`, or nullptr.
const ArchDescriptor* arch_find(std::string_view name);

// "llama, qwen2, ..." : the GGUF names, for refusals.
const std::string& arch_supported_names();

// Shared by every architecture.
inline constexpr HfNameMapping kHfGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// Attention projections (with the biases Qwen2 has), the SiLU-gated MLP and the attention
// input norm, shared by every supported architecture.
inline constexpr HfNameMapping kHfCommonLayerNames[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
};

// RMSNorm over each head's q and k (Qwen3, Gemma, Qwen3.5).
inline constexpr HfNameMapping kHfQkNormNames[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};

// Llama, Qwen2, Qwen3: one norm before the MLP.
inline constexpr HfNameMapping kHfDenseNormNames[] = {
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

// Gemma 3 (and 4) normalize after attention and around the MLP; HF's post_attention_layernorm
// is the norm applied to the attention output, not the one before the MLP.
inline constexpr HfNameMapping kHfGemmaNormNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// The per-expert matrices of a checkpoint that stores one per expert (qwen3moe; qwen35moe
// checkpoints saved that way too), as slices of llama.cpp's stacked tensors.
inline constexpr HfNameMapping kHfExpertSliceNames[] = {
    {"gate_proj.weight", "ffn_gate_exps.weight"},
    {"up_proj.weight", "ffn_up_exps.weight"},
    {"down_proj.weight", "ffn_down_exps.weight"},
};

// The descriptors, one per family file.
extern const ArchDescriptor kArchLlama;
extern const ArchDescriptor kArchQwen2;
extern const ArchDescriptor kArchQwen3;
extern const ArchDescriptor kArchQwen3Moe;
extern const ArchDescriptor kArchGemma3;
extern const ArchDescriptor kArchGemma4;
extern const ArchDescriptor kArchQwen35;
extern const ArchDescriptor kArchQwen35Moe;

}  // namespace memra
