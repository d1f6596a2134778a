// The tensor lists `memra synth` writes (synth_tensors.h), with the value ranges that keep a
// forward pass of random weights finite and its activations at unit scale.
#include "formats/synth_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "formats/arch/arch.h"

namespace memra::synth {
namespace {

// FNV-1a: the tensor's RNG stream follows its name, not its position in the file.
uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ULL;
  return h;
}

// Scales. A matrix of fan-in n draws N(0, 1/n): a unit-RMS input gives a unit-RMS output, so
// activations neither grow nor vanish with depth (pre-norm blocks renormalize each input anyway).
// token_embd / output draw N(0, s^2/n_embd) with s = sqrt(2 ln V) + 2: after the final norm the
// logits are ~N(0, s^2), and once s exceeds sqrt(2 ln V) (the expected maximum of V standard
// normals) the largest logit stands clear of the rest, giving peaked next-token distributions
// like the fixtures' (scripts/gen_model_fixtures.py, MATRIX_STD) rather than a flat softmax.
float logit_std(int64_t n_vocab) {
  return static_cast<float>(std::sqrt(2.0 * std::log(static_cast<double>(n_vocab))) + 2.0);
}

float fan_in_std(uint64_t in) {
  return 1.0f / std::sqrt(static_cast<float>(in));
}

struct TensorListBuilder {
  std::vector<TensorPlan>& out;

  TensorPlan& add(std::string name, std::initializer_list<uint64_t> ne, Init init, float std) {
    TensorPlan t;
    t.view.name = std::move(name);
    t.view.n_dims = static_cast<int>(ne.size());
    std::copy(ne.begin(), ne.end(), t.view.ne.begin());
    t.init = init;
    t.std = std;
    t.stream = name_hash(t.view.name);
    out.push_back(std::move(t));
    return out.back();
  }
  // A weight applied as y = W x with x of `in` features: ne = {in, out}.
  void matrix(std::string name, uint64_t in, uint64_t rows) {
    add(std::move(name), {in, rows}, Init::matrix, fan_in_std(in));
  }
  // n_expert stacked matrices of `in` -> `rows`: ne = {in, rows, n_expert}.
  void experts(std::string name, uint64_t in, uint64_t rows, uint64_t n_expert) {
    add(std::move(name), {in, rows, n_expert}, Init::matrix, fan_in_std(in));
  }
  void norm(std::string name, uint64_t n) { add(std::move(name), {n}, Init::norm, 0.0f); }
  void shifted(std::string name, uint64_t n, float mean, float std) {
    add(std::move(name), {n}, Init::shifted, std).mean = mean;
  }
};

// The metadata key A.<key> as a whole number (hf_config wrote it; absent means a bug here).
uint64_t md_int(const HfModelConfig& c, const std::string& key) {
  const auto v = c.metadata.get_int(c.arch + "." + key);
  if (!v) fail(ErrorCode::internal, "synth: {} metadata lacks {}.{}", c.arch, c.arch, key);
  return static_cast<uint64_t>(*v);
}

// A per-layer u32 array key (gemma4's head_count_kv, feed_forward_length).
std::vector<int64_t> md_ints(const HfModelConfig& c, const std::string& key) {
  auto v = c.metadata.get_int_array(c.arch + "." + key);
  if (!v || v->size() != static_cast<size_t>(c.n_layer))
    fail(ErrorCode::internal, "synth: {} metadata lacks the array {}.{}", c.arch, c.arch, key);
  return *v;
}

std::string blk(int64_t l) {
  return "blk." + std::to_string(l) + ".";
}

// The SiLU-gated MLP of width n_ff.
void dense_ffn(TensorListBuilder& b, const std::string& p, uint64_t e, uint64_t n_ff) {
  b.matrix(p + "ffn_gate.weight", e, n_ff);
  b.matrix(p + "ffn_up.weight", e, n_ff);
  b.matrix(p + "ffn_down.weight", n_ff, e);
}

// qwen3moe's sparse layers (HfModelConfig::moe_layers): a router (logits ~N(0, 1) on the normed
// input, as qwen35moe's) and the experts as stacked 3-D tensors, no shared expert.
void routed_ffn(TensorListBuilder& b, const HfModelConfig& c, const std::string& p) {
  const uint64_t e = c.n_embd, n_expert = md_int(c, "expert_count");
  const uint64_t n_ff = md_int(c, "expert_feed_forward_length");
  b.matrix(p + "ffn_gate_inp.weight", e, n_expert);
  b.experts(p + "ffn_gate_exps.weight", e, n_ff, n_expert);
  b.experts(p + "ffn_up_exps.weight", e, n_ff, n_expert);
  b.experts(p + "ffn_down_exps.weight", n_ff, e, n_expert);
}

// llama / qwen3 / qwen3moe / gemma3: attention and an MLP (or qwen3moe's routed experts, in the
// layers the config makes sparse) in every layer.
void dense_layers(TensorListBuilder& b, const HfModelConfig& c) {
  const uint64_t e = c.n_embd, q = c.n_head * c.head_dim, kv = c.n_head_kv * c.head_dim;
  const uint64_t n_ff = md_int(c, "feed_forward_length");
  const ArchDescriptor& arch = *arch_find(c.arch);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = blk(l);
    b.norm(p + "attn_norm.weight", e);
    b.matrix(p + "attn_q.weight", e, q);
    b.matrix(p + "attn_k.weight", e, kv);
    b.matrix(p + "attn_v.weight", e, kv);
    b.matrix(p + "attn_output.weight", q, e);
    if (arch.qk_norm) {
      b.norm(p + "attn_q_norm.weight", c.head_dim);
      b.norm(p + "attn_k_norm.weight", c.head_dim);
    }
    b.norm(p + "ffn_norm.weight", e);
    if (static_cast<size_t>(l) < c.moe_layers.size() && c.moe_layers[l])
      routed_ffn(b, c, p);
    else
      dense_ffn(b, p, e, n_ff);
    if (arch.model == ArchModel::gemma3) {
      b.norm(p + "post_attention_norm.weight", e);
      b.norm(p + "post_ffw_norm.weight", e);
    }
  }
}

// qwen35's gated delta-net mixer. Value ranges: ssm_a is GGUF's A = -exp(A_log), the per-head
// decay rate; it must stay negative (a positive one grows the state without bound), so it draws
// -1 +- 0.25 (bounded at 3.46 std: within [-1.9, -0.1]); ssm_dt.bias draws around transformers'
// initial ones. The conv taps' fan-in is the kernel width; q and k are L2-normed in the layer, so
// the recurrence stays bounded whatever the projections.
void delta_net(TensorListBuilder& b, const HfModelConfig& c, const std::string& p) {
  const uint64_t e = c.n_embd, kernel = md_int(c, "ssm.conv_kernel");
  const uint64_t k_dim = md_int(c, "ssm.state_size"), k_heads = md_int(c, "ssm.group_count");
  const uint64_t v_heads = md_int(c, "ssm.time_step_rank"), inner = md_int(c, "ssm.inner_size");
  const uint64_t conv_dim = 2 * k_heads * k_dim + inner;
  b.matrix(p + "attn_qkv.weight", e, conv_dim);
  b.matrix(p + "attn_gate.weight", e, inner);
  b.matrix(p + "ssm_beta.weight", e, v_heads);
  b.matrix(p + "ssm_alpha.weight", e, v_heads);
  b.matrix(p + "ssm_conv1d.weight", kernel, conv_dim);
  b.shifted(p + "ssm_a", v_heads, -1.0f, 0.25f);
  b.shifted(p + "ssm_dt.bias", v_heads, 1.0f, 0.1f);
  b.norm(p + "ssm_norm.weight", inner / v_heads);
  b.matrix(p + "ssm_out.weight", inner, e);
}

// qwen35moe's feed-forward: a router (its logits ~N(0, 1) on the normed input), the experts as
// stacked 3-D tensors, and the sigmoid-gated shared expert.
void qwen35_moe_ffn(TensorListBuilder& b, const HfModelConfig& c, const std::string& p) {
  const uint64_t e = c.n_embd, n_expert = md_int(c, "expert_count");
  const uint64_t n_ff = md_int(c, "expert_feed_forward_length");
  const uint64_t n_shared = md_int(c, "expert_shared_feed_forward_length");
  b.matrix(p + "ffn_gate_inp.weight", e, n_expert);
  b.experts(p + "ffn_gate_exps.weight", e, n_ff, n_expert);
  b.experts(p + "ffn_up_exps.weight", e, n_ff, n_expert);
  b.experts(p + "ffn_down_exps.weight", n_ff, e, n_expert);
  b.matrix(p + "ffn_gate_inp_shexp.weight", e, 1);
  b.matrix(p + "ffn_gate_shexp.weight", e, n_shared);
  b.matrix(p + "ffn_up_shexp.weight", e, n_shared);
  b.matrix(p + "ffn_down_shexp.weight", n_shared, e);
}

// qwen35 / qwen35moe: delta-net layers, and every full_attention_interval-th layer gated
// attention (attn_q holds each head's query rows then its gate rows).
void qwen35_layers(TensorListBuilder& b, const HfModelConfig& c) {
  const uint64_t e = c.n_embd, hd = c.head_dim;
  const uint64_t interval = md_int(c, "full_attention_interval");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = blk(l);
    b.norm(p + "attn_norm.weight", e);
    if ((l + 1) % interval != 0) {
      delta_net(b, c, p);
    } else {
      b.matrix(p + "attn_q.weight", e, c.n_head * 2 * hd);
      b.matrix(p + "attn_k.weight", e, c.n_head_kv * hd);
      b.matrix(p + "attn_v.weight", e, c.n_head_kv * hd);
      b.matrix(p + "attn_output.weight", c.n_head * hd, e);
      b.norm(p + "attn_q_norm.weight", hd);
      b.norm(p + "attn_k_norm.weight", hd);
    }
    b.norm(p + "post_attention_norm.weight", e);
    if (arch_find(c.arch)->routed_experts)
      qwen35_moe_ffn(b, c, p);
    else
      dense_ffn(b, p, e, md_int(c, "feed_forward_length"));
  }
}

// Gemma 4's MoE block beside the MLP. The router reads rms_norm(x) * scale / sqrt(n_embd), whose
// elements are ~1/sqrt(n_embd): a router of std 1 gives logits ~N(0, 1), so each token prefers
// some experts (fan-in scaling would leave them ~N(0, 1/n_embd), a flat softmax). The scales are
// positive, near 1, as the trained ones.
void gemma4_moe(TensorListBuilder& b, const HfModelConfig& c, const std::string& p) {
  const uint64_t e = c.n_embd, n_expert = md_int(c, "expert_count");
  const uint64_t n_ff = md_int(c, "expert_feed_forward_length");
  b.add(p + "ffn_gate_inp.weight", {e, n_expert}, Init::matrix, 1.0f);
  b.norm(p + "ffn_gate_inp.scale", e);
  b.experts(p + "ffn_gate_up_exps.weight", e, 2 * n_ff, n_expert);
  b.experts(p + "ffn_down_exps.weight", n_ff, e, n_expert);
  b.norm(p + "ffn_down_exps.scale", n_expert);
  b.norm(p + "pre_ffw_norm_2.weight", e);
  b.norm(p + "post_ffw_norm_1.weight", e);
  b.norm(p + "post_ffw_norm_2.weight", e);
}

// Gemma 4: per-layer head dims (sliding / full), kv heads and MLP widths; the last
// shared_kv_layers layers reuse an earlier layer's KV (no K/V tensors); full layers of an
// attention_k_eq_v model take V from K (no attn_v); the per-layer input block and the MoE block
// where the config has them; layer_output_scale in every layer, as the checkpoints save it.
void gemma4_layers(TensorListBuilder& b, const HfModelConfig& c) {
  const uint64_t e = c.n_embd, hd_full = md_int(c, "attention.key_length");
  const uint64_t hd_swa = md_int(c, "attention.key_length_swa");
  const std::vector<int64_t> kv_heads = md_ints(c, "attention.head_count_kv");
  const std::vector<int64_t> n_ff = md_ints(c, "feed_forward_length");
  const auto* pattern = c.metadata.find(c.arch + ".attention.sliding_window_pattern");
  const auto& sliding = std::get<gguf::Array>(pattern->data).items;
  const int64_t first_shared =
      c.n_layer - static_cast<int64_t>(md_int(c, "attention.shared_kv_layers"));
  const bool moe = c.metadata.find(c.arch + ".expert_count") != nullptr;
  const auto ple = c.metadata.get_int(c.arch + ".embedding_length_per_layer_input").value_or(0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = blk(l);
    const bool swa = std::get<bool>(sliding[l].data);
    const uint64_t hd = swa ? hd_swa : hd_full, q = c.n_head * hd, kv = kv_heads[l] * hd;
    b.norm(p + "attn_norm.weight", e);
    b.matrix(p + "attn_q.weight", e, q);
    b.norm(p + "attn_q_norm.weight", hd);
    if (l < first_shared) {
      b.matrix(p + "attn_k.weight", e, kv);
      if (swa || !c.gemma4_k_eq_v) b.matrix(p + "attn_v.weight", e, kv);
      b.norm(p + "attn_k_norm.weight", hd);
    }
    b.matrix(p + "attn_output.weight", q, e);
    b.norm(p + "post_attention_norm.weight", e);
    b.norm(p + "ffn_norm.weight", e);
    dense_ffn(b, p, e, n_ff[l]);
    b.norm(p + "post_ffw_norm.weight", e);
    if (moe) gemma4_moe(b, c, p);
    if (ple > 0) {
      b.matrix(p + "inp_gate.weight", e, ple);
      b.matrix(p + "proj.weight", ple, e);
      b.norm(p + "post_norm.weight", e);
    }
    b.norm(p + "layer_output_scale.weight", 1);
  }
  if (ple > 0) {
    const uint64_t width = c.n_layer * ple;
    b.matrix("per_layer_token_embd.weight", width, c.vocab_size);
    b.matrix("per_layer_model_proj.weight", e, width);
    b.norm("per_layer_proj_norm.weight", ple);
  }
}

}  // namespace

std::vector<TensorPlan> tensor_list(const HfModelConfig& c) {
  std::vector<TensorPlan> out;
  TensorListBuilder b{out};
  const uint64_t e = c.n_embd;
  const float embd_std = logit_std(c.vocab_size) / std::sqrt(static_cast<float>(e));
  b.add("token_embd.weight", {e, uint64_t(c.vocab_size)}, Init::matrix, embd_std);
  const ArchDescriptor& arch = *arch_find(c.arch);  // hf_config_from_json refuses any other
  if (arch.delta_net)
    qwen35_layers(b, c);
  else if (arch.model == ArchModel::gemma4)
    gemma4_layers(b, c);
  else
    dense_layers(b, c);
  b.norm("output_norm.weight", e);
  if (!c.tied_embeddings)
    b.add("output.weight", {e, uint64_t(c.vocab_size)}, Init::matrix, embd_std);
  if (!c.rope_freqs.empty()) {
    b.add("rope_freqs.weight", {c.rope_freqs.size()}, Init::values, 0.0f);
    out.back().values = c.rope_freqs;
  }
  return out;
}

}  // namespace memra::synth
