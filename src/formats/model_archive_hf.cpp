// archive_open_hf_folder: config.json -> metadata, safetensors tensors -> GGUF names, plus the
// llama.cpp converter's data conventions (llama q/k row permutation, gemma3 norm + 1, llama3
// rope_freqs), done into owned buffers the archive keeps alive. Conventions: model_archive.h.
// A multimodal wrapper opens as its text model: the same tensors and metadata as the text-only
// checkpoint, the vision/audio towers skipped with one logged line.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "formats/arch/arch.h"
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

void ensure_aligned(ModelArchive& archive, TensorView& view);

// qwen35's A_log becomes A = -exp(A_log) in F32, as llama.cpp's converter stores ssm_a.
void neg_exp_f32(ModelArchive& archive, TensorView& view) {
  const uint64_t n = view.n_elements();
  const uint32_t size = dtype_traits(view.dtype).type_size;
  const auto* src = static_cast<const uint8_t*>(view.data);
  own_copy(archive, view, n * 4, [&](uint8_t* dst) {
    for (uint64_t i = 0; i < n; ++i) {
      const float v = -std::exp(load_float(view.dtype, src + i * size));
      std::memcpy(dst + i * 4, &v, 4);
    }
  });
  view.dtype = DType::f32;
}

// qwen35's v heads: HF groups them by k head (v head h reads k head h / (n_v / n_k));
// llama.cpp's GGUF tiles them (v head p reads k head p % n_k), so position p takes HF head
// (p % n_k) * (n_v / n_k) + p / n_k. Permutes the n_v blocks of `block` units after `skip`
// units, where a unit is a row (along ne[1], or ne[0] for a vector) or, with by_column, an
// element of every row (along ne[0]).
void tile_v_heads(ModelArchive& archive, TensorView& view, int64_t n_k, int64_t n_v, int64_t skip,
                  int64_t block, bool by_column, const std::string& hf_name) {
  if (n_k == n_v) return;
  const uint64_t units = by_column || view.n_dims == 1 ? view.ne[0] : view.ne[1];
  const uint64_t n_rows = by_column ? view.n_elements() / view.ne[0] : 1;
  if (units != uint64_t(skip + n_v * block))
    fail(ErrorCode::malformed_file, "tensor '{}': {} {} for {} v heads of {} after {}", hf_name,
         units, by_column ? "columns" : "rows", n_v, block, skip);
  const uint64_t unit_bytes = by_column ? dtype_traits(view.dtype).type_size : view.n_bytes / units;
  const uint64_t row_bytes = by_column ? view.n_bytes / n_rows : view.n_bytes;
  const auto* src = static_cast<const uint8_t*>(view.data);
  const int64_t r = n_v / n_k;
  own_copy(archive, view, view.n_bytes, [&](uint8_t* dst) {
    std::memcpy(dst, src, view.n_bytes);
    for (uint64_t row = 0; row < n_rows; ++row) {
      for (int64_t p = 0; p < n_v; ++p) {
        const int64_t from = (p % n_k) * r + p / n_k;
        std::memcpy(dst + row * row_bytes + (skip + p * block) * unit_bytes,
                    src + row * row_bytes + (skip + from * block) * unit_bytes, block * unit_bytes);
      }
    }
  });
}

// qwen35moe: transformers 5 saves each layer's experts' gate and up projections as one tensor
// [n_expert, 2 n_ff, n_embd] (gate rows first); llama.cpp stores ffn_gate_exps and
// ffn_up_exps, ggml dims {n_embd, n_ff, n_expert} each (owned copies).
void split_gate_up(ModelArchive& archive, const TensorView& fused, const std::string& hf_name) {
  if (fused.n_dims != 3 || fused.ne[1] % 2 != 0)
    fail(ErrorCode::malformed_file, "tensor '{}' should be [experts, 2 x width, hidden]", hf_name);
  const uint64_t n_expert = fused.ne[2], half_rows = fused.ne[1] / 2;
  const uint64_t half_bytes = fused.n_bytes / n_expert / 2;  // one expert's gate (or up) rows
  const auto* src = static_cast<const uint8_t*>(fused.data);
  const std::string base = fused.name.substr(0, fused.name.size() - strlen("gate_up_exps.weight"));
  for (int part = 0; part < 2; ++part) {
    TensorView view = fused;
    view.name = base + (part == 0 ? "gate_exps.weight" : "up_exps.weight");
    view.ne[1] = half_rows;
    own_copy(archive, view, fused.n_bytes / 2, [&](uint8_t* dst) {
      for (uint64_t e = 0; e < n_expert; ++e)
        std::memcpy(dst + e * half_bytes, src + (2 * e + part) * half_bytes, half_bytes);
    });
    archive.tensors.push_back(std::move(view));
  }
}

// qwen35: the GGUF forms of the gated delta-net tensors (llama.cpp's converter): 1 + w for every
// RMSNorm but the gated one, A = -exp(A_log), the conv taps as [conv_dim, kernel] without the
// unit dim, and v heads tiled.
void transform_qwen35(ModelArchive& archive, const HfModelConfig& cfg, TensorView& view,
                      const std::string& hf_name) {
  const std::string& name = view.name;
  const gguf::Metadata& md = cfg.metadata;
  const std::string a = cfg.arch + ".";
  const int64_t n_k = md.get_int(a + "ssm.group_count").value_or(1);
  const int64_t n_v = md.get_int(a + "ssm.time_step_rank").value_or(1);
  const int64_t d_k = md.get_int(a + "ssm.state_size").value_or(0);
  const int64_t d_v = md.get_int(a + "ssm.inner_size").value_or(0) / n_v;
  const int64_t qk = 2 * n_k * d_k;  // q and k channels before v in qkv and the conv
  if (name.ends_with("norm.weight") && !name.ends_with("ssm_norm.weight")) {
    add_one_f32(archive, view);
  } else if (name.ends_with(".ssm_a")) {
    neg_exp_f32(archive, view);
    tile_v_heads(archive, view, n_k, n_v, 0, 1, false, hf_name);
  } else if (name.ends_with(".ssm_dt.bias") || name.ends_with(".ssm_beta.weight") ||
             name.ends_with(".ssm_alpha.weight")) {
    tile_v_heads(archive, view, n_k, n_v, 0, 1, false, hf_name);
  } else if (name.ends_with(".ssm_conv1d.weight")) {
    if (view.n_dims != 3 || view.ne[1] != 1)
      fail(ErrorCode::malformed_file, "tensor '{}' should be [channels, 1, kernel]", hf_name);
    view.n_dims = 2;
    view.ne = {view.ne[0], view.ne[2], 1, 1};
    tile_v_heads(archive, view, n_k, n_v, qk, d_v, false, hf_name);
  } else if (name.ends_with(".attn_qkv.weight")) {
    tile_v_heads(archive, view, n_k, n_v, qk, d_v, false, hf_name);
  } else if (name.ends_with(".attn_gate.weight")) {
    tile_v_heads(archive, view, n_k, n_v, 0, d_v, false, hf_name);
  } else if (name.ends_with(".ssm_out.weight")) {
    tile_v_heads(archive, view, n_k, n_v, 0, d_v, true, hf_name);
  }
  ensure_aligned(archive, view);
}

// safetensors only pads the header to 8 bytes by convention; copy data the file misaligns.
void ensure_aligned(ModelArchive& archive, TensorView& view) {
  const uint32_t size = dtype_traits(view.dtype).type_size;
  if (reinterpret_cast<uintptr_t>(view.data) % size == 0) return;
  const void* src = view.data;
  own_copy(archive, view, view.n_bytes, [&](uint8_t* dst) { std::memcpy(dst, src, view.n_bytes); });
}

void transform(ModelArchive& archive, const ArchDescriptor& arch, const HfModelConfig& cfg,
               TensorView& view, const std::string& hf_name) {
  const std::string& name = view.name;
  if (arch.delta_net) {
    transform_qwen35(archive, cfg, view, hf_name);
  } else if (arch.rope_adjacent_pairs && name.find(".attn_q.") != std::string::npos) {
    permute_heads(archive, view, cfg.n_head, cfg.head_dim, hf_name);
  } else if (arch.rope_adjacent_pairs && name.find(".attn_k.") != std::string::npos) {
    permute_heads(archive, view, cfg.n_head_kv, cfg.head_dim, hf_name);
  } else if (arch.norms_plus_one && name.ends_with("norm.weight")) {
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

// What a multimodal wrapper's checkpoint held beyond its text model, for the one log line.
struct SkippedTowers {
  std::vector<std::string_view> parts;  // in first-seen order
  size_t n_tensors = 0;
  uint64_t n_bytes = 0;

  void add(std::string_view part, uint64_t bytes) {
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
    ++n_tensors;
    n_bytes += bytes;
  }
  // "the vision tower and multimodal projector (N tensors, X MB) are not loaded: ...", the
  // towers named before their projectors/embedders.
  void log(const std::string& folder, const HfModelConfig& cfg) const {
    if (n_tensors == 0) return;
    std::vector<std::string_view> sorted = parts;
    std::stable_partition(sorted.begin(), sorted.end(),
                          [](std::string_view p) { return p.ends_with("tower"); });
    std::string what = "the ";
    bool audio = false;
    for (size_t i = 0; i < sorted.size(); ++i) {
      what += i == 0 ? "" : i + 1 == sorted.size() ? " and " : ", ";
      what += sorted[i];
      audio = audio || sorted[i].starts_with("audio");
    }
    const bool mb = n_bytes >= 100'000;
    const double size = static_cast<double>(n_bytes) / (mb ? 1e6 : 1e3);
    log_at(LogLevel::warn,
           "{}: {}: {} ({} tensor{}, {:.1f} {}) {} not loaded: memra serves this checkpoint's "
           "text model; {} inputs are refused",
           folder, cfg.hf_architecture, what, n_tensors, n_tensors == 1 ? "" : "s", size,
           mb ? "MB" : "KB", sorted.size() == 1 ? "is" : "are",
           audio ? "image and audio" : "image");
  }
};

// gemma4 attention_k_eq_v: a full, non-sharing layer has v_proj exactly when the config says
// K and V are separate (model code takes V from K when attn_v is absent).
void check_gemma4_v(const ArchDescriptor& arch, const HfModelConfig& cfg,
                    const std::set<std::string>& seen, const std::string& folder) {
  if (arch.model != ArchModel::gemma4) return;
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
  const ArchDescriptor& arch = *arch_find(cfg.arch);  // hf_config_load refuses any other
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
  SkippedTowers towers;
  bool has_mtp = false;
  for (const auto& [hf_name, ref] : checkpoint->tensors) {
    if (hf_tensor_is_buffer(hf_name)) continue;
    const safetensors::File& shard = checkpoint->shards[ref.shard];
    // A wrapper's text tensors map as the text-only class's; its towers are skipped.
    std::string text_name = hf_name;
    if (cfg.multimodal) {
      if (const auto part = hf_wrapper_tower(cfg.hf_architecture, hf_name)) {
        const safetensors::Entry& e = shard.entries()[ref.entry];
        towers.add(*part, e.end - e.begin);
        continue;
      }
      auto unwrapped = hf_wrapper_text_name(hf_name);
      if (!unwrapped)
        fail(ErrorCode::unsupported,
             "{}: tensor '{}' is neither {}'s text model (model.language_model.*, lm_head.*) nor "
             "a tower memra knows to skip; refusing a checkpoint with weights memra would not use",
             folder, hf_name, cfg.hf_architecture);
      text_name = std::move(*unwrapped);
    }
    // qwen35's multi-token-prediction head: one block after the n_layer layers.
    const bool mtp = !arch.mtp.prefix.empty() && text_name.starts_with(arch.mtp.prefix);
    const auto gguf_name = mtp ? hf_mtp_tensor_name_to_gguf(cfg.arch, text_name, cfg.n_layer)
                               : hf_tensor_name_to_gguf(cfg.arch, text_name);
    if (!gguf_name)
      fail(ErrorCode::unsupported,
           "{}: tensor '{}' is not in the {} name table (HF -> GGUF); refusing a checkpoint "
           "with weights memra would not use",
           folder, hf_name, cfg.arch);
    has_mtp = has_mtp || gguf_name->layer == cfg.n_layer;
    if (gguf_name->layer >= cfg.n_layer + (mtp ? 1 : 0))
      fail(ErrorCode::malformed_file, "{}: tensor '{}' is for layer {} but num_hidden_layers is {}",
           folder, hf_name, gguf_name->layer, cfg.n_layer);
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
    // qwen35moe: two tensors, as llama.cpp's qwen35moe names them (gemma4 keeps the fused one).
    if (arch.split_gate_up_experts && view.name.ends_with(".ffn_gate_up_exps.weight")) {
      const std::string base =
          view.name.substr(0, view.name.size() - strlen("gate_up_exps.weight"));
      for (const char* part : {"gate_exps.weight", "up_exps.weight"})
        if (!seen.insert(base + part).second)
          fail(ErrorCode::malformed_file, "{}: two tensors map to '{}{}'", folder, base, part);
      split_gate_up(archive, view, hf_name);
      continue;
    }
    transform(archive, arch, cfg, view, hf_name);
    archive.tensors.push_back(std::move(view));
  }
  stack_experts(archive, experts, n_expert, folder);
  if (has_mtp) {  // as llama.cpp's converter: the block counts, and says it is a predictor
    archive.metadata.set(cfg.arch + ".block_count",
                         gguf::Value::make_u32(static_cast<uint32_t>(cfg.n_layer + 1)));
    archive.metadata.set(cfg.arch + ".nextn_predict_layers", gguf::Value::make_u32(1));
  }
  check_moe_layers(cfg, seen, folder);
  check_gemma4_v(arch, cfg, seen, folder);
  towers.log(folder, cfg);
  if (!cfg.tied_embeddings && !seen.contains("output.weight"))
    fail(ErrorCode::malformed_file,
         "{}: tie_word_embeddings is false but the checkpoint has no lm_head.weight", folder);
  if (!cfg.rope_freqs.empty()) add_rope_freqs(archive, cfg.rope_freqs);
  return archive;
}

}  // namespace memra
