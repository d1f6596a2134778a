// Which GGUF type each tensor gets under a conversion mix. The plain mixes follow llama.cpp's
// convert_hf_to_gguf.py (matrices at the type, 1-D tensors and norms F32); the *_K mixes follow
// llama-quantize's rules for Q4_K_M / Q5_K_M / Q6_K (llama_tensor_get_type), for the dense
// architectures memra converts. Documented in docs/MODELS.md, "memra convert".
#include <algorithm>
#include <cctype>
#include <string>

#include "formats/convert.h"

namespace memra::convert {

namespace {

struct MixInfo {
  Mix mix;
  std::string_view name;
  uint32_t file_type;  // llama.cpp LLAMA_FTYPE_*
  DType base;          // the type of an ordinary matrix
};

constexpr MixInfo kMixes[] = {
    {Mix::f32, "f32", 0, DType::f32},         {Mix::f16, "f16", 1, DType::f16},
    {Mix::bf16, "bf16", 32, DType::bf16},     {Mix::q8_0, "q8_0", 7, DType::q8_0},
    {Mix::q4_k_m, "q4_k_m", 15, DType::q4_k}, {Mix::q5_k_m, "q5_k_m", 17, DType::q5_k},
    {Mix::q6_k, "q6_k", 18, DType::q6_k},
};

const MixInfo& info(Mix mix) {
  return *std::find_if(std::begin(kMixes), std::end(kMixes),
                       [&](const MixInfo& m) { return m.mix == mix; });
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The block index of "blk.N.*", or -1.
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    layer = layer * 10 + (name[i] - '0');
    if (layer > 1000000) return -1;
  }
  return layer;
}

// llama-quantize's choice of layers that get more bits: the first and last eighth, and every
// third layer in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama-quantize's type for a matrix under a K mix, before the row-length fallback.
DType k_mix_type(const PolicyContext& ctx, std::string_view name) {
  const DType base = info(ctx.mix).base;
  const bool is_output =
      name == "output.weight" || (!ctx.has_output && name == "token_embd.weight");
  if (is_output) return DType::q6_k;
  const bool medium = ctx.mix == Mix::q4_k_m || ctx.mix == Mix::q5_k_m;
  if (medium && contains(name, "attn_v.weight") && use_more_bits(layer_of(name), ctx.n_attn_v)) {
    return DType::q6_k;
  }
  if (medium && contains(name, "ffn_down") && use_more_bits(layer_of(name), ctx.n_ffn_down)) {
    return DType::q6_k;
  }
  if (contains(name, "attn_qkv.weight")) {
    if (ctx.mix == Mix::q4_k_m) return DType::q5_k;
    if (ctx.mix == Mix::q5_k_m) return DType::q6_k;
  }
  return base;
}

// A type whose block size divides the row length: llama-quantize's fallbacks (Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0), then F16 for anything still not dividing.
DType fit_row(DType type, uint64_t row_length) {
  if (row_length % dtype_traits(type).block_size == 0) return type;
  switch (type) {
    case DType::q4_k:
      type = DType::q5_0;
      break;
    case DType::q5_k:
      type = DType::q5_1;
      break;
    case DType::q6_k:
      type = DType::q8_0;
      break;
    default:
      break;
  }
  return row_length % dtype_traits(type).block_size == 0 ? type : DType::f16;
}

}  // namespace

std::optional<Mix> mix_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const MixInfo& m : kMixes) {
    if (m.name == lower) return m.mix;
  }
  return std::nullopt;
}

std::string_view mix_name(Mix mix) {
  return info(mix).name;
}

std::string_view mix_names() {
  return "f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q6_k";
}

uint32_t llama_file_type(Mix mix) {
  return info(mix).file_type;
}

PolicyContext make_policy_context(Mix mix, const std::vector<TensorView>& tensors) {
  PolicyContext ctx;
  ctx.mix = mix;
  ctx.has_output = std::any_of(tensors.begin(), tensors.end(),
                               [](const TensorView& t) { return t.name == "output.weight"; });
  for (const TensorView& t : tensors) {
    if (layer_of(t.name) < 0) continue;
    if (contains(t.name, "attn_v.weight")) ++ctx.n_attn_v;
    if (contains(t.name, "ffn_down")) ++ctx.n_ffn_down;
  }
  return ctx;
}

DType choose_type(const PolicyContext& ctx, const TensorView& tensor) {
  const std::string_view name = tensor.name;
  // Vectors (norms, biases, rope factors) stay F32 in every mix, as both llama.cpp tools do.
  const bool matrix = tensor.n_dims >= 2 && name.ends_with(".weight") && !contains(name, "norm");
  if (!matrix) return DType::f32;
  // MoE routers stay F32 too (gguf-py keeps FFN_GATE_INP in float32, llama-quantize never
  // quantizes ffn_gate_inp): a rounded router logit can flip a token's choice of experts.
  if (contains(name, "ffn_gate_inp")) return DType::f32;
  // The delta-net conv taps (qwen35) stay F32 as well (gguf-py keeps SSM_CONV1D in float32).
  if (contains(name, "ssm_conv1d")) return DType::f32;
  const DType wanted = (ctx.mix == Mix::q4_k_m || ctx.mix == Mix::q5_k_m || ctx.mix == Mix::q6_k)
                           ? k_mix_type(ctx, name)
                           : info(ctx.mix).base;
  return fit_row(wanted, tensor.ne[0]);
}

}  // namespace memra::convert
