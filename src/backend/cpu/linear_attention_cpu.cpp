// The linear-attention ops on the CPU, following transformers' Qwen3_5GatedDeltaNet (the
// recurrent form, torch_recurrent_gated_delta_rule): f32 state, sums in double. Work is split by
// (sequence, channel block) for the conv and (sequence, v head) for the recurrence; each task
// walks its sequence's tokens in order.
#include "backend/cpu/linear_attention_cpu.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace memra::cpu {

namespace {

// Token ranges of the step's sequences: [begin[s], begin[s + 1]) (tokens are grouped by sequence).
std::vector<int64_t> seq_begins(const StepLayout& step) {
  const int64_t n_seqs = static_cast<int64_t>(step.state_slots.size());
  std::vector<int64_t> begin(static_cast<size_t>(n_seqs) + 1, step.n_tokens());
  for (int64_t t = step.n_tokens() - 1; t >= 0; --t) begin[step.token_seq[t]] = t;
  for (int64_t s = n_seqs - 1; s >= 0; --s) begin[s] = std::min(begin[s], begin[s + 1]);
  return begin;
}

int32_t checked_slot(const StepLayout& step, const StateLayerView& state, int64_t s) {
  const int32_t slot = step.state_slots[static_cast<size_t>(s)];
  if (slot < 0 || slot >= state.n_slots)
    fail(ErrorCode::invalid_argument,
         "batch sequence {} has state slot {}, outside the cache's {} state slots", s, slot,
         state.n_slots);
  return slot;
}

double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));  // torch's threshold
}

}  // namespace

void ssm_conv(ThreadPool& pool, const StepLayout& step, const StateLayerView& state, const float* x,
              int64_t dim, int kernel, const float* w, float* y) {
  if (state.conv_floats != int64_t{kernel - 1} * dim)
    fail(ErrorCode::internal, "ssm_conv: state of {} floats for kernel {} x {} channels",
         state.conv_floats, kernel, dim);
  const std::vector<int64_t> begin = seq_begins(step);
  const int64_t n_seqs = static_cast<int64_t>(begin.size()) - 1;
  for (int64_t s = 0; s < n_seqs; ++s) checked_slot(step, state, s);
  constexpr int64_t kBlock = 64;
  const int64_t n_blocks = (dim + kBlock - 1) / kBlock;
  const int h = kernel - 1;  // inputs kept in the state
  pool.parallel_for(n_seqs * n_blocks, [&](int64_t task, int) {
    const int64_t s = task / n_blocks, c0 = (task % n_blocks) * kBlock;
    const int64_t c1 = std::min(dim, c0 + kBlock);
    float* st = state.conv + int64_t{step.state_slots[s]} * state.conv_floats;  // [h][dim]
    for (int64_t t = begin[s]; t < begin[s + 1]; ++t) {
      if (step.positions[t] == 0)
        for (int j = 0; j < h; ++j) std::fill(st + j * dim + c0, st + j * dim + c1, 0.0f);
      const float* xt = x + t * dim;
      float* yt = y + t * dim;
      for (int64_t c = c0; c < c1; ++c) {
        const float* wc = w + c * kernel;
        double acc = double{wc[h]} * xt[c];
        for (int j = 0; j < h; ++j) acc += double{wc[j]} * st[j * dim + c];
        const double out = acc / (1.0 + std::exp(-acc));
        for (int j = 0; j + 1 < h; ++j) st[j * dim + c] = st[(j + 1) * dim + c];
        if (h > 0) st[(h - 1) * dim + c] = xt[c];
        yt[c] = static_cast<float>(out);
      }
    }
  });
}

void gated_delta_rule(ThreadPool& pool, const StepLayout& step, const StateLayerView& state,
                      const float* qkv, const float* a, const float* b, const float* A,
                      const float* dt_bias, const DeltaNetParams& p, float* out) {
  const int64_t dk = p.k_dim, dv = p.v_dim, nk = p.n_k_heads, nv = p.n_v_heads;
  if (state.ssm_floats != nv * dk * dv || nk <= 0 || nv % nk != 0)
    fail(ErrorCode::internal, "gated_delta_rule: state of {} floats for {} v heads of {} x {}",
         state.ssm_floats, nv, dk, dv);
  const int64_t row = 2 * nk * dk + nv * dv;  // qkv row: q heads, k heads, v heads
  const std::vector<int64_t> begin = seq_begins(step);
  const int64_t n_seqs = static_cast<int64_t>(begin.size()) - 1;
  for (int64_t s = 0; s < n_seqs; ++s) checked_slot(step, state, s);
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(dk));
  pool.parallel_for(n_seqs * nv, [&](int64_t task, int) {
    const int64_t s = task / nv, hv = task % nv, hk = hv % nk;
    float* S = state.ssm + int64_t{step.state_slots[s]} * state.ssm_floats + hv * dk * dv;
    std::vector<double> q(dk), k(dk), kv_mem(dv), acc(dv);
    for (int64_t t = begin[s]; t < begin[s + 1]; ++t) {
      if (step.positions[t] == 0) std::fill(S, S + dk * dv, 0.0f);
      const float* qt = qkv + t * row + hk * dk;
      const float* kt = qkv + t * row + nk * dk + hk * dk;
      const float* vt = qkv + t * row + 2 * nk * dk + hv * dv;
      double qq = 0, kk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        qq += double{qt[i]} * qt[i];
        kk += double{kt[i]} * kt[i];
      }
      const double q_inv = q_scale / std::sqrt(qq + 1e-6), k_inv = 1.0 / std::sqrt(kk + 1e-6);
      for (int64_t i = 0; i < dk; ++i) {
        q[i] = qt[i] * q_inv;
        k[i] = kt[i] * k_inv;
      }
      const double decay = std::exp(double{A[hv]} * softplus(double{a[t * nv + hv]} + dt_bias[hv]));
      const double beta = 1.0 / (1.0 + std::exp(-double{b[t * nv + hv]}));
      // S = decay S, then kv_mem = S^T k.
      std::fill(kv_mem.begin(), kv_mem.end(), 0.0);
      for (int64_t i = 0; i < dk; ++i) {
        float* Si = S + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
          Si[j] = static_cast<float>(Si[j] * decay);
          kv_mem[j] += double{Si[j]} * k[i];
        }
      }
      for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (vt[j] - kv_mem[j]) * beta;  // the delta
      // S += k delta^T, then out = S^T q.
      float* ot = out + t * nv * dv + hv * dv;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < dk; ++i) {
        float* Si = S + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
          Si[j] = static_cast<float>(Si[j] + k[i] * kv_mem[j]);
          acc[j] += double{Si[j]} * q[i];
        }
      }
      for (int64_t j = 0; j < dv; ++j) ot[j] = static_cast<float>(acc[j]);
    }
  });
}

void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                    float eps, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double{xr[i]} * xr[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double g = zr[i] / (1.0 + std::exp(-double{zr[i]}));
      yr[i] = static_cast<float>(static_cast<float>(xr[i] * inv) * w[i] * g);
    }
  }
}

}  // namespace memra::cpu
