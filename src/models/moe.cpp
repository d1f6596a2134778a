// The mixture-of-experts block over the existing ops: the router is a matmul, the top-k softmax
// routing runs on the host over the downloaded router logits, and each chosen expert runs as
// ordinary matmuls over the gathered rows of the tokens that picked it (qwen3moe, qwen35moe, and
// gemma4's block beside its MLP). Per token the arithmetic is fixed by its own routing (rows are
// independent in matmul; its experts are summed in increasing index), which keeps the batch
// invariance of DESIGN.md's determinism contract.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/decoder.h"

namespace memra {

namespace {

// Expert e's [n_in, n_out] matrix of a stacked [n_in, n_out, n_expert] tensor (a view).
TensorView expert_slice(const TensorView& stacked, int e) {
  TensorView v = stacked;
  v.n_dims = 2;
  v.ne[2] = 1;
  v.n_bytes = stacked.n_bytes / stacked.ne[2];
  v.data = static_cast<const uint8_t*>(stacked.data) + static_cast<uint64_t>(e) * v.n_bytes;
  return v;
}

// Rows [first, first + count) of a 2-D [n_in, n_out] view: one expert's gate or up half of a
// stacked gate_up matrix (rows are whole quant blocks, so any dtype splits this way).
TensorView row_range(const TensorView& m, uint64_t first, uint64_t count) {
  TensorView v = m;
  const uint64_t row_bytes = m.n_bytes / m.ne[1];
  v.ne[1] = count;
  v.n_bytes = count * row_bytes;
  v.data = static_cast<const uint8_t*>(m.data) + first * row_bytes;
  return v;
}

// Softmax over each row's router logits (in double), the k largest probabilities (ties: lower
// expert index), renormalized over the k when configured (transformers' Qwen3MoeTopKRouter),
// then times scale[e] where scale is given (Gemma4TextRouter's per_expert_scale).
// Fills rows[e] / weights[e] per expert e with the tokens that chose it, in increasing order.
void route_rows(const std::vector<float>& logits, int64_t n, int n_expert, int k, bool normalize,
                const std::vector<float>& scale, std::vector<std::vector<int32_t>>& rows,
                std::vector<std::vector<float>>& weights) {
  rows.resize(n_expert);
  weights.resize(n_expert);
  for (int e = 0; e < n_expert; ++e) {
    rows[e].clear();
    weights[e].clear();
  }
  std::vector<double> p(n_expert);
  std::vector<int> order(n_expert);
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.data() + t * n_expert;
    const double max = *std::max_element(l, l + n_expert);
    double sum = 0;
    for (int e = 0; e < n_expert; ++e) sum += p[e] = std::exp(double{l[e]} - max);
    // A NaN probability (from NaN activations) ranks last, keeping the comparison a strict
    // weak order; the token's output is NaN either way.
    for (int e = 0; e < n_expert; ++e) p[e] = std::isnan(p[e] / sum) ? -1.0 : p[e] / sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double top_sum = 0;
    for (int j = 0; j < k; ++j) top_sum += p[order[j]];
    for (int j = 0; j < k; ++j) {
      const int e = order[j];
      rows[e].push_back(static_cast<int32_t>(t));
      const double w = normalize ? p[e] / top_sum : p[e];
      weights[e].push_back(static_cast<float>(scale.empty() ? w : w * scale[e]));
    }
  }
}

}  // namespace

void DecoderModel::moe_block(int il, const float* h, int64_t n, float* out, const float* router_in,
                             const char* out_name) {
  const LayerWeights& L = w_.layers[il];
  const int n_expert = cfg_.n_expert;
  const int64_t d = cfg_.n_embd, ff = cfg_.n_ff_exp;
  float* logits = s_.moe_logits.f32();
  ops_->matmul(L.ffn_gate_inp, router_in ? router_in : h, n, logits);
  trace("ffn_moe_logits", il, logits, n, n_expert);
  moe_.logits.resize(static_cast<size_t>(n * n_expert));
  ops_->download(moe_.logits.data(), logits, moe_.logits.size() * sizeof(float));
  route_rows(moe_.logits, n, n_expert, cfg_.n_expert_used, cfg_.expert_weights_norm, L.expert_scale,
             moe_.rows, moe_.weights);
  moe_.written.assign(static_cast<size_t>(n), 0);
  float *xg = s_.moe_x.f32(), *gate = s_.moe_gate.f32(), *up = s_.moe_up.f32(), *y = s_.moe_y.f32();
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (int e = 0; e < n_expert; ++e) {
    const std::vector<int32_t>& rows = moe_.rows[e];
    const int64_t m = static_cast<int64_t>(rows.size());
    if (m == 0) continue;
    for (int64_t i = 0; i < m; ++i) ops_->copy(xg + i * d, h + rows[i] * d, row_bytes);
    TensorView w_gate, w_up;
    if (L.ffn_gate_up_exps.data) {  // gemma4: one [n_embd, 2 ff] matrix per expert, gate first
      const TensorView gate_up = expert_slice(L.ffn_gate_up_exps, e);
      w_gate = row_range(gate_up, 0, ff);
      w_up = row_range(gate_up, ff, ff);
    } else {
      w_gate = expert_slice(L.ffn_gate_exps, e);
      w_up = expert_slice(L.ffn_up_exps, e);
    }
    const TensorView w_down = expert_slice(L.ffn_down_exps, e);
    const TensorView* gate_up_w[] = {&w_gate, &w_up};
    float* const gate_up_y[] = {gate, up};
    ops_->matmul_shared(gate_up_w, xg, m, gate_up_y);
    if (cfg_.activation == Activation::gelu_tanh)
      ops_->gelu_tanh_mul(gate, up, m * ff, gate);
    else
      ops_->silu_mul(gate, up, m * ff, gate);
    ops_->matmul(w_down, gate, m, y);
    for (int64_t i = 0; i < m; ++i) {
      float* yi = y + i * d;
      float* dst = out + rows[i] * d;
      ops_->scale(yi, moe_.weights[e][i], d);
      // The first expert's term is copied (0 + a = a exactly), later ones added in order.
      if (moe_.written[rows[i]])
        ops_->add(dst, yi, d);
      else
        ops_->copy(dst, yi, row_bytes);
      moe_.written[rows[i]] = 1;
    }
  }
  if (cfg_.n_ff_shexp > 0) shared_expert(il, h, n, out);
  trace(out_name, il, out, n, d);
}

// qwen35moe's shared expert: out[t] += sigmoid(gate_shexp . h[t]) * mlp_shexp(h[t]), after the
// routed experts' sum (transformers' order). The gate is read on the host like the routing.
void DecoderModel::shared_expert(int il, const float* h, int64_t n, float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t d = cfg_.n_embd, ff = cfg_.n_ff_shexp;
  float *gate = s_.gate.f32(), *up = s_.up.f32(), *y = s_.moe_y.f32(), *g = s_.moe_logits.f32();
  const TensorView* w[] = {&L.ffn_gate_shexp, &L.ffn_up_shexp, &L.ffn_gate_inp_shexp};
  float* const ys[] = {gate, up, g};
  ops_->matmul_shared(w, h, n, ys);
  ops_->silu_mul(gate, up, n * ff, gate);
  ops_->matmul(L.ffn_down_shexp, gate, n, y);
  trace("ffn_shexp", il, y, n, d);
  moe_.logits.resize(static_cast<size_t>(n));
  ops_->download(moe_.logits.data(), g, moe_.logits.size() * sizeof(float));
  for (int64_t t = 0; t < n; ++t) {
    const double s = 1.0 / (1.0 + std::exp(-double{moe_.logits[t]}));
    ops_->scale(y + t * d, static_cast<float>(s), d);
  }
  ops_->add(out, y, n * d);
}

}  // namespace memra
