// `memra convert`'s engine: writes a model archive (an HF folder seen through model_archive.h)
// as a standard GGUF file, each tensor at the type a conversion mix gives it, with
// general.file_type (llama.cpp's LLAMA_FTYPE numbering) and general.quantization_version. Tokenizer
// keys come in as extra metadata from the caller (the tokenizer library sits above formats). Type
// policy and its fallbacks: docs/MODELS.md, section "memra convert".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "formats/gguf.h"
#include "formats/model_archive.h"

namespace memra::convert {

// The --type choices: a plain type for every matrix, or a llama-quantize style mix.
enum class Mix { f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q6_k };

std::optional<Mix> mix_from_name(std::string_view name);  // "q4_k_m", case-insensitive
std::string_view mix_name(Mix mix);                       // "q4_k_m"
std::string_view mix_names();                             // "f32, f16, ..." for messages
uint32_t llama_file_type(Mix mix);                        // LLAMA_FTYPE_* number

// What the policy needs to know about the model: tensor names decide the layer-dependent rules.
struct PolicyContext {
  Mix mix = Mix::f16;
  bool has_output = true;  // an untied output.weight exists (else token_embd is the output)
  int n_attn_v = 0;        // count of blk.*.attn_v.weight tensors
  int n_ffn_down = 0;      // count of blk.*.ffn_down.weight tensors
};
PolicyContext make_policy_context(Mix mix, const std::vector<TensorView>& tensors);

// The GGUF type of one tensor under the mix (1-D tensors and norms F32; rows whose length the
// chosen block size does not divide fall back as llama.cpp does).
DType choose_type(const PolicyContext& ctx, const TensorView& tensor);

// The order convert writes tensors in: token_embd and other globals first, then blk.N by layer
// (names sorted within a layer), output* last. `memra synth` writes the same order.
bool tensor_order_less(const TensorView& a, const TensorView& b);

// tokenizer.chat_template (and tokenizer.chat_template.<name> for named templates) from
// chat_template.jinja, else tokenizer_config.json "chat_template", into out. Returns false when
// the folder has neither. A malformed tokenizer_config.json throws Error(malformed_file).
bool read_chat_template(const std::string& folder, gguf::Metadata& out);

struct Options {
  std::string output_path;
  Mix mix = Mix::f16;
  int threads = 2;  // worker threads quantizing rows of one tensor
};

struct Summary {
  size_t n_tensors = 0;
  uint64_t n_bytes = 0;  // tensor data bytes written
  std::vector<std::pair<DType, size_t>> tensors_per_type;
};

// Writes the GGUF (to output_path + ".part", renamed on success). `extra` (tokenizer keys, chat
// template) is merged after the archive's metadata. Source tensors must be F32, F16 or BF16;
// a NaN or Inf in a tensor that is quantized is refused naming the tensor.
Summary write_gguf(const ModelArchive& archive, const gguf::Metadata& extra, const Options& options,
                   const gguf::Writer::ProgressFn& progress = {});

}  // namespace memra::convert
