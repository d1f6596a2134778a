// Reads ModelConfig from GGUF-convention metadata. Defaults for keys a llama.cpp GGUF lacks are
// the ones llama.cpp hard-codes (formats/hf_config.h documents them); anything the math depends
// on that we do not implement is refused by name.
#include "models/model_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/model_archive.h"
#include "formats/quant.h"

namespace memra {

namespace {

int32_t read_int(const gguf::Metadata& md, const std::string& key, int64_t lo, int64_t hi,
                 std::optional<int64_t> fallback = std::nullopt) {
  const std::optional<int64_t> value = md.get_int(key);
  if (!value && !fallback) fail(ErrorCode::not_found, "model metadata lacks {}", key);
  const int64_t v = value ? *value : *fallback;
  if (v < lo || v > hi)
    fail(ErrorCode::unsupported, "model metadata {} = {} is outside the supported range [{}, {}]",
         key, v, lo, hi);
  return static_cast<int32_t>(v);
}

float read_float(const gguf::Metadata& md, const std::string& key, double fallback) {
  const double v = md.get_float(key).value_or(fallback);
  if (!std::isfinite(v)) fail(ErrorCode::malformed_file, "model metadata {} is not finite", key);
  return static_cast<float>(v);
}

// inv_freq[i] = base^(-2i / n_rot) / (factor * divisor[i]) for i < n_rot / 2.
std::vector<double> rope_inv_freq(double base, int n_rot, double factor,
                                  const std::vector<float>& divisors) {
  std::vector<double> inv(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) {
    const double divisor = divisors.empty() ? 1.0 : divisors[i];
    inv[i] = std::pow(base, -2.0 * i / n_rot) / (factor * divisor);
  }
  return inv;
}

// llama3-style per-frequency divisors from the rope_freqs.weight tensor, if the archive has it.
std::vector<float> rope_divisors(const ModelArchive& archive, int n_rot) {
  const TensorView* t = archive.find_tensor("rope_freqs.weight");
  if (!t) return {};
  if (t->n_elements() != static_cast<uint64_t>(n_rot / 2))
    fail(ErrorCode::malformed_file, "rope_freqs.weight has {} elements, expected {}",
         t->n_elements(), n_rot / 2);
  std::vector<float> out(n_rot / 2);
  quant::dequantize_row(t->dtype, t->data, out.data(), n_rot / 2);
  for (float d : out)
    if (!(d > 0) || !std::isfinite(d))
      fail(ErrorCode::malformed_file, "rope_freqs.weight holds a non-positive divisor {}", d);
  return out;
}

void read_rope(const ModelArchive& archive, const ArchDescriptor& arch, const std::string& a,
               ModelConfig& c) {
  const gguf::Metadata& md = archive.metadata;
  const int n_rot = read_int(md, a + "rope.dimension_count", 2, c.head_dim, c.head_dim);
  if (n_rot % 2 != 0) fail(ErrorCode::unsupported, "{}rope.dimension_count {} is odd", a, n_rot);
  const double base = read_float(md, a + "rope.freq_base", 10000.0);
  if (!(base > 1.0)) fail(ErrorCode::unsupported, "{}rope.freq_base {} must exceed 1", a, base);
  double factor = 1.0;
  const std::string type = md.get_string(a + "rope.scaling.type").value_or("none");
  if (type == "linear") {
    factor = read_float(md, a + "rope.scaling.factor", 1.0);
    if (!(factor > 0)) fail(ErrorCode::unsupported, "{}rope.scaling.factor {} <= 0", a, factor);
  } else if (type != "none") {
    fail(ErrorCode::unsupported, "rope scaling type '{}' ({}rope.scaling.type) is not supported",
         type, a);
  }
  const RopeLayout layout = arch.rope_adjacent_pairs ? RopeLayout::normal : RopeLayout::neox;
  c.rope_global = {layout, n_rot,
                   rope_inv_freq(base, n_rot, factor, rope_divisors(archive, n_rot))};
  c.rope_local = c.rope_global;
  if (arch.model == ArchModel::gemma3) {  // sliding layers: their own base, never scaled
    const double base_swa = read_float(md, a + "rope.freq_base_swa", 10000.0);
    if (!(base_swa > 1.0))
      fail(ErrorCode::unsupported, "{}rope.freq_base_swa {} must exceed 1", a, base_swa);
    c.rope_local = {layout, n_rot, rope_inv_freq(base_swa, n_rot, 1.0, {})};
  }
}

// gemma3: which layers use the sliding window (array of bool, or llama.cpp's pattern of 6).
void read_gemma3_window(const gguf::Metadata& md, const std::string& a, ModelConfig& c) {
  const int32_t window = read_int(md, a + "attention.sliding_window", 1, 1 << 30);
  c.window.assign(c.n_layers, 0);
  const gguf::Value* pattern = md.find(a + "attention.sliding_window_pattern");
  if (!pattern) {
    for (int il = 0; il < c.n_layers; ++il) c.window[il] = (il + 1) % 6 == 0 ? 0 : window;
    return;
  }
  const auto* arr = std::get_if<gguf::Array>(&pattern->data);
  if (!arr || arr->element_type != gguf::ValueType::boolean ||
      arr->items.size() != static_cast<size_t>(c.n_layers))
    fail(ErrorCode::malformed_file, "{}attention.sliding_window_pattern must be {} booleans", a,
         c.n_layers);
  for (int il = 0; il < c.n_layers; ++il)
    c.window[il] = std::get<bool>(arr->items[il].data) ? window : 0;
}

// Both MoE layouts: expert count, experts used, expert width; returns expert_weights_norm when
// the file has it.
std::optional<bool> read_experts(const gguf::Metadata& md, const std::string& a, ModelConfig& c) {
  c.n_expert = read_int(md, a + "expert_count", 1, 1 << 16);
  c.n_expert_used = read_int(md, a + "expert_used_count", 1, c.n_expert);
  c.n_ff_exp = read_int(md, a + "expert_feed_forward_length", 1, 1 << 20);
  const gguf::Value* norm = md.find(a + "expert_weights_norm");
  if (!norm) return std::nullopt;
  if (!std::holds_alternative<bool>(norm->data))
    fail(ErrorCode::malformed_file, "model metadata {}expert_weights_norm is not a bool", a);
  return std::get<bool>(norm->data);
}

// qwen3moe: the experts (renormalized unless the file says not, as llama.cpp's qwen3moe); a layer
// routes to experts when it has a router tensor (hf_config.h: the sparse layers have no GGUF key
// of their own).
void read_moe(const ModelArchive& archive, const std::string& a, ModelConfig& c) {
  c.expert_weights_norm = read_experts(archive.metadata, a, c).value_or(true);
  for (int il = 0; il < c.n_layers; ++il)
    c.moe_layer[il] = archive.find_tensor("blk." + std::to_string(il) + ".ffn_gate_inp.weight");
}

// One u32 per layer: an array of n_layers, or a scalar for every layer (llama.cpp's per-layer
// keys may be either).
std::vector<int32_t> read_per_layer(const gguf::Metadata& md, const std::string& key, int n_layers,
                                    int64_t lo, int64_t hi, std::optional<int64_t> fallback) {
  const gguf::Value* v = md.find(key);
  if (!v || !std::holds_alternative<gguf::Array>(v->data))
    return std::vector<int32_t>(n_layers, read_int(md, key, lo, hi, fallback));
  const std::vector<int64_t> values = *md.get_int_array(key);
  if (values.size() != static_cast<size_t>(n_layers))
    fail(ErrorCode::malformed_file, "model metadata {} has {} entries, expected {} (block_count)",
         key, values.size(), n_layers);
  std::vector<int32_t> out;
  for (const int64_t x : values) {
    if (x < lo || x > hi)
      fail(ErrorCode::unsupported, "model metadata {} holds {}, outside [{}, {}]", key, x, lo, hi);
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

// Gemma 4's MoE block (model_config.h moe_beside_mlp) in every layer, as transformers'
// enable_moe_block: softmax over all experts, the top expert_used_count renormalized (transformers
// and llama.cpp always renormalize, so a file that says otherwise is refused).
void read_gemma4_moe(const gguf::Metadata& md, const std::string& a, ModelConfig& c) {
  if (!read_experts(md, a, c).value_or(true))
    fail(ErrorCode::unsupported,
         "gemma4 without renormalized expert weights ({}expert_weights_norm = false) is not "
         "supported",
         a);
  // llama.cpp's llama_expert_gating_func_type: 1 is softmax, Gemma 4's router.
  const int32_t gating = read_int(md, a + "expert_gating_func", 0, 1 << 10, 1);
  if (gating != 1)
    fail(ErrorCode::unsupported,
         "gemma4 expert gating function {} ({}expert_gating_func; only 1, softmax) is not "
         "supported",
         gating, a);
  c.expert_weights_norm = true;
  c.moe_beside_mlp = true;
  c.moe_layer.assign(c.n_layers, true);  // binding then requires every layer's MoE tensors
}

// Gemma 4 (text): gemma3's layer structure with per-layer shapes. Full layers: head dim
// key_length, "proportional" rope (the first rope.dimension_count / 2 of head_dim / 2
// frequencies rotate, the rest are identity, as transformers' proportional rope; or all of them
// over rope_freqs.weight's divisors, llama.cpp's form of it); sliding layers:
// key_length_swa and default rope over their whole head. Attention is unscaled (q and k are
// RMS-normed), V is RMS-normed without a weight. With expert_count, the MoE block in every layer.
ModelConfig read_gemma4(const ModelArchive& archive, ModelConfig c) {
  const gguf::Metadata& md = archive.metadata;
  const std::string a = c.arch + ".";
  c.n_embd = read_int(md, a + "embedding_length", 1, 1 << 16);
  c.n_layers = read_int(md, a + "block_count", 1, 1024);
  c.n_heads = read_int(md, a + "attention.head_count", 1, 1024);
  c.n_ctx_train = read_int(md, a + "context_length", 1, 1 << 30);
  c.norm_eps = read_float(md, a + "attention.layer_norm_rms_epsilon", 1e-6);
  if (!(c.norm_eps > 0)) fail(ErrorCode::malformed_file, "rms epsilon {} <= 0", c.norm_eps);
  const int32_t hd_full = read_int(md, a + "attention.key_length", 2, 1024);
  const int32_t hd_swa = read_int(md, a + "attention.key_length_swa", 2, 1024, hd_full);
  if (read_int(md, a + "attention.value_length", 1, 1024, hd_full) != hd_full ||
      read_int(md, a + "attention.value_length_swa", 1, 1024, hd_swa) != hd_swa)
    fail(ErrorCode::unsupported, "gemma4 value_length differs from key_length");
  if (hd_full % 2 || hd_swa % 2)
    fail(ErrorCode::unsupported, "gemma4 head dims {} / {} must be even", hd_full, hd_swa);
  read_gemma3_window(md, a, c);
  const std::vector<int32_t> kv_heads =
      read_per_layer(md, a + "attention.head_count_kv", c.n_layers, 1, c.n_heads, c.n_heads);
  c.layer_n_ff = read_per_layer(md, a + "feed_forward_length", c.n_layers, 1, 1 << 20, {});
  const int32_t shared = read_int(md, a + "attention.shared_kv_layers", 0, c.n_layers - 1, 0);
  const int32_t first_shared = c.n_layers - shared;
  c.n_embd_per_layer = read_int(md, a + "embedding_length_per_layer_input", 0, 1 << 16, 0);
  for (int il = 0; il < c.n_layers; ++il) {
    const bool sliding = c.window[il] > 0;
    c.layer_head_dim.push_back(sliding ? hd_swa : hd_full);
    if (c.n_heads % kv_heads[il] != 0)
      fail(ErrorCode::unsupported, "layer {}: {} heads are not a multiple of {} kv heads", il,
           c.n_heads, kv_heads[il]);
    int32_t source = il;
    if (il >= first_shared) {
      source = -1;
      for (int j = first_shared - 1; j >= 0 && source < 0; --j)
        if ((c.window[j] > 0) == sliding) source = j;
      if (source < 0)
        fail(ErrorCode::unsupported,
             "layer {} shares KV ({}attention.shared_kv_layers = {}) but no earlier layer has its "
             "attention kind",
             il, a, shared);
      if (kv_heads[source] != kv_heads[il])
        fail(ErrorCode::malformed_file, "layer {} shares layer {}'s KV but not its kv heads", il,
             source);
    }
    c.kv_source.push_back(source);
    c.layer_n_kv_heads.push_back(source == il ? kv_heads[il] : 0);
    const std::string blk = "blk." + std::to_string(il) + ".";
    c.v_from_k.push_back(source == il && !archive.find_tensor(blk + "attn_v.weight"));
    c.head_dim = std::max(c.head_dim, c.layer_head_dim[il]);
    c.n_kv_heads = std::max(c.n_kv_heads, kv_heads[il]);
    c.n_ff = std::max(c.n_ff, c.layer_n_ff[il]);
  }
  const std::string type = md.get_string(a + "rope.scaling.type").value_or("none");
  if (type != "none")
    fail(ErrorCode::unsupported,
         "gemma4 rope scaling type '{}' ({}rope.scaling.type) is not "
         "supported",
         type, a);
  const double base = read_float(md, a + "rope.freq_base", 1e6);
  const double base_swa = read_float(md, a + "rope.freq_base_swa", 10000.0);
  if (!(base > 1.0) || !(base_swa > 1.0))
    fail(ErrorCode::unsupported, "gemma4 rope bases {} / {} must exceed 1", base, base_swa);
  const int n_rot = read_int(md, a + "rope.dimension_count", 0, hd_full, hd_full);
  if (n_rot % 2) fail(ErrorCode::unsupported, "{}rope.dimension_count {} is odd", a, n_rot);
  if (read_int(md, a + "rope.dimension_count_swa", 2, hd_swa, hd_swa) != hd_swa)
    fail(ErrorCode::unsupported,
         "gemma4 partial rotary on sliding layers "
         "({}rope.dimension_count_swa < key_length_swa) is not supported",
         a);
  // Proportional rope, in either form: rope.dimension_count < key_length (the pairs past it have
  // frequency 0), or llama.cpp's rope.dimension_count = key_length with rope_freqs.weight
  // dividing the unrotated pairs' frequencies by 1e30 (formats/arch/gemma4.cpp read_gemma4).
  const std::vector<float> divisors = rope_divisors(archive, hd_full);
  std::vector<double> inv(hd_full / 2, 0.0);
  for (int i = 0; i < n_rot / 2; ++i)
    inv[i] = std::pow(base, -2.0 * i / hd_full) / (divisors.empty() ? 1.0 : divisors[i]);
  c.rope_global = {RopeLayout::neox, hd_full, std::move(inv)};
  c.rope_local = {RopeLayout::neox, hd_swa, rope_inv_freq(base_swa, hd_swa, 1.0, {})};
  c.attn_scale = read_float(md, a + "attention.scale", 1.0);
  c.final_softcap = read_float(md, a + "final_logit_softcapping", 0.0);
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.activation = Activation::gelu_tanh;
  c.moe_layer.assign(c.n_layers, false);
  if (md.find(a + "expert_count")) read_gemma4_moe(md, a, c);
  return c;
}

// qwen35: the gated delta-net shapes, which layers are linear attention (llama.cpp's
// full_attention_interval: layer i is full attention when (i + 1) % interval == 0) and the
// multi-token-prediction blocks (nextn_predict_layers) counted in block_count after the layers.
void read_hybrid(const ModelArchive& archive, const std::string& a, ModelConfig& c) {
  const gguf::Metadata& md = archive.metadata;
  c.ssm_conv_kernel = read_int(md, a + "ssm.conv_kernel", 1, 64);
  c.ssm_k_dim = read_int(md, a + "ssm.state_size", 1, 1024);
  c.ssm_k_heads = read_int(md, a + "ssm.group_count", 1, 1024);
  c.ssm_v_heads = read_int(md, a + "ssm.time_step_rank", 1, 1024);
  const int32_t inner = read_int(md, a + "ssm.inner_size", 1, 1 << 20);
  if (c.ssm_v_heads % c.ssm_k_heads != 0 || inner % c.ssm_v_heads != 0)
    fail(ErrorCode::unsupported,
         "{}ssm.time_step_rank {} (v heads) must be a multiple of ssm.group_count {} (k heads) "
         "and divide ssm.inner_size {}",
         a, c.ssm_v_heads, c.ssm_k_heads, inner);
  c.ssm_v_dim = inner / c.ssm_v_heads;
  c.n_nextn_layers = read_int(md, a + "nextn_predict_layers", 0, c.n_layers - 1, 0);
  c.n_layers -= c.n_nextn_layers;
  const int32_t interval = read_int(md, a + "full_attention_interval", 1, c.n_layers);
  c.recurrent_layer.assign(c.n_layers, false);
  for (int il = 0; il < c.n_layers; ++il) c.recurrent_layer[il] = (il + 1) % interval != 0;
  c.attn_output_gate = true;
}

}  // namespace

ModelConfig model_config_read(const ModelArchive& archive) {
  const gguf::Metadata& md = archive.metadata;
  ModelConfig c;
  c.arch = archive.architecture();
  const ArchDescriptor* arch = arch_find(c.arch);
  if (arch == nullptr)
    fail(ErrorCode::unsupported, "architecture '{}' is not supported (supported: {})", c.arch,
         arch_supported_names());
  if (arch->model == ArchModel::gemma4) return read_gemma4(archive, std::move(c));
  const std::string a = c.arch + ".";
  c.n_embd = read_int(md, a + "embedding_length", 1, 1 << 16);
  c.n_layers = read_int(md, a + "block_count", 1, 1024);
  c.n_heads = read_int(md, a + "attention.head_count", 1, 1024);
  c.n_kv_heads = read_int(md, a + "attention.head_count_kv", 1, c.n_heads, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    fail(ErrorCode::unsupported, "{} heads are not a multiple of {} kv heads", c.n_heads,
         c.n_kv_heads);
  c.head_dim = read_int(md, a + "attention.key_length", 2, 1024, c.n_embd / c.n_heads);
  const int32_t v_dim = read_int(md, a + "attention.value_length", 1, 1024, c.head_dim);
  if (v_dim != c.head_dim)
    fail(ErrorCode::unsupported, "value_length {} differs from key_length {}", v_dim, c.head_dim);
  // qwen35moe routes every layer to experts: no dense MLP width.
  c.n_ff = read_int(md, a + "feed_forward_length", arch->dense_ffn ? 1 : 0, 1 << 20,
                    arch->dense_ffn ? std::nullopt : std::optional<int64_t>(0));
  c.n_ctx_train = read_int(md, a + "context_length", 1, 1 << 30);
  c.norm_eps = read_float(md, a + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.norm_eps > 0)) fail(ErrorCode::malformed_file, "rms epsilon {} <= 0", c.norm_eps);
  read_rope(archive, *arch, a, c);
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  c.qkv_bias = arch->qkv_bias;
  c.qk_norm = arch->qk_norm;
  if (arch->delta_net) read_hybrid(archive, a, c);
  c.window.assign(c.n_layers, 0);
  c.moe_layer.assign(c.n_layers, false);
  if (arch->routed_experts) read_moe(archive, a, c);
  // qwen35moe: no dense MLP to fall back on, so every layer needs its router; the shared
  // expert's width.
  if (!arch->dense_ffn) {
    c.n_ff_shexp = read_int(md, a + "expert_shared_feed_forward_length", 0, 1 << 20, 0);
    for (int il = 0; il < c.n_layers; ++il)
      if (!c.moe_layer[il])
        fail(ErrorCode::not_found, "model lacks tensor blk.{}.ffn_gate_inp.weight", il);
  }
  if (arch->model == ArchModel::gemma3) {
    read_gemma3_window(md, a, c);
    const double default_scale = c.n_layers == 62
                                     ? 1.0 / std::sqrt(static_cast<double>(c.n_embd) / c.n_heads)
                                     : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    c.attn_scale = read_float(md, a + "attention.scale", default_scale);
    c.attn_softcap = read_float(md, a + "attn_logit_softcapping", 0.0);
    c.final_softcap = read_float(md, a + "final_logit_softcapping", 0.0);
    c.sandwich_norms = true;
    c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.activation = Activation::gelu_tanh;
  }
  return c;
}

}  // namespace memra
