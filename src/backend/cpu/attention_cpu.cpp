// Paged causal attention for the CPU backend. Cache layout per layer:
// [block][slot][kv_head][head_dim] f32, so one token's keys for all kv heads are contiguous.
// Position p of a sequence lives in block block_table[p / block_size], slot p % block_size.
#include "backend/cpu/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "core/error.h"
#include "models/batch.h"

namespace memra::cpu {

namespace {

// Offset in floats of (position, kv head 0) of a sequence inside the layer's K or V storage.
int64_t slot_offset(const KvLayerView& kv, const BatchSeq& seq, int32_t pos) {
  const size_t index = static_cast<size_t>(pos / kv.block_size);
  if (index >= seq.block_table.size())
    fail(ErrorCode::invalid_argument, "block table of {} blocks does not cover position {}",
         seq.block_table.size(), pos);
  const int32_t block = seq.block_table[index];
  if (block < 0 || block >= kv.n_blocks)
    fail(ErrorCode::invalid_argument, "KV block id {} outside the cache's {} blocks", block,
         kv.n_blocks);
  const int64_t slot = int64_t{block} * kv.block_size + pos % kv.block_size;
  return slot * kv.n_kv_heads * kv.head_dim;
}

template <typename Acc>
void attend_one(const KvLayerView& kv, const BatchSeq& seq, int32_t pos, int kv_head,
                const float* q, const AttentionParams& params, std::vector<Acc>& scores,
                std::vector<Acc>& acc, float* out) {
  const int d = kv.head_dim;
  const int32_t first = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
  scores.resize(pos - first + 1);
  acc.assign(d, Acc{0});
  Acc max_score = -INFINITY;
  for (int32_t j = first; j <= pos; ++j) {
    const float* k = kv.k + slot_offset(kv, seq, j) + int64_t{kv_head} * d;
    Acc s;
    if constexpr (std::is_same_v<Acc, double>) {
      s = 0;
      for (int i = 0; i < d; ++i) s += double{q[i]} * k[i];
    } else {
      s = dot_f32(q, k, d);
    }
    s *= params.scale;
    if (params.softcap > 0) s = params.softcap * std::tanh(s / params.softcap);
    scores[j - first] = s;
    max_score = std::max(max_score, s);
  }
  Acc sum = 0;
  for (int32_t j = first; j <= pos; ++j) {
    const Acc w = std::exp(scores[j - first] - max_score);
    sum += w;
    const float* v = kv.v + slot_offset(kv, seq, j) + int64_t{kv_head} * d;
    for (int i = 0; i < d; ++i) acc[i] += w * v[i];
  }
  for (int i = 0; i < d; ++i) out[i] = static_cast<float>(acc[i] / sum);
}

}  // namespace

void kv_store(const KvLayerView& kv, std::span<const BatchSeq> seqs, const float* k,
              const float* v) {
  const int64_t row = int64_t{kv.n_kv_heads} * kv.head_dim;
  for (const BatchSeq& seq : seqs) {
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int64_t dst = slot_offset(kv, seq, seq.n_past + i);
      const int64_t src = (int64_t{seq.first_token} + i) * row;
      std::memcpy(kv.k + dst, k + src, row * sizeof(float));
      std::memcpy(kv.v + dst, v + src, row * sizeof(float));
    }
  }
}

void attention(ThreadPool& pool, const KvLayerView& kv, std::span<const BatchSeq> seqs,
               const float* q, const AttentionParams& params, bool reference, float* out) {
  if (params.n_heads % kv.n_kv_heads != 0)
    fail(ErrorCode::invalid_argument, "{} attention heads are not a multiple of {} kv heads",
         params.n_heads, kv.n_kv_heads);
  const int group = params.n_heads / kv.n_kv_heads;
  std::vector<int32_t> token_seq;  // batch token -> index into seqs
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (token_seq.size() != static_cast<size_t>(seqs[s].first_token))
      fail(ErrorCode::invalid_argument, "batch sequences are not contiguous in token order");
    token_seq.insert(token_seq.end(), seqs[s].n_tokens, static_cast<int32_t>(s));
  }
  const int64_t n_tokens = static_cast<int64_t>(token_seq.size());
  const int d = kv.head_dim;
  std::vector<std::vector<double>> scores_d(pool.n_threads()), acc_d(pool.n_threads());
  std::vector<std::vector<float>> scores_f(pool.n_threads()), acc_f(pool.n_threads());
  pool.parallel_for(n_tokens * params.n_heads, [&](int64_t task, int thread) {
    const int64_t t = task / params.n_heads;
    const int h = static_cast<int>(task % params.n_heads);
    const BatchSeq& seq = seqs[token_seq[t]];
    const int32_t pos = seq.n_past + static_cast<int32_t>(t - seq.first_token);
    const float* qh = q + (t * params.n_heads + h) * d;
    float* oh = out + (t * params.n_heads + h) * d;
    if (reference)
      attend_one(kv, seq, pos, h / group, qh, params, scores_d[thread], acc_d[thread], oh);
    else
      attend_one(kv, seq, pos, h / group, qh, params, scores_f[thread], acc_f[thread], oh);
  });
}

}  // namespace memra::cpu
