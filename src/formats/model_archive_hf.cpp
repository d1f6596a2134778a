// archive_open_hf_folder: config.json -> metadata, safetensors tensors -> GGUF names, plus the
// llama.cpp converter's data conventions (llama q/k row permutation, gemma3 norm + 1, llama3
// rope_freqs), done into owned buffers the archive keeps alive. Conventions: model_archive.h.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "formats/hf_config.h"
#include "formats/hf_names.h"
#include "formats/model_archive.h"
#include "formats/safetensors.h"

namespace memra {
namespace {

// Points view at an owned buffer of n_bytes filled by fill(dst), kept alive by the archive.
template <typename Fill>
void own_copy(ModelArchive& archive, TensorView& view, uint64_t n_bytes, Fill fill) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(n_bytes);
  fill(buffer->data());
  view.data = buffer->data();
  view.n_bytes = n_bytes;
  archive.keep_alive.push_back(std::move(buffer));
}

// llama.cpp's LlamaModel.permute: rows grouped per head as (2, head_dim/2) become
// (head_dim/2, 2). Rows are the outermost dim (ne[1] of a weight, ne[0] of a bias).
void permute_heads(ModelArchive& archive, TensorView& view, int64_t n_heads, int64_t head_dim,
                   const std::string& hf_name) {
  const uint64_t rows = view.n_dims >= 2 ? view.ne[1] : view.ne[0];
  if (view.n_dims > 2 || rows != uint64_t(n_heads * head_dim))
    fail(ErrorCode::malformed_file, "tensor '{}': expected {} rows ({} heads x head_dim {})",
         hf_name, n_heads * head_dim, n_heads, head_dim);
  const uint64_t row_bytes = view.n_bytes / rows;
  const auto* src = static_cast<const uint8_t*>(view.data);
  const uint64_t half = uint64_t(head_dim) / 2;
  own_copy(archive, view, view.n_bytes, [&](uint8_t* dst) {
    for (uint64_t h = 0; h < uint64_t(n_heads); ++h) {
      for (uint64_t j = 0; j < half; ++j) {
        for (uint64_t p = 0; p < 2; ++p) {
          const uint64_t to = h * head_dim + j * 2 + p;
          const uint64_t from = h * head_dim + p * half + j;
          std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
        }
      }
    }
  });
}

float load_float(DType dtype, const uint8_t* p) {
  if (dtype == DType::f32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// Gemma's RMSNorm scales by (1 + w); store 1 + w in F32 as llama.cpp's converter does.
void add_one_f32(ModelArchive& archive, TensorView& view) {
  const uint64_t n = view.n_elements();
  const uint32_t size = dtype_traits(view.dtype).type_size;
  const auto* src = static_cast<const uint8_t*>(view.data);
  own_copy(archive, view, n * 4, [&](uint8_t* dst) {
    for (uint64_t i = 0; i < n; ++i) {
      const float v = load_float(view.dtype, src + i * size) + 1.0f;
      std::memcpy(dst + i * 4, &v, 4);
    }
  });
  view.dtype = DType::f32;
}

// safetensors only pads the header to 8 bytes by convention; copy data the file misaligns.
void ensure_aligned(ModelArchive& archive, TensorView& view) {
  const uint32_t size = dtype_traits(view.dtype).type_size;
  if (reinterpret_cast<uintptr_t>(view.data) % size == 0) return;
  const void* src = view.data;
  own_copy(archive, view, view.n_bytes, [&](uint8_t* dst) { std::memcpy(dst, src, view.n_bytes); });
}

void transform(ModelArchive& archive, const HfModelConfig& cfg, TensorView& view,
               const std::string& hf_name) {
  const std::string& name = view.name;
  if (cfg.arch == "llama" && name.find(".attn_q.") != std::string::npos) {
    permute_heads(archive, view, cfg.n_head, cfg.head_dim, hf_name);
  } else if (cfg.arch == "llama" && name.find(".attn_k.") != std::string::npos) {
    permute_heads(archive, view, cfg.n_head_kv, cfg.head_dim, hf_name);
  } else if (cfg.arch == "gemma3" && name.ends_with("norm.weight")) {
    add_one_f32(archive, view);
  } else {
    ensure_aligned(archive, view);
  }
}

void add_rope_freqs(ModelArchive& archive, const std::vector<float>& factors) {
  auto buffer = std::make_shared<std::vector<float>>(factors);
  TensorView view;
  view.name = "rope_freqs.weight";
  view.dtype = DType::f32;
  view.n_dims = 1;
  view.ne[0] = buffer->size();
  view.data = buffer->data();
  view.n_bytes = buffer->size() * sizeof(float);
  archive.tensors.push_back(view);
  archive.keep_alive.push_back(std::move(buffer));
}

// One stacked expert tensor under assembly: its slices by expert index.
using ExpertSlices = std::map<std::string, std::vector<TensorView>>;

// Stacks each tensor's per-expert slices (HF [out, in] each) into one 3-D tensor with ggml dims
// {in, out, n_expert}, expert e's rows at offset e * slice bytes, as llama.cpp's converter
// stacks them. Every slice must be present, with one dtype and one shape.
void stack_experts(ModelArchive& archive, ExpertSlices& slices, int64_t n_expert,
                   const std::string& folder) {
  for (auto& [name, parts] : slices) {
    if (static_cast<int64_t>(parts.size()) != n_expert)
      fail(ErrorCode::malformed_file, "{}: {} has {} expert slices, expected num_experts {}",
           folder, name, parts.size(), n_expert);
    const TensorView& first = parts[0];
    for (int64_t e = 0; e < n_expert; ++e) {
      const TensorView& p = parts[e];
      if (!p.data) fail(ErrorCode::malformed_file, "{}: {} lacks expert {}", folder, name, e);
      if (p.n_dims != 2 || p.dtype != first.dtype || p.ne != first.ne)
        fail(ErrorCode::malformed_file,
             "{}: expert {} of {} differs in dtype or shape from expert 0", folder, e, name);
    }
    TensorView view = first;
    view.name = name;
    view.n_dims = 3;
    view.ne[2] = static_cast<uint64_t>(n_expert);
    own_copy(archive, view, first.n_bytes * n_expert, [&](uint8_t* dst) {
      for (int64_t e = 0; e < n_expert; ++e)
        std::memcpy(dst + e * first.n_bytes, parts[e].data, first.n_bytes);
    });
    archive.tensors.push_back(std::move(view));
  }
}

// qwen3moe: the layers the config makes sparse have a router, the others a dense MLP.
void check_moe_layers(const HfModelConfig& cfg, const std::set<std::string>& seen,
                      const std::string& folder) {
  for (size_t il = 0; il < cfg.moe_layers.size(); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const bool router = seen.contains(p + "ffn_gate_inp.weight");
    const bool dense = seen.contains(p + "ffn_down.weight");
    if (router != cfg.moe_layers[il] || dense == cfg.moe_layers[il])
      fail(ErrorCode::malformed_file,
           "{}: layer {} should be {} (decoder_sparse_step, mlp_only_layers) but its tensors "
           "say otherwise",
           folder, il,
           cfg.moe_layers[il] ? "sparse (mlp.gate, mlp.experts)" : "dense (mlp.*_proj)");
  }
}

// Gemma4ForConditionalGeneration: the vision and audio towers and their embedders, which memra
// does not run (text only).
bool gemma4_tower_tensor(const HfModelConfig& cfg, const std::string& hf_name) {
  if (cfg.hf_architecture != "Gemma4ForConditionalGeneration") return false;
  for (const char* prefix :
       {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio."})
    if (hf_name.starts_with(prefix)) return true;
  return false;
}

// gemma4 attention_k_eq_v: a full, non-sharing layer has v_proj exactly when the config says
// K and V are separate (model code takes V from K when attn_v is absent).
void check_gemma4_v(const HfModelConfig& cfg, const std::set<std::string>& seen,
                    const std::string& folder) {
  if (cfg.arch != "gemma4") return;
  const gguf::Value* pattern = cfg.metadata.find("gemma4.attention.sliding_window_pattern");
  const auto& flags = std::get<gguf::Array>(pattern->data).items;
  for (size_t il = 0; il < flags.size(); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    if (!seen.contains(p + "attn_k.weight")) continue;  // a KV-sharing layer
    const bool full = !std::get<bool>(flags[il].data);
    const bool expect_v = !(full && cfg.gemma4_k_eq_v);
    if (seen.contains(p + "attn_v.weight") != expect_v)
      fail(ErrorCode::malformed_file, "{}: layer {} {} v_proj, but attention_k_eq_v is {}", folder,
           il, expect_v ? "lacks" : "has", cfg.gemma4_k_eq_v);
  }
}

}  // namespace

ModelArchive archive_open_hf_folder(const std::string& folder) {
  const HfModelConfig cfg = hf_config_load(folder);
  const auto checkpoint = std::make_unique<const safetensors::Checkpoint>(
      safetensors::open_folder(folder));  // views stay valid through the shards' mappings
  ModelArchive archive;
  archive.kind = ArchiveKind::hf_folder;
  archive.path = folder;
  archive.metadata = cfg.metadata;
  for (const auto& shard : checkpoint->shards) {
    if (shard.mapping()) archive.keep_alive.push_back(shard.mapping());
  }
  std::set<std::string> seen;
  ExpertSlices experts;
  const int64_t n_expert = cfg.metadata.get_int(cfg.arch + ".expert_count").value_or(0);
  size_t towers = 0;
  for (const auto& [hf_name, ref] : checkpoint->tensors) {
    if (hf_tensor_is_buffer(hf_name)) continue;
    if (gemma4_tower_tensor(cfg, hf_name)) {
      ++towers;
      continue;
    }
    const auto gguf_name = hf_tensor_name_to_gguf(cfg.arch, hf_name);
    if (!gguf_name)
      fail(ErrorCode::unsupported,
           "{}: tensor '{}' is not in the {} name table (HF -> GGUF); refusing a checkpoint "
           "with weights memra would not use",
           folder, hf_name, cfg.arch);
    if (gguf_name->layer >= cfg.n_layer)
      fail(ErrorCode::malformed_file, "{}: tensor '{}' is for layer {} but num_hidden_layers is {}",
           folder, hf_name, gguf_name->layer, cfg.n_layer);
    const safetensors::File& shard = checkpoint->shards[ref.shard];
    TensorView view = shard.view(shard.entries()[ref.entry]);
    if (view.dtype != DType::f32 && view.dtype != DType::f16 && view.dtype != DType::bf16)
      fail(ErrorCode::unsupported, "{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16",
           folder, hf_name, dtype_name(view.dtype));
    view.name = gguf_name->name;
    if (gguf_name->expert >= 0) {
      if (gguf_name->expert >= n_expert)
        fail(ErrorCode::malformed_file, "{}: tensor '{}' is for expert {} but num_experts is {}",
             folder, hf_name, gguf_name->expert, n_expert);
      std::vector<TensorView>& parts = experts[view.name];
      parts.resize(static_cast<size_t>(n_expert));
      if (parts[gguf_name->expert].data)
        fail(ErrorCode::malformed_file, "{}: two tensors map to expert {} of '{}'", folder,
             gguf_name->expert, view.name);
      parts[gguf_name->expert] = std::move(view);
      seen.insert(gguf_name->name);
      continue;
    }
    if (!seen.insert(view.name).second)
      fail(ErrorCode::malformed_file, "{}: two tensors map to '{}'", folder, view.name);
    transform(archive, cfg, view, hf_name);
    archive.tensors.push_back(std::move(view));
  }
  stack_experts(archive, experts, n_expert, folder);
  check_moe_layers(cfg, seen, folder);
  check_gemma4_v(cfg, seen, folder);
  if (towers > 0)
    log_at(LogLevel::warn,
           "{}: Gemma4ForConditionalGeneration's vision/audio towers ({} tensors) are not "
           "supported and not loaded; serving the text model only",
           folder, towers);
  if (!cfg.tied_embeddings && !seen.contains("output.weight"))
    fail(ErrorCode::malformed_file,
         "{}: tie_word_embeddings is false but the checkpoint has no lm_head.weight", folder);
  if (!cfg.rope_freqs.empty()) add_rope_freqs(archive, cfg.rope_freqs);
  return archive;
}

}  // namespace memra
