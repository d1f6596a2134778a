// Binds archive tensors to ModelWeights by GGUF name with shape and dtype checks, tracking which
// tensors were used so that an unexpected tensor (a feature we would silently ignore) is refused.
#include "models/model_weights.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/model_archive.h"
#include "formats/quant.h"

namespace memra {

namespace {

class Binder {
 public:
  explicit Binder(const ModelArchive& archive) : archive_(archive) {}

  const TensorView* find(const std::string& name) const { return archive_.find_tensor(name); }

  // A 2-D weight of ggml dims [n_in, n_out].
  TensorView matrix(const std::string& name, int64_t n_in, int64_t n_out) {
    const TensorView& t = require(name);
    if (t.n_dims > 2 || t.ne[0] != static_cast<uint64_t>(n_in) ||
        t.ne[1] != static_cast<uint64_t>(n_out))
      fail(ErrorCode::malformed_file, "tensor {} has shape [{}, {}], expected [{}, {}]", name,
           t.ne[0], t.ne[1], n_in, n_out);
    return t;
  }

  // n_expert stacked matrices of [n_in, n_out] each: ggml dims [n_in, n_out, n_expert].
  TensorView experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) {
    const TensorView& t = require(name);
    if (t.n_dims != 3 || t.ne[0] != static_cast<uint64_t>(n_in) ||
        t.ne[1] != static_cast<uint64_t>(n_out) || t.ne[2] != static_cast<uint64_t>(n_expert))
      fail(ErrorCode::malformed_file, "tensor {} has shape [{}, {}, {}], expected [{}, {}, {}]",
           name, t.ne[0], t.ne[1], t.ne[2], n_in, n_out, n_expert);
    return t;
  }

  // A vector of n, converted to f32 into storage owned by `w`.
  TensorView vector(const std::string& name, int64_t n, ModelWeights& w) {
    const TensorView& t = require(name);
    if (t.n_elements() != static_cast<uint64_t>(n) || t.ne[0] != static_cast<uint64_t>(n))
      fail(ErrorCode::malformed_file, "tensor {} has {} elements, expected a vector of {}", name,
           t.n_elements(), n);
    std::vector<float>& out = w.host_vectors.emplace_back(n);
    quant::dequantize_row(t.dtype, t.data, out.data(), n);
    TensorView v;
    v.name = name;
    v.dtype = DType::f32;
    v.n_dims = 1;
    v.ne = {static_cast<uint64_t>(n), 1, 1, 1};
    v.data = out.data();
    v.n_bytes = static_cast<uint64_t>(n) * sizeof(float);
    return v;
  }

  // A small f32 matrix of ggml dims [n0, n1] (the delta-net conv taps), converted like vector().
  TensorView small_matrix(const std::string& name, int64_t n0, int64_t n1, ModelWeights& w) {
    const TensorView& t = require(name);
    if (t.n_dims != 2 || t.ne[0] != static_cast<uint64_t>(n0) ||
        t.ne[1] != static_cast<uint64_t>(n1))
      fail(ErrorCode::malformed_file, "tensor {} has shape [{}, {}], expected [{}, {}]", name,
           t.ne[0], t.ne[1], n0, n1);
    std::vector<float>& out = w.host_vectors.emplace_back(n0 * n1);
    const uint64_t row_bytes = dtype_row_bytes(t.dtype, t.ne[0], name);
    for (int64_t r = 0; r < n1; ++r)
      quant::dequantize_row(t.dtype, static_cast<const uint8_t*>(t.data) + r * row_bytes,
                            out.data() + r * n0, n0);
    TensorView v = t;
    v.dtype = DType::f32;
    v.data = out.data();
    v.n_bytes = static_cast<uint64_t>(n0 * n1) * sizeof(float);
    return v;
  }

  // Gated attention's attn_q [n_in, n_heads * 2 * head_dim]: per head, head_dim query rows then
  // head_dim gate rows. Returns the query rows and the gate rows as two matrices of owned row
  // copies (rows are whole quant blocks, so any dtype splits this way).
  std::pair<TensorView, TensorView> split_gated_q(const std::string& name, int64_t n_in,
                                                  int64_t n_heads, int64_t head_dim,
                                                  ModelWeights& w) {
    const TensorView t = matrix(name, n_in, n_heads * 2 * head_dim);
    const uint64_t row_bytes = dtype_row_bytes(t.dtype, t.ne[0], name);
    const auto* src = static_cast<const uint8_t*>(t.data);
    TensorView halves[2];
    for (int part = 0; part < 2; ++part) {
      std::vector<uint8_t>& out = w.host_bytes.emplace_back(n_heads * head_dim * row_bytes);
      for (int64_t h = 0; h < n_heads; ++h)
        std::memcpy(out.data() + h * head_dim * row_bytes,
                    src + (h * 2 + part) * head_dim * row_bytes, head_dim * row_bytes);
      TensorView& v = halves[part];
      v = t;
      v.name = name + (part == 0 ? " (query rows)" : " (gate rows)");
      v.ne[1] = static_cast<uint64_t>(n_heads * head_dim);
      v.data = out.data();
      v.n_bytes = out.size();
    }
    return {halves[0], halves[1]};
  }

  void mark_used(const std::string& name) { used_.insert(name); }

  // Marks every tensor of blocks [first, ...) used: the multi-token-prediction blocks a GGUF
  // counts after the model's layers (kept for speculative decoding later, never run now).
  void mark_blocks_from(int first) {
    for (const TensorView& t : archive_.tensors) {
      if (!t.name.starts_with("blk.")) continue;
      const size_t dot = t.name.find('.', 4);
      if (dot != std::string::npos && std::atoi(t.name.substr(4, dot - 4).c_str()) >= first)
        used_.insert(t.name);
    }
  }

  void refuse_unused() const {
    for (const TensorView& t : archive_.tensors)
      if (!used_.count(t.name))
        fail(ErrorCode::unsupported, "tensor {} is not used by the {} model (unsupported feature)",
             t.name, archive_.architecture());
  }

 private:
  const TensorView& require(const std::string& name) {
    const TensorView* t = archive_.find_tensor(name);
    if (!t) fail(ErrorCode::not_found, "model lacks tensor {}", name);
    if (!quant::can_dequantize(t->dtype))
      fail(ErrorCode::unsupported, "tensor {} has dtype {}, which the CPU backend cannot read",
           name, dtype_name(t->dtype));
    used_.insert(name);
    return *t;
  }

  const ModelArchive& archive_;
  std::set<std::string> used_;
};

// The feed-forward: the routed experts (and a shared expert when configured) in MoE layers,
// the dense MLP elsewhere.
void bind_ffn(Binder& b, const ModelConfig& c, int il, const std::string& p, LayerWeights& L) {
  if (!c.moe_layer[il]) {
    L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
    L.w_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    return;
  }
  L.ffn_gate_inp = b.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
  L.ffn_gate_exps = b.experts(p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
  L.ffn_up_exps = b.experts(p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
  L.ffn_down_exps = b.experts(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
  if (c.n_ff_shexp == 0) return;
  L.ffn_gate_inp_shexp = b.matrix(p + "ffn_gate_inp_shexp.weight", c.n_embd, 1);
  L.ffn_gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shexp);
  L.ffn_up_shexp = b.matrix(p + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp);
  L.ffn_down_shexp = b.matrix(p + "ffn_down_shexp.weight", c.n_ff_shexp, c.n_embd);
}

// A gated delta-net layer's mixer (llama.cpp's qwen35 names).
void bind_delta_net(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L,
                    ModelWeights& w) {
  const int64_t conv_dim = c.ssm_conv_dim(), v_total = int64_t{c.ssm_v_heads} * c.ssm_v_dim;
  L.ssm_in_qkv = b.matrix(p + "attn_qkv.weight", c.n_embd, conv_dim);
  L.ssm_in_z = b.matrix(p + "attn_gate.weight", c.n_embd, v_total);
  L.ssm_in_b = b.matrix(p + "ssm_beta.weight", c.n_embd, c.ssm_v_heads);
  L.ssm_in_a = b.matrix(p + "ssm_alpha.weight", c.n_embd, c.ssm_v_heads);
  L.ssm_conv = b.small_matrix(p + "ssm_conv1d.weight", c.ssm_conv_kernel, conv_dim, w);
  L.ssm_a = b.vector(p + "ssm_a", c.ssm_v_heads, w);
  L.ssm_dt = b.vector(p + "ssm_dt.bias", c.ssm_v_heads, w);
  L.ssm_norm = b.vector(p + "ssm_norm.weight", c.ssm_v_dim, w);
  L.ssm_out = b.matrix(p + "ssm_out.weight", v_total, c.n_embd);
}

LayerWeights bind_layer(Binder& b, const ModelConfig& c, int il, ModelWeights& w) {
  const std::string p = "blk." + std::to_string(il) + ".";
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  LayerWeights L;
  L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd, w);
  // qwen35 names the norm before the MLP post_attention_norm (llama.cpp).
  const std::string ffn_norm = c.hybrid() ? "post_attention_norm.weight" : "ffn_norm.weight";
  if (c.hybrid() && c.recurrent_layer[il]) {
    bind_delta_net(b, c, p, L, w);
    L.ffn_norm = b.vector(p + ffn_norm, c.n_embd, w);
    bind_ffn(b, c, il, p, L);
    return L;
  }
  if (c.attn_output_gate)
    std::tie(L.wq, L.wq_gate) =
        b.split_gated_q(p + "attn_q.weight", c.n_embd, c.n_heads, c.head_dim, w);
  else
    L.wq = b.matrix(p + "attn_q.weight", c.n_embd, q_dim);
  L.wk = b.matrix(p + "attn_k.weight", c.n_embd, kv_dim);
  L.wv = b.matrix(p + "attn_v.weight", c.n_embd, kv_dim);
  L.wo = b.matrix(p + "attn_output.weight", q_dim, c.n_embd);
  if (c.qkv_bias) {
    L.bq = b.vector(p + "attn_q.bias", q_dim, w);
    L.bk = b.vector(p + "attn_k.bias", kv_dim, w);
    L.bv = b.vector(p + "attn_v.bias", kv_dim, w);
  }
  if (c.qk_norm) {
    L.q_norm = b.vector(p + "attn_q_norm.weight", c.head_dim, w);
    L.k_norm = b.vector(p + "attn_k_norm.weight", c.head_dim, w);
  }
  L.ffn_norm = b.vector(p + ffn_norm, c.n_embd, w);
  bind_ffn(b, c, il, p, L);
  if (c.sandwich_norms) {
    L.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.n_embd, w);
    L.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.n_embd, w);
  }
  return L;
}

// Gemma 4's MoE block beside the MLP (llama.cpp's gemma4 names).
void bind_gemma4_moe(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L,
                     ModelWeights& w) {
  L.ffn_gate_inp = b.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
  L.ffn_gate_inp_scale = b.vector(p + "ffn_gate_inp.scale", c.n_embd, w);
  L.ffn_gate_up_exps =
      b.experts(p + "ffn_gate_up_exps.weight", c.n_embd, 2 * int64_t{c.n_ff_exp}, c.n_expert);
  L.ffn_down_exps = b.experts(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
  L.ffn_exp_scale = b.vector(p + "ffn_down_exps.scale", c.n_expert, w);
  L.ffn_pre_norm_2 = b.vector(p + "pre_ffw_norm_2.weight", c.n_embd, w);
  L.ffn_post_norm_1 = b.vector(p + "post_ffw_norm_1.weight", c.n_embd, w);
  L.ffn_post_norm_2 = b.vector(p + "post_ffw_norm_2.weight", c.n_embd, w);
}

// Gemma 4: per-layer shapes (model_config.h), no K/V tensors in KV-sharing layers, no V where
// V is K, the per-layer input block when n_embd_per_layer > 0, the MoE block in MoE layers.
LayerWeights bind_gemma4_layer(Binder& b, const ModelConfig& c, int il, ModelWeights& w) {
  const std::string p = "blk." + std::to_string(il) + ".";
  const int64_t hd = c.layer_head_dim[il], q_dim = int64_t{c.n_heads} * hd,
                kv_dim = int64_t{c.layer_n_kv_heads[il]} * hd, n_ff = c.layer_n_ff[il];
  LayerWeights L;
  L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd, w);
  L.wq = b.matrix(p + "attn_q.weight", c.n_embd, q_dim);
  L.q_norm = b.vector(p + "attn_q_norm.weight", hd, w);
  if (c.kv_source[il] == il) {
    L.wk = b.matrix(p + "attn_k.weight", c.n_embd, kv_dim);
    if (!c.v_from_k[il]) L.wv = b.matrix(p + "attn_v.weight", c.n_embd, kv_dim);
    L.k_norm = b.vector(p + "attn_k_norm.weight", hd, w);
    std::vector<float>& ones = w.host_vectors.emplace_back(hd, 1.0f);
    L.v_norm.name = p + "v_norm (ones)";
    L.v_norm.dtype = DType::f32;
    L.v_norm.n_dims = 1;
    L.v_norm.ne = {static_cast<uint64_t>(hd), 1, 1, 1};
    L.v_norm.data = ones.data();
    L.v_norm.n_bytes = static_cast<uint64_t>(hd) * sizeof(float);
  }
  L.wo = b.matrix(p + "attn_output.weight", q_dim, c.n_embd);
  L.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.n_embd, w);
  L.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd, w);
  L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, n_ff);
  L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, n_ff);
  L.w_down = b.matrix(p + "ffn_down.weight", n_ff, c.n_embd);
  L.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.n_embd, w);
  if (c.moe_layer[il]) bind_gemma4_moe(b, c, p, L, w);
  if (c.n_embd_per_layer > 0) {
    L.inp_gate = b.matrix(p + "inp_gate.weight", c.n_embd, c.n_embd_per_layer);
    L.inp_proj = b.matrix(p + "proj.weight", c.n_embd_per_layer, c.n_embd);
    L.inp_post_norm = b.vector(p + "post_norm.weight", c.n_embd, w);
  }
  if (b.find(p + "layer_output_scale.weight")) {
    b.vector(p + "layer_output_scale.weight", 1, w);
    L.output_scale = w.host_vectors.back()[0];
  }
  return L;
}

}  // namespace

ModelWeights model_weights_bind(const ModelArchive& archive, ModelConfig& config) {
  Binder b(archive);
  const TensorView* embd = b.find("token_embd.weight");
  if (!embd) fail(ErrorCode::not_found, "model lacks tensor token_embd.weight");
  if (embd->ne[1] == 0 || embd->ne[1] > (1u << 24))
    fail(ErrorCode::malformed_file, "token_embd.weight has {} rows", embd->ne[1]);
  config.n_vocab = static_cast<int32_t>(embd->ne[1]);
  ModelWeights w;
  w.token_embd = b.matrix("token_embd.weight", config.n_embd, config.n_vocab);
  w.output = b.find("output.weight") ? b.matrix("output.weight", config.n_embd, config.n_vocab)
                                     : w.token_embd;
  w.output_norm = b.vector("output_norm.weight", config.n_embd, w);
  if (config.n_embd_per_layer > 0) {
    const int64_t width = int64_t{config.n_layers} * config.n_embd_per_layer;
    w.per_layer_token_embd = b.matrix("per_layer_token_embd.weight", width, config.n_vocab);
    w.per_layer_model_proj = b.matrix("per_layer_model_proj.weight", config.n_embd, width);
    w.per_layer_proj_norm = b.vector("per_layer_proj_norm.weight", config.n_embd_per_layer, w);
  }
  const ArchDescriptor* arch = arch_find(config.arch);
  const bool gemma4 = arch != nullptr && arch->model == ArchModel::gemma4;
  for (int il = 0; il < config.n_layers; ++il)
    w.layers.push_back(gemma4 ? bind_gemma4_layer(b, config, il, w) : bind_layer(b, config, il, w));
  if (archive.find_tensor("rope_freqs.weight")) b.mark_used("rope_freqs.weight");
  if (config.n_nextn_layers > 0) b.mark_blocks_from(config.n_layers);
  b.refuse_unused();
  return w;
}

void model_weights_upload(ModelWeights& weights, Ops& ops,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  std::map<const void*, TensorView> uploaded;  // host data -> backend view (tied tensors)
  uint64_t total = 0, done = 0;
  weights.for_each([&](TensorView& t) {
    if (uploaded.emplace(t.data, TensorView{}).second) total += t.n_bytes;
  });
  uploaded.clear();
  // The embedding table is read by rows (embed), and by matmul too when the output is tied to it.
  auto use_of = [&](const TensorView& t) {
    if (t.data != weights.token_embd.data) return WeightUse::matmul;
    return t.data == weights.output.data ? WeightUse::matmul_and_rows : WeightUse::rows;
  };
  weights.for_each([&](TensorView& t) {
    auto it = uploaded.find(t.data);
    if (it == uploaded.end()) {
      it = uploaded.emplace(t.data, ops.weight_upload(t, use_of(t))).first;
      done += t.n_bytes;
      if (progress) progress(done, total);
    }
    t = it->second;
  });
  if (!ops.host_memory()) {
    weights.host_vectors.clear();
    weights.host_bytes.clear();
  }
}

}  // namespace memra
