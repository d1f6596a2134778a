// A model checkpoint seen one way whatever its container: GGUF-convention metadata keys
// (general.architecture, <arch>.block_count, ...) and GGUF tensor names (token_embd.weight,
// blk.N.attn_q.weight, ...) with dimensions in ggml order (ne[0] contiguous). A GGUF file is
// read as is; a Hugging Face folder (config.json + *.safetensors, sharded or not) is mapped
// through a per-architecture name table, with Llama's q/k rows permuted the way GGUF stores them,
// so model code sees one convention. Tokenizer data is not part of the archive (tokenizer/).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "formats/gguf.h"

namespace memra {

enum class ArchiveKind { gguf, hf_folder };

struct ModelArchive {
  ArchiveKind kind = ArchiveKind::gguf;
  std::string path;                 // the GGUF file or the HF folder
  gguf::Metadata metadata;          // GGUF keys; for HF folders derived from config.json
  std::vector<TensorView> tensors;  // GGUF names; data stays valid while the archive lives
  std::vector<std::shared_ptr<const void>> keep_alive;  // mappings and owned buffers

  const TensorView* find_tensor(std::string_view name) const;
  std::string architecture() const { return metadata.require_string("general.architecture"); }
};

// Opens a local GGUF file or HF folder. Refuses pickle checkpoints (.bin/.pt/.pth) by name,
// unknown architectures by name, and any tensor the name table does not know.
ModelArchive archive_open(const std::string& path);

// The two halves of archive_open, for callers that already know the container.
ModelArchive archive_open_gguf(const std::string& path);
// HF folder conventions (what makes it look like llama.cpp's GGUF of the same checkpoint):
//   - metadata: hf_config.h (config.json + generation_config.json -> GGUF keys);
//   - names: hf_names.h (model.layers.N.* -> blk.N.*; rotary_emb.inv_freq buffers skipped);
//   - dims: safetensors shapes reversed into ggml order, so an HF Linear weight [out, in] has
//     ne = {in, out}; dtypes stay as stored (F32, F16, BF16; other dtypes are refused);
//   - llama: rows of attn_q and attn_k (weights and biases) permuted as llama.cpp's converter
//     does: within each head of head_dim rows, row j*2+p takes HF row p*head_dim/2+j, turning
//     HF's rotate-half rope layout into GGUF's interleaved-pairs layout (owned copies);
//   - gemma3: HF RMSNorm computes x_hat*(1+w); every *norm.weight becomes F32 (1+w), as the
//     converter stores it, so model code applies plain x_hat*w for every architecture;
//   - llama3 rope scaling: an owned F32 tensor rope_freqs.weight (ne = {head_dim/2}) holds the
//     per-frequency divisors llama.cpp's converter writes;
//   - qwen3moe: the per-expert matrices mlp.experts.E.{gate,up,down}_proj.weight are stacked
//     into blk.N.ffn_{gate,up,down}_exps.weight, ne = {n_in, n_out, n_expert} (owned copies),
//     and each layer's tensors must match the config's sparse layers (decoder_sparse_step,
//     mlp_only_layers);
//   - qwen35: as llama.cpp's converter: every *norm.weight but the delta-net's gated ssm_norm
//     becomes F32 1 + w (HF's Qwen3_5RMSNorm is zero-centered); linear_attn.A_log becomes F32
//     ssm_a = -exp(A_log); the conv taps [channels, 1, kernel] lose the unit dim (ne = {kernel,
//     channels}); and when there are more value heads than key heads, the v heads (rows of the
//     v part of attn_qkv and ssm_conv1d, of attn_gate, ssm_beta, ssm_alpha, ssm_dt, ssm_a, and
//     columns of ssm_out) go from HF's grouped order to ggml's tiled order (GGUF position p holds
//     HF head (p % n_k) * (n_v / n_k) + p / n_k). The multi-token-prediction head (mtp.*) becomes
//     block n_layer (blk.N.nextn.* and its decoder layer's names), block_count counts it and
//     nextn_predict_layers = 1. qwen35moe: the same, and its experts as qwen3moe's (or
//     transformers 5's fused mlp.experts.gate_up_proj split into ffn_gate_exps and
//     ffn_up_exps, mlp.experts.down_proj taken as ffn_down_exps);
//   - a tensor whose data is not aligned to its element size in the file is copied (owned).
ModelArchive archive_open_hf_folder(const std::string& folder);

}  // namespace memra
