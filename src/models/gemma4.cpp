// Gemma 4 (text): Gemma 3's sandwich-normed layers (embeddings scaled by sqrt(n_embd), GeGLU
// with gelu-tanh, sliding and full layers) with per-layer head dims and kv heads, unscaled
// attention over RMS-normed q and k, V RMS-normed without a weight (and taken from K's projection
// where attention_k_eq_v), the last shared_kv_layers layers attending over an earlier layer's KV,
// per-layer widths of the MLP (double-wide in the sharing layers), per-layer input embeddings
// added after each layer, a per-layer output scale, and optionally (enable_moe_block) routed
// experts beside every layer's MLP. Norm weights are plain w (not 1 + w).
// transformers' Gemma4TextModel is the reference; model_config.cpp reads the config. The norms
// between blocks go to the backend as fused ops (post_norm_add_norm, rms_norm_dual, v's norm in
// qk_norm_rope_store: one launch each on CUDA, the plain ops' bits), the plain ops when tracing.
#include <cmath>

#include "models/decoder.h"

namespace memra {

namespace {

const float* f32(const TensorView& t) {
  return static_cast<const float*>(t.data);
}

class Gemma4Model final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  // The per-layer input buffers sized for the largest step up front, so that recorded decode
  // steps find them where they were (a later growth goes through grow(), which drops the graphs).
  std::vector<int32_t> prepare(const StepLimits& limits) override {
    reserve_ple(limits.max_batch_tokens);
    return DecoderModel::prepare(limits);
  }

  void forward_layers(int64_t n, const BackendKvCache& kv) override {
    float *x = s_.x.f32(), *h = s_.h.f32(), *out = s_.out.f32();
    embed(x);
    if (cfg_.n_embd_per_layer > 0) per_layer_inputs(x, n);
    // Layer 0's attn_norm; every later layer's comes with the end of the layer before it.
    if (cfg_.n_layers > 0) norm(x, w_.layers[0].attn_norm, n, h, "attn_norm", 0);
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& L = w_.layers[il];
      attention(il, n, kv, h, out);
      // out = post_attn_norm(out); x += out; h = ffn_norm(x).
      sandwich(out, L.post_attn_norm, x, 1.0f, &L.ffn_norm, h, n,
               {"post_attn_norm", "attn_residual", nullptr, "ffn_norm", il, il});
      mlp(il, h, n, out);
      if (cfg_.moe_layer[il]) moe_beside_mlp(il, x, n, out);
      layer_end(il, x, n, h, out);
    }
  }

 private:
  void reserve_ple(int64_t n) {
    if (cfg_.n_embd_per_layer == 0) return;
    const size_t width = static_cast<size_t>(cfg_.n_layers) * cfg_.n_embd_per_layer;
    const size_t bytes = static_cast<size_t>(n) * width * sizeof(float);
    for (Buffer* b : {&ple_tok_, &ple_, &ple_layers_}) grow(*b, bytes);
  }

  // The per-layer inputs of the step: (rms_norm(proj(x) / sqrt(n_embd)) + embed_pl(tokens) *
  // sqrt(P)) / sqrt(2) as [n x n_layers x P], stored layer-major [n_layers][n][P] so that each
  // layer's slice is contiguous.
  void per_layer_inputs(const float* x, int64_t n) {
    reserve_ple(n);
    const int64_t P = cfg_.n_embd_per_layer, LP = int64_t{cfg_.n_layers} * P;
    float *tok = ple_tok_.f32(), *proj = ple_.f32(), *layers = ple_layers_.f32();
    ops_->embed(w_.per_layer_token_embd, std::sqrt(static_cast<float>(P)), tok);
    trace("per_layer_embed", -1, tok, n, LP);
    ops_->matmul(w_.per_layer_model_proj, x, n, proj);
    ops_->scale(proj, static_cast<float>(1.0 / std::sqrt(double(cfg_.n_embd))), n * LP);
    ops_->rms_norm(proj, f32(w_.per_layer_proj_norm), n * cfg_.n_layers, P, cfg_.norm_eps, proj);
    ops_->add(proj, tok, n * LP);
    ops_->scale(proj, static_cast<float>(1.0 / std::sqrt(2.0)), n * LP);
    trace("per_layer_inputs", -1, proj, n, LP);
    const size_t row_bytes = static_cast<size_t>(P) * sizeof(float);
    for (int64_t t = 0; t < n; ++t)
      for (int il = 0; il < cfg_.n_layers; ++il)
        ops_->copy(layers + (il * n + t) * P, proj + t * LP + il * P, row_bytes);
  }

  // Trace names of a sandwich's results (the residual's after its scale: `scaled`).
  struct SandwichNames {
    const char *post, *residual, *scaled, *pre;
    int il, pre_il;
  };

  // Gemma's sandwich between two blocks: d = rms_norm(d) * post; x += d; x *= x_scale unless it
  // is 1; y = rms_norm(x) * pre when pre is given. One backend op (one launch on CUDA, the plain
  // ops' bits); with tracing on, the plain ops in that order with each result traced.
  void sandwich(float* d, const TensorView& post, float* x, float x_scale, const TensorView* pre,
                float* y, int64_t n, const SandwichNames& names) {
    const int64_t dim = cfg_.n_embd;
    if (!trace_) {
      ops_->post_norm_add_norm(d, f32(post), x, x_scale, pre ? f32(*pre) : nullptr,
                               pre ? y : nullptr, n, dim, cfg_.norm_eps);
      return;
    }
    norm(d, post, n, d, names.post, names.il);
    ops_->add(x, d, n * dim);
    trace(names.residual, names.il, x, n, dim);
    if (x_scale != 1.0f) {
      ops_->scale(x, x_scale, n * dim);
      trace(names.scaled, names.il, x, n, dim);
    }
    if (pre) norm(x, *pre, n, y, names.pre, names.pre_il);
  }

  // The layer's end: out = post_ffn_norm(out); x += out; the per-layer input block where the model
  // has one; x *= output_scale; and the next layer's attn_norm(x) into h, in the last sandwich.
  void layer_end(int il, float* x, int64_t n, float* h, float* out) {
    const LayerWeights& L = w_.layers[il];
    const TensorView* next = il + 1 < cfg_.n_layers ? &w_.layers[il + 1].attn_norm : nullptr;
    const SandwichNames names{"post_ffn_norm", "ffn_residual", "layer_out", "attn_norm", il,
                              il + 1};
    if (cfg_.n_embd_per_layer == 0) {
      sandwich(out, L.post_ffn_norm, x, L.output_scale, next, h, n, names);
      return;
    }
    // The per-layer input block sits between the residual add and the scale: its own sandwich
    // takes the scale and the next norm.
    sandwich(out, L.post_ffn_norm, x, 1.0f, nullptr, nullptr, n, names);
    per_layer_input_block(il, x, n, out, next, h);
  }

  // x += rms_norm(proj(gelu(gate(x)) * per_layer_input[il])) * inp_post_norm; then x *=
  // output_scale and h = next(x) where next is given (the layer's end).
  void per_layer_input_block(int il, float* x, int64_t n, float* out, const TensorView* next,
                             float* h) {
    const LayerWeights& L = w_.layers[il];
    const int64_t P = cfg_.n_embd_per_layer;
    float* gate = ple_tok_.f32();  // [n x P]: free once per_layer_inputs has run

    ops_->matmul(L.inp_gate, x, n, gate);
    ops_->gelu_tanh_mul(gate, ple_layers_.f32() + il * n * P, n, P, gate);
    trace("per_layer_gate", il, gate, n, P);
    ops_->matmul(L.inp_proj, gate, n, out);
    sandwich(out, L.inp_post_norm, x, L.output_scale, next, h, n,
             {"per_layer_out", "per_layer_residual", "layer_out", "attn_norm", il, il + 1});
  }

  void attention(int il, int64_t n, const BackendKvCache& kv, const float* h, float* out) {
    const LayerWeights& L = w_.layers[il];
    const int hd = cfg_.layer_head_dim[il], n_heads = cfg_.n_heads;
    const int n_kv = cfg_.layer_n_kv_heads[il];
    const int64_t q_dim = int64_t{n_heads} * hd, kv_dim = int64_t{n_kv} * hd;
    float *q = s_.q.f32(), *k = s_.k.f32(), *v = s_.v.f32();
    const RopeParams& rope = cfg_.window[il] > 0 ? cfg_.rope_local : cfg_.rope_global;
    ops_->matmul(L.wq, h, n, q);
    trace("q", il, q, n, q_dim);
    const bool own_kv = cfg_.kv_source[il] == il;
    if (own_kv) {
      if (cfg_.v_from_k[il]) {
        ops_->matmul(L.wk, h, n, k);
        ops_->copy(v, k, static_cast<size_t>(n * kv_dim) * sizeof(float));
      } else {
        const TensorView* kv_w[] = {&L.wk, &L.wv};
        float* const kv_y[] = {k, v};
        ops_->matmul_shared(kv_w, h, n, kv_y);
      }
      trace("k", il, k, n, kv_dim);
      trace("v", il, v, n, kv_dim);
    }
    if (own_kv && trace_) {  // untraced, the prologue below norms v
      ops_->rms_norm(v, f32(L.v_norm), n * n_kv, hd, cfg_.norm_eps, v);
      trace("v_norm", il, v, n, kv_dim);
    }
    if (own_kv && !trace_) {
      // v, q and k normed, q and k rotated, k and v stored: one launch where a backend fuses them
      // (the plain ops' arithmetic: kernel-check's qk_prologue cases hold the CUDA kernel to it bit
      // for bit at Gemma 4's head sizes), the same ops in another order where it does not.
      ops_->qk_norm_rope_store(kv.layer(il), n, n_heads, q, k, v, f32(L.q_norm), f32(L.k_norm),
                               f32(L.v_norm), cfg_.norm_eps, rope);
    } else {  // the plain ops, traced where tracing is on (a layer reading another's KV: q only)
      ops_->rms_norm(q, f32(L.q_norm), n * n_heads, hd, cfg_.norm_eps, q);
      trace("q_norm", il, q, n, q_dim);
      ops_->rope(q, n_heads, hd, rope);
      trace("q_rope", il, q, n, q_dim);
      if (own_kv) {
        ops_->rms_norm(k, f32(L.k_norm), n * n_kv, hd, cfg_.norm_eps, k);
        trace("k_norm", il, k, n, kv_dim);
        ops_->rope(k, n_kv, hd, rope);
        trace("k_rope", il, k, n, kv_dim);
        ops_->kv_store(kv.layer(il), k, v);
      }
    }
    const AttentionParams params{n_heads, cfg_.attn_scale, 0.0f, cfg_.window[il]};
    ops_->attention(kv.layer(cfg_.kv_source[il]), q, params, s_.attn.f32());
    trace("attn", il, s_.attn.f32(), n, q_dim);
    ops_->matmul(L.wo, s_.attn.f32(), n, out);
    trace("attn_out", il, out, n, cfg_.n_embd);
  }

  // out = down(gelu_tanh(gate(h)) * up(h)) at the layer's own width.
  void mlp(int il, const float* h, int64_t n, float* out) {
    const LayerWeights& L = w_.layers[il];
    const int64_t n_ff = cfg_.layer_n_ff[il];
    float *gate = s_.gate.f32(), *up = s_.up.f32();
    const TensorView* gate_up_w[] = {&L.w_gate, &L.w_up};
    float* const gate_up_y[] = {gate, up};
    ops_->matmul_shared(gate_up_w, h, n, gate_up_y);
    trace("ffn_gate", il, gate, n, n_ff);
    trace("ffn_up", il, up, n, n_ff);
    ops_->gelu_tanh_mul(gate, up, n, n_ff, gate);
    trace("ffn_act", il, gate, n, n_ff);
    ops_->matmul(L.w_down, gate, n, out);
    trace("ffn_out", il, out, n, cfg_.n_embd);
  }

  // The MoE block beside the MLP (transformers' enable_moe_block), out holding the MLP's output:
  // out = post_norm_1(out) + post_norm_2(moe(pre_norm_2(x))), where the router reads
  // rms_norm(x) * ffn_gate_inp.scale / sqrt(n_embd). Both read the residual x after attention,
  // not the MLP's normed input.
  void moe_beside_mlp(int il, const float* x, int64_t n, float* out) {
    const LayerWeights& L = w_.layers[il];
    const int64_t d = cfg_.n_embd;
    float *h = s_.h.f32(), *router_in = s_.moe_router_in.f32(), *moe = s_.moe_out.f32();
    norm(out, L.ffn_post_norm_1, n, out, "ffn_mlp", il);
    const auto router_scale = static_cast<float>(1.0 / std::sqrt(double(d)));
    if (trace_) {
      ops_->rms_norm(x, f32(L.ffn_gate_inp_scale), n, d, cfg_.norm_eps, router_in);
      ops_->scale(router_in, router_scale, n * d);
      trace("ffn_router_in", il, router_in, n, d);
      norm(x, L.ffn_pre_norm_2, n, h, "ffn_norm_2", il);
    } else {  // both norms of x from one reduction (one launch on CUDA), the router's input first
      ops_->rms_norm_dual(x, f32(L.ffn_gate_inp_scale), router_scale, router_in,
                          f32(L.ffn_pre_norm_2), h, n, d, cfg_.norm_eps);
    }
    moe_block(il, h, n, moe, router_in, "ffn_moe_out");
    // out += post_norm_2(moe).
    sandwich(moe, L.ffn_post_norm_2, out, 1.0f, nullptr, nullptr, n,
             {"ffn_moe", "ffn_moe_combined", nullptr, nullptr, il, il});
  }

  Buffer ple_tok_, ple_, ple_layers_;  // [n x n_layers * P] each (per_layer_inputs)
};

}  // namespace

std::unique_ptr<Model> gemma4_model_create(std::shared_ptr<const ModelArchive> archive,
                                           const ModelLoadOptions& options) {
  return std::make_unique<Gemma4Model>(std::move(archive), options);
}

}  // namespace memra
