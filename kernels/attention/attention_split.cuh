// The split-KV attention kernel (private to attention.cu). A block serves one query token, one kv
// head and up to kMaxGroup of that kv head's query heads, so each K/V row it stages is read from
// memory once for the whole GQA group. Per split of kAttentionSplit absolute key positions it
// computes, in a fixed order that depends only on the query's own position and window:
//   scores  s_j = softcap((q . k_j) * scale)   lanes own keys; K tile staged in shared memory
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j   (lane-strided sums + fixed xor tree)
//   acc[d] = sum_j p_j v_j[d]                            threads own (head, dim); keys in order
// and then either writes (acc, m, l) to scratch (split plan) or merges it into a running state
// with merge_weights / merge_value (one_pass plan). The combine kernel merges the same way in the
// same split order, so both plans produce identical bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cstdint>

#include "kernels/kernels.h"

namespace memra::kernels::detail {

constexpr int kAttnThreads = 128;
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr int kMaxGroup = 8;  // query heads per block; larger GQA groups use several blocks
constexpr int kSplit = kAttentionSplit;

struct AttnParams {
  const void* k;
  const void* v;
  int32_t block_size;
  int32_t n_kv_heads;
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  int32_t max_blocks;
  const float* q;
  int64_t ldq;
  int n_heads;
  int group;     // query heads per kv head
  int n_chunks;  // blocks per kv head: ceil(group / kMaxGroup)
  float scale;
  float softcap;
  int32_t window;
  float* out;
  float* partials;  // split plan: [n_tokens][n_heads][n_splits][D + 2]
  int32_t n_splits;
  bool one_pass;
};

// The query's key range [lo, pos] and the splits it touches, [first, last].
struct KeyRange {
  int32_t pos, lo, first, last;
};
__device__ __forceinline__ KeyRange key_range(int32_t pos, int32_t window) {
  const int32_t lo = window > 0 ? max(0, pos - window + 1) : 0;
  return {pos, lo, lo / kSplit, pos / kSplit};
}

// Merging a partial (m, l, o[]) into the running state (M, L, O[]): both are rescaled to the
// larger max. merge_weights updates (M, L) and returns the two rescale factors, merge_value
// applies them to one output dim. Explicit rounding so the split kernel (which keeps M, L per
// head in shared memory) and the combine kernel (per thread) compile the same arithmetic.
__device__ __forceinline__ void merge_weights(float& M, float& L, float m, float l, float& a,
                                              float& b) {
  const float mx = fmaxf(M, m);
  a = expf(M - mx);
  b = expf(m - mx);
  L = __fadd_rn(__fmul_rn(L, a), __fmul_rn(l, b));
  M = mx;
}
__device__ __forceinline__ float merge_value(float O, float o, float a, float b) {
  return __fadd_rn(__fmul_rn(O, a), __fmul_rn(o, b));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Butterfly: every lane ends with the same bits (each step adds the same two values).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Keys per shared-memory tile: the tile is ~16 KiB of f32 for every head_dim.
constexpr int tile_keys(int d) {
  return d == 64 ? 64 : d == 128 ? 32 : 16;
}

// Stages keys [k0, k0 + nt) of one kv head into tile[j][0..D) (row stride D + 4 floats, which
// keeps the lanes' 16-byte reads of different rows on different banks), as f32. 16-byte loads.
template <int D, typename CT>
__device__ __forceinline__ void load_tile(const CT* cache, const int32_t* table,
                                          const AttnParams& p, int kv_head, int k0, int nt,
                                          float* tile) {
  constexpr int kVec = 16 / sizeof(CT);  // elements per 16-byte load
  constexpr int kChunks = D / kVec;
  for (int i = threadIdx.x; i < nt * kChunks; i += kAttnThreads) {
    const int j = i / kChunks, c = i % kChunks;
    const int key = k0 + j;
    const int64_t slot = int64_t{table[key / p.block_size]} * p.block_size + key % p.block_size;
    const int64_t off = (slot * p.n_kv_heads + kv_head) * D + c * kVec;
    const uint4 raw = *reinterpret_cast<const uint4*>(cache + off);
    float* dst = tile + j * (D + 4) + c * kVec;
    if constexpr (sizeof(CT) == 4) {
      *reinterpret_cast<float4*>(dst) = make_float4(__uint_as_float(raw.x), __uint_as_float(raw.y),
                                                    __uint_as_float(raw.z), __uint_as_float(raw.w));
    } else if constexpr (std::is_same_v<CT, __half>) {  // f16 pairs, converted exactly
      const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&w[2 * h]));
        const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&w[2 * h + 1]));
        *reinterpret_cast<float4*>(dst + 4 * h) = make_float4(a.x, a.y, b.x, b.y);
      }
    } else {  // bf16 pairs: the low half of each word is the even element
      const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t a = w[2 * h], b = w[2 * h + 1];
        *reinterpret_cast<float4*>(dst + 4 * h) =
            make_float4(__uint_as_float(a << 16), __uint_as_float(a & 0xffff0000u),
                        __uint_as_float(b << 16), __uint_as_float(b & 0xffff0000u));
      }
    }
  }
}

// q . k over D dims: four interleaved accumulators, combined in a fixed order.
template <int D>
__device__ __forceinline__ float dot(const float* q, const float* k) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll 8
  for (int d = 0; d < D; d += 4) {
    const float4 x = *reinterpret_cast<const float4*>(q + d);
    const float4 y = *reinterpret_cast<const float4*>(k + d);
    a0 = fmaf(x.x, y.x, a0);
    a1 = fmaf(x.y, y.y, a1);
    a2 = fmaf(x.z, y.z, a2);
    a3 = fmaf(x.w, y.w, a3);
  }
  return __fadd_rn(__fadd_rn(a0, a1), __fadd_rn(a2, a3));
}

// Dims of V a thread owns in the weighted-V phase (contiguous): 1 up to head_dim 128, then 2.
// With 128 threads a row of D dims takes D / DV threads; the rest of the block takes the next
// heads, so a thread owns heads hb, hb + HS, ... (KH of them): 4 heads at D 64, else 8.
constexpr int v_dims(int d) {
  return d > kAttnThreads ? d / kAttnThreads : 1;
}

// acc[k][e] += p[head k][key j + i] * v[key j + i][dv0 + e] for i < N, keys in increasing order.
// The probabilities of N consecutive keys of one head come in one read (sc is [head][kSplit]).
template <int D, int KH, int DV, int N>
__device__ __forceinline__ void accumulate(const float* p_tile, const float* tile, int j, int hb,
                                           int n_h, int dv0, float (&acc)[KH][DV]) {
  constexpr int LD = D + 4, HS = kMaxGroup / KH;
  float v[N][DV];
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < DV; ++e) v[i][e] = tile[(j + i) * LD + dv0 + e];
#pragma unroll
  for (int k = 0; k < KH; ++k) {
    const int hh = hb + k * HS;
    if (hh >= n_h) continue;  // uniform per warp
    float pr[N];
    if constexpr (N == 4) {
      const float4 p4 = *reinterpret_cast<const float4*>(p_tile + hh * kSplit + j);
      pr[0] = p4.x, pr[1] = p4.y, pr[2] = p4.z, pr[3] = p4.w;
    } else {
      pr[0] = p_tile[hh * kSplit + j];
    }
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
      for (int e = 0; e < DV; ++e) acc[k][e] = fmaf(pr[i], v[i][e], acc[k][e]);
  }
}

// grid: x = token, y = split (split plan) or 1 (one_pass), z = kv head * n_chunks + chunk.
template <int D, typename CT>
__global__ void __launch_bounds__(kAttnThreads, 4) attention_kernel(const AttnParams p) {
  constexpr int T = tile_keys(D);
  constexpr int LD = D + 4;
  constexpr int DV = v_dims(D), HS = kAttnThreads / (D / DV), KH = kMaxGroup / HS;
  __shared__ __align__(16) float qs[kMaxGroup * D];
  __shared__ __align__(16) float tile[T * LD];
  __shared__ __align__(
      16) float sc[kMaxGroup * kSplit];  // scores, then exp(s - m), of the current split
  __shared__ float split_m[kMaxGroup], split_l[kMaxGroup];  // this split's statistics
  __shared__ float run_m[kMaxGroup], run_l[kMaxGroup];      // one_pass running state
  __shared__ float w_old[kMaxGroup], w_new[kMaxGroup];      // one_pass rescale factors

  const int t = blockIdx.x;
  const int kv_head = blockIdx.z / p.n_chunks;
  const int chunk = blockIdx.z % p.n_chunks;
  const int h0 = kv_head * p.group + chunk * kMaxGroup;  // first query head of this block
  const int n_h = min(kMaxGroup, p.group - chunk * kMaxGroup);
  const KeyRange range = key_range(p.positions[t], p.window);
  int s_begin = range.first, s_end = range.last + 1;
  if (!p.one_pass) {
    s_begin = blockIdx.y;
    s_end = s_begin + 1;
    if (s_begin < range.first || s_begin > range.last) return;  // no key of this query here
  }
  const int32_t* table = p.block_tables + int64_t{p.token_seq[t]} * p.max_blocks;
  const CT* k_cache = static_cast<const CT*>(p.k);
  const CT* v_cache = static_cast<const CT*>(p.v);
  const float* q_row = p.q + int64_t{t} * p.ldq + int64_t{h0} * D;
  for (int i = threadIdx.x; i < n_h * D; i += kAttnThreads) qs[i] = q_row[i];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // V-phase ownership: thread owns DV contiguous dims (dv0..) of heads hb, hb + HS, ...
  const int dv0 = (threadIdx.x % (D / DV)) * DV, hb = threadIdx.x / (D / DV);
  float O[KH][DV];  // one_pass running weighted sums of the owned outputs
  for (int split = s_begin; split < s_end; ++split) {
    const int kb = max(split * kSplit, range.lo);
    const int ke = min((split + 1) * kSplit, range.pos + 1);
    for (int k0 = kb; k0 < ke; k0 += T) {  // scores
      const int nt = min(T, ke - k0);
      load_tile<D>(k_cache, table, p, kv_head, k0, nt, tile);
      __syncthreads();
      for (int pr = threadIdx.x; pr < n_h * T; pr += kAttnThreads) {
        const int hh = pr / T, j = pr % T;
        if (j >= nt) continue;
        float s = dot<D>(qs + hh * D, tile + j * LD) * p.scale;
        if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
        sc[hh * kSplit + (k0 - kb) + j] = s;
      }
      __syncthreads();
    }
    const int n = ke - kb;
    for (int hh = warp; hh < n_h; hh += kAttnWarps) {  // softmax statistics, one warp per head
      float* s_row = sc + hh * kSplit;
      float m = -INFINITY;
      for (int j = lane; j < n; j += 32) m = fmaxf(m, s_row[j]);
      m = warp_max(m);
      float l = 0.0f;
      for (int j = lane; j < n; j += 32) {
        const float e = expf(s_row[j] - m);
        s_row[j] = e;
        l += e;
      }
      l = warp_sum(l);
      if (lane == 0) split_m[hh] = m, split_l[hh] = l;
    }
    float acc[KH][DV];
#pragma unroll
    for (int k = 0; k < KH; ++k)
#pragma unroll
      for (int e = 0; e < DV; ++e) acc[k][e] = 0.0f;
    for (int k0 = kb; k0 < ke; k0 += T) {  // weighted V; the first barrier also publishes sc
      const int nt = min(T, ke - k0);
      load_tile<D>(v_cache, table, p, kv_head, k0, nt, tile);
      __syncthreads();
      const float* p_tile = sc + (k0 - kb);  // 16-byte aligned: k0 - kb is a multiple of T
      int j = 0;
      for (; j + 4 <= nt; j += 4) accumulate<D, KH, DV, 4>(p_tile, tile, j, hb, n_h, dv0, acc);
      for (; j < nt; ++j) accumulate<D, KH, DV, 1>(p_tile, tile, j, hb, n_h, dv0, acc);
      __syncthreads();
    }
    if (p.one_pass && threadIdx.x < n_h) {  // one thread per head updates (M, L)
      const int hh = threadIdx.x;
      if (split == s_begin) {
        run_m[hh] = split_m[hh], run_l[hh] = split_l[hh];
      } else {
        merge_weights(run_m[hh], run_l[hh], split_m[hh], split_l[hh], w_old[hh], w_new[hh]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < KH; ++k) {
      const int hh = hb + k * HS;
      if (hh >= n_h) continue;
      if (!p.one_pass) {
        float* part =
            p.partials + ((int64_t{t} * p.n_heads + h0 + hh) * p.n_splits + split) * (D + 2);
#pragma unroll
        for (int e = 0; e < DV; ++e) part[dv0 + e] = acc[k][e];
        if (dv0 == 0) part[D] = split_m[hh], part[D + 1] = split_l[hh];
      } else {
#pragma unroll
        for (int e = 0; e < DV; ++e) {
          O[k][e] =
              split == s_begin ? acc[k][e] : merge_value(O[k][e], acc[k][e], w_old[hh], w_new[hh]);
        }
      }
    }
    __syncthreads();  // split_m / split_l / sc / w_* are rewritten by the next split
  }
  if (!p.one_pass) return;
#pragma unroll
  for (int k = 0; k < KH; ++k) {
    const int hh = hb + k * HS;
    if (hh >= n_h) continue;
    float* o = p.out + (int64_t{t} * p.n_heads + h0 + hh) * D + dv0;
#pragma unroll
    for (int e = 0; e < DV; ++e) o[e] = __fdiv_rn(O[k][e], run_l[hh]);
  }
}

}  // namespace memra::kernels::detail
