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
  std::string path;         // the GGUF file or the HF folder
  gguf::Metadata metadata;  // GGUF keys; for HF folders derived from config.json
  std::vector<TensorView> tensors;  // GGUF names; data stays valid while the archive lives
  std::vector<std::shared_ptr<const void>> keep_alive;  // mappings and owned buffers

  const TensorView* find_tensor(std::string_view name) const;
  std::string architecture() const { return metadata.require_string("general.architecture"); }
};

// Opens a local GGUF file or HF folder. Refuses pickle checkpoints (.bin/.pt/.pth) by name,
// unknown architectures by name, and any tensor the name table does not know.
ModelArchive archive_open(const std::string& path);

}  // namespace memra
