// Paged causal attention for the CPU backend. Cache layout per layer:
// [block][slot][kv_head][head_dim] f32 (or F8_E4M3 bytes, core/fp8.h: the CUDA backend's FP8
// cache, whose oracle this is), so one token's keys for all kv heads are contiguous.
// Position p of a sequence lives in block block_table[p / block_size], slot p % block_size; the
// block tables and slots come from the step's StepLayout.
#include "backend/cpu/attention_cpu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/block_simd.h"
#include "backend/cpu/quant_dot.h"
#include "core/error.h"
#include "core/fp8.h"

namespace memra::cpu {

namespace {

// One sequence's row of the step's block tables.
struct SeqBlocks {
  const int32_t* ids;
  int32_t n;
};

SeqBlocks seq_blocks(const StepLayout& step, int32_t seq) {
  return {step.block_tables.data() + int64_t{seq} * step.max_blocks, step.max_blocks};
}

// Offset in elements of (position, kv head 0) of a sequence inside the layer's K or V storage.
int64_t slot_offset(const KvLayerView& kv, SeqBlocks blocks, int32_t pos) {
  const int32_t index = pos / kv.block_size;
  const int32_t block = index < blocks.n ? blocks.ids[index] : -1;
  if (block < 0 || block >= kv.n_blocks)
    fail(ErrorCode::invalid_argument, "KV block {} of position {} is outside the cache's {} blocks",
         block, pos, kv.n_blocks);
  const int64_t slot = int64_t{block} * kv.block_size + pos % kv.block_size;
  return slot * kv.n_kv_heads * kv.head_dim;
}

void check_dtype(const KvLayerView& kv) {
  if (kv.dtype != DType::f32 && kv.dtype != DType::f8_e4m3)
    fail(ErrorCode::unsupported, "the CPU backend's KV cache is F32 or F8_E4M3, not {}",
         dtype_name(kv.dtype));
}

// The 256 E4M3 values as f32 (every one exact), built once: a row's decode is a lookup an
// element, not e4m3_to_f32's branches and ldexp, since each query head decodes its rows again.
const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

// d elements of a K or V row at element offset `at`: the f32 storage itself, or an F8_E4M3 row
// decoded into buf (exactly: every E4M3 value is an f32), so both types share the arithmetic.
const float* kv_row(const KvLayerView& kv, const void* base, int64_t at, int d, float* buf) {
  if (kv.dtype == DType::f32) return static_cast<const float*>(base) + at;
  const uint8_t* bytes = static_cast<const uint8_t*>(base) + at;
  const std::array<float, 256>& values = e4m3_values();
  for (int i = 0; i < d; ++i) buf[i] = values[bytes[i]];
  return buf;
}

// Per-thread scratch of attend_heads.
template <typename Acc>
struct HeadsScratch {
  std::vector<Acc> scores, acc, max_score, sum;
  std::vector<float> row;
  std::vector<const float*> v_rows;  // weigh_values_f32's
};

// Head h's softmax numerators w_j = exp(s_j - max) in place of its scores, and their sum in key
// order: one expression for both weighted sums below, so they weigh alike.
template <typename Acc>
Acc exp_scores(HeadsScratch<Acc>& x, int h, int64_t n_keys) {
  Acc* w = x.scores.data() + h * n_keys;
  Acc sum = 0;
  for (int64_t j = 0; j < n_keys; ++j) {
    w[j] = std::exp(w[j] - x.max_score[h]);
    sum += w[j];
  }
  return sum;
}

#ifdef MEMRA_AVX2
// The fast path's weighted sum over an F32 cache (attend_heads after the scores): each head's
// weights w_j = exp(s_j - max) and their sum in key order, then each output element's running
// sum acc = fma(w_j, v_j[i], acc) in key order, as attend_heads' loop for other caches computes it
// element by element. Here a run of 32 elements stays in registers over all the keys instead of
// being loaded and stored once a key: the same operations in the same order, so the same bits.
void weigh_values_f32(const KvLayerView& kv, SeqBlocks seq, int32_t first, int32_t pos, int kv_head,
                      int n_h, HeadsScratch<float>& x, float* out) {
  const int d = kv.head_dim;
  const int64_t n_keys = pos - first + 1;
  x.v_rows.resize(n_keys);
  for (int32_t j = first; j <= pos; ++j)  // an F32 cache's rows are the storage itself
    x.v_rows[j - first] =
        kv_row(kv, kv.v, slot_offset(kv, seq, j) + int64_t{kv_head} * d, d, x.row.data());
  for (int h = 0; h < n_h; ++h) {
    const float* w = x.scores.data() + h * n_keys;
    const float sum = exp_scores(x, h, n_keys);
    float* o = out + int64_t{h} * d;
    int i = 0;
    for (; i + 32 <= d; i += 32) {
      __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
      for (int64_t j = 0; j < n_keys; ++j) {
        const __m256 wj = _mm256_set1_ps(w[j]);
        const float* v = x.v_rows[j] + i;
        for (int r = 0; r < 4; ++r) a[r] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 8 * r), a[r]);
      }
      const __m256 s = _mm256_set1_ps(sum);
      for (int r = 0; r < 4; ++r) _mm256_storeu_ps(o + i + 8 * r, _mm256_div_ps(a[r], s));
    }
    for (; i < d; ++i) {
      float a = 0;
      for (int64_t j = 0; j < n_keys; ++j) a = std::fma(w[j], x.v_rows[j][i], a);
      o[i] = a / sum;
    }
  }
}
#endif

// Query heads q_heads[0 .. n_h) of one token, all over kv head `kv_head` (one head, or a GQA
// group), each written to out + h * d. Each head's scores, softmax and weighted sum are the same
// expressions in the same order whatever n_h is: a group only locates each key's and value's row
// once for all its heads (and reads it from L1 for the rest), so a head's bits do not depend on
// how the step's tasks were split.
template <typename Acc>
void attend_heads(const KvLayerView& kv, SeqBlocks seq, int32_t pos, int kv_head,
                  const float* q_heads, int n_h, const AttentionParams& params,
                  HeadsScratch<Acc>& x, float* out) {
  const int d = kv.head_dim;
  x.row.resize(d);
  const int32_t first = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
  const int64_t n_keys = pos - first + 1;
  x.scores.resize(n_h * n_keys);
  x.max_score.assign(n_h, -INFINITY);
  for (int32_t j = first; j <= pos; ++j) {
    const float* k =
        kv_row(kv, kv.k, slot_offset(kv, seq, j) + int64_t{kv_head} * d, d, x.row.data());
    for (int h = 0; h < n_h; ++h) {
      const float* q = q_heads + int64_t{h} * d;
      Acc s;
      if constexpr (std::is_same_v<Acc, double>) {
        s = 0;
        for (int i = 0; i < d; ++i) s += double{q[i]} * k[i];
      } else {
        s = dot_f32(q, k, d);
      }
      s *= params.scale;
      if (params.softcap > 0) s = params.softcap * std::tanh(s / params.softcap);
      x.scores[h * n_keys + (j - first)] = s;
      x.max_score[h] = std::max(x.max_score[h], s);
    }
  }
#ifdef MEMRA_AVX2
  if constexpr (std::is_same_v<Acc, float>) {
    if (kv.dtype == DType::f32) return weigh_values_f32(kv, seq, first, pos, kv_head, n_h, x, out);
  }
#endif
  x.acc.assign(int64_t{n_h} * d, Acc{0});
  x.sum.resize(n_h);
  for (int h = 0; h < n_h; ++h) x.sum[h] = exp_scores(x, h, n_keys);
  for (int32_t j = first; j <= pos; ++j) {
    const float* v =
        kv_row(kv, kv.v, slot_offset(kv, seq, j) + int64_t{kv_head} * d, d, x.row.data());
    for (int h = 0; h < n_h; ++h) {
      const Acc w = x.scores[h * n_keys + (j - first)];
      Acc* acc = x.acc.data() + int64_t{h} * d;
#ifdef MEMRA_AVX2
      // One fused multiply-add an element, spelled out rather than left to the compiler's
      // contraction: an F8_E4M3 cache's float sums are then weigh_values_f32's bits over the
      // decoded values whatever the build's contraction flags.
      if constexpr (std::is_same_v<Acc, float>) {
        for (int i = 0; i < d; ++i) acc[i] = std::fma(w, v[i], acc[i]);
        continue;
      }
#endif
      for (int i = 0; i < d; ++i) acc[i] += w * v[i];
    }
  }
  for (int h = 0; h < n_h; ++h)
    for (int i = 0; i < d; ++i)
      out[int64_t{h} * d + i] = static_cast<float>(x.acc[int64_t{h} * d + i] / x.sum[h]);
}

}  // namespace

void kv_store(const KvLayerView& kv, const StepLayout& step, const float* k, const float* v) {
  check_dtype(kv);
  const int64_t row = int64_t{kv.n_kv_heads} * kv.head_dim;
  const int64_t n_slots = int64_t{kv.n_blocks} * kv.block_size;
  for (int32_t t = 0; t < step.n_tokens(); ++t) {
    const int32_t slot = step.slots[t];
    if (slot < 0 || slot >= n_slots)
      fail(ErrorCode::invalid_argument, "KV slot {} outside the cache's {} slots", slot, n_slots);
    if (kv.dtype == DType::f32) {
      std::memcpy(static_cast<float*>(kv.k) + slot * row, k + t * row, row * sizeof(float));
      std::memcpy(static_cast<float*>(kv.v) + slot * row, v + t * row, row * sizeof(float));
      continue;
    }
    uint8_t* kb = static_cast<uint8_t*>(kv.k) + slot * row;
    uint8_t* vb = static_cast<uint8_t*>(kv.v) + slot * row;
    for (int64_t i = 0; i < row; ++i) {
      kb[i] = f32_to_e4m3(k[t * row + i]);
      vb[i] = f32_to_e4m3(v[t * row + i]);
    }
  }
}

void attention(ThreadPool& pool, const KvLayerView& kv, const StepLayout& step, const float* q,
               const AttentionParams& params, bool reference, float* out) {
  check_dtype(kv);
  if (params.n_heads % kv.n_kv_heads != 0)
    fail(ErrorCode::invalid_argument, "{} attention heads are not a multiple of {} kv heads",
         params.n_heads, kv.n_kv_heads);
  const int group = params.n_heads / kv.n_kv_heads;
  const int64_t n_tokens = step.n_tokens();
  const int d = kv.head_dim;
  // A task per (token, kv head) with its group of query heads where that gives every thread
  // several tasks (prompt steps), else a task per (token, head): the same bits either way.
  const int per_task = n_tokens * kv.n_kv_heads >= int64_t{4} * pool.n_threads() ? group : 1;
  const int tasks_per_token = params.n_heads / per_task;
  std::vector<HeadsScratch<double>> scratch_d(pool.n_threads());
  std::vector<HeadsScratch<float>> scratch_f(pool.n_threads());
  pool.parallel_for(n_tokens * tasks_per_token, [&](int64_t task, int thread) {
    const int64_t t = task / tasks_per_token;
    const int h = static_cast<int>(task % tasks_per_token) * per_task;
    const SeqBlocks seq = seq_blocks(step, step.token_seq[t]);
    const int32_t pos = step.positions[t];
    const float* qh = q + (t * params.n_heads + h) * d;
    float* oh = out + (t * params.n_heads + h) * d;
    if (reference)
      attend_heads(kv, seq, pos, h / group, qh, per_task, params, scratch_d[thread], oh);
    else
      attend_heads(kv, seq, pos, h / group, qh, per_task, params, scratch_f[thread], oh);
  });
}

}  // namespace memra::cpu
