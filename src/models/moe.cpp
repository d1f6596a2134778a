// The mixture-of-experts block over backend ops: the router is a matmul, moe_route picks and
// weighs each token's top-k experts, matmul_experts runs every (token, expert) pair's rows
// through its expert's matrices, and moe_combine adds a token's weighted expert outputs
// (qwen3moe, qwen35moe, and gemma4's block beside its MLP). Nothing is read on the host here:
// where the backend keeps the routing on the device, a decode step with MoE layers replays as
// a graph. Per token the arithmetic is fixed by its own routing (matmul rows are independent;
// its experts are added in increasing index), which keeps the batch invariance of DESIGN.md's
// determinism contract.
#include "models/decoder.h"

namespace memra {

void DecoderModel::moe_block(int il, const float* h, int64_t n, float* out, const float* router_in,
                             const char* out_name) {
  const LayerWeights& L = w_.layers[il];
  const int k = cfg_.n_expert_used;
  const int64_t d = cfg_.n_embd, ff = cfg_.n_ff_exp, pairs = n * k;
  float* logits = s_.moe_logits.f32();
  ops_->matmul(L.ffn_gate_inp, router_in ? router_in : h, n, logits);
  trace("ffn_moe_logits", il, logits, n, cfg_.n_expert);
  auto* ids = static_cast<int32_t*>(s_.moe_ids.data());
  float* weights = s_.moe_weights.f32();
  const MoeRouteParams route{cfg_.n_expert, k, cfg_.expert_weights_norm,
                             static_cast<const float*>(L.ffn_exp_scale.data)};
  ops_->moe_route(logits, n, route, ids, weights);
  if (moe_routes_) {  // a gate's hook may read and replace the routing (ModelLoadOptions)
    routes_logits_.resize(static_cast<size_t>(n * cfg_.n_expert));
    routes_ids_.resize(static_cast<size_t>(pairs));
    routes_weights_.resize(static_cast<size_t>(pairs));
    ops_->download(routes_logits_.data(), logits, routes_logits_.size() * sizeof(float));
    ops_->download(routes_ids_.data(), ids, routes_ids_.size() * sizeof(int32_t));
    ops_->download(routes_weights_.data(), weights, routes_weights_.size() * sizeof(float));
    moe_routes_(il, n, routes_logits_, routes_ids_, routes_weights_);
    for (int32_t e : routes_ids_)
      if (e < 0 || e >= cfg_.n_expert)
        fail(ErrorCode::invalid_argument, "moe_routes: expert {} of {}", e, cfg_.n_expert);
    ops_->upload(ids, routes_ids_.data(), routes_ids_.size() * sizeof(int32_t));
    ops_->upload(weights, routes_weights_.data(), routes_weights_.size() * sizeof(float));
  }
  float *gate = s_.moe_gate.f32(), *up = s_.moe_up.f32(), *y = s_.moe_y.f32();
  const bool stacked = L.ffn_gate_up_exps.data != nullptr;  // gemma4: gate rows, then up rows
  const ExpertMatrix w_gate{stacked ? &L.ffn_gate_up_exps : &L.ffn_gate_exps, 0, ff};
  const ExpertMatrix w_up{stacked ? &L.ffn_gate_up_exps : &L.ffn_up_exps, stacked ? ff : 0, ff};
  const ExpertMatrix gate_up[] = {w_gate, w_up};
  float* const gate_up_y[] = {gate, up};
  ops_->matmul_experts(gate_up, h, k, ids, pairs, gate_up_y);
  if (cfg_.activation == Activation::gelu_tanh)
    ops_->gelu_tanh_mul(gate, up, pairs, ff, gate);
  else
    ops_->silu_mul(gate, up, pairs, ff, gate);
  const ExpertMatrix down[] = {{&L.ffn_down_exps, 0, d}};
  float* const down_y[] = {y};
  ops_->matmul_experts(down, gate, 1, ids, pairs, down_y);
  ops_->moe_combine(y, weights, n, k, d, out);
  if (cfg_.n_ff_shexp > 0) shared_expert(il, h, n, out);
  trace(out_name, il, out, n, d);
}

// qwen35moe's shared expert: out[t] += sigmoid(gate_shexp . h[t]) * mlp_shexp(h[t]), after the
// routed experts' sum (transformers' order).
void DecoderModel::shared_expert(int il, const float* h, int64_t n, float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t d = cfg_.n_embd, ff = cfg_.n_ff_shexp;
  float *gate = s_.gate.f32(), *up = s_.up.f32(), *y = s_.moe_y.f32(), *g = s_.moe_logits.f32();
  const TensorView* w[] = {&L.ffn_gate_shexp, &L.ffn_up_shexp, &L.ffn_gate_inp_shexp};
  float* const ys[] = {gate, up, g};
  ops_->matmul_shared(w, h, n, ys);
  ops_->silu_mul(gate, up, n, ff, gate);
  ops_->matmul(L.ffn_down_shexp, gate, n, y);
  trace("ffn_shexp", il, y, n, d);
  ops_->sigmoid_scale_rows(y, g, n, d);
  ops_->add(out, y, n * d);
}

}  // namespace memra
