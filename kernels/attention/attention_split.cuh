// The split-KV attention kernel (private to attention.cu). A block serves one kv head, up to
// kMaxGroup of its query heads (fewer for small decode grids) and a tile of query tokens (one token
// for decode; several tokens of one sequence for prefill, so each K/V row staged in shared memory
// serves all of them). A (query token, query head) pair is a "row". Per split of kAttentionSplit
// absolute key positions every row computes, in an order that depends only on its own position and
// window:
//   scores  s_j = softcap((q . k_j) * scale)   q . k: four interleaved fma chains over the dims
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j   (lane-strided sums + fixed xor tree)
//   acc[d] = sum_j p_j v_j[d]                            one fma chain per dim, keys in order
// and then either writes (acc, m, l) to scratch (split plan) or merges it into a running state
// with merge_weights / merge_value (one_pass plan). The combine kernel merges the same way in the
// same split order, so both plans, and both block shapes, produce identical bits.
//
// K and V arrive in chunks of C::kChunk keys (aligned to absolute positions) through a ring of
// `stages` shared-memory buffers filled with 16-byte cp.async copies in the cache dtype, several
// chunks in flight; the sequence of chunks is K of split s, V of split s, K of split s + 1, ...
// Which thread computes what (and how many chunks are in flight) never changes a row's
// arithmetic: only the register tiling and the memory traffic differ between block shapes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include <cstdint>

#include "kernels/attention/attn_params.cuh"
#include "kernels/attention/cache_convert.cuh"
#include "kernels/common.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels::detail {

// Token t is alone in its run of equal token_seq (a decode token, or a one-token chunk).
__device__ __forceinline__ bool is_single(const int32_t* token_seq, int n_tokens, int t) {
  const int32_t s = token_seq[t];
  return (t == 0 || token_seq[t - 1] != s) && (t + 1 >= n_tokens || token_seq[t + 1] != s);
}

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
// row in shared memory) and the combine kernel (per thread) compile the same arithmetic.
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
// One split's partial (m, l and one dim's o) into a merge's running (M, L, O): the first split's
// taken as is. The combine kernel and the decode kernels' own merge (decode_merge.cuh) both take
// the splits in increasing order through this, so they give the same bits.
__device__ __forceinline__ void merge_split(float& M, float& L, float& O, float m, float l, float o,
                                            bool first) {
  if (first) {
    M = m, L = l, O = o;
  } else {
    float a, b;
    merge_weights(M, L, m, l, a, b);
    O = merge_value(O, o, a, b);
  }
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

// Rows of a multi-query block: 64 up to head_dim 128, 32 at 256, 16 at 512 (shared memory, and
// the V accumulators' registers: rows x head_dim / 256 a thread).
constexpr int multi_query_rows(int d) {
  return d <= 128 ? 64 : d <= 256 ? 32 : 16;
}

// Block shapes. MQ = false: one query token (decode), up to kMaxGroup rows; MQ = true: a tile of
// query tokens of one sequence, up to kRows rows, register-tiled.
template <int D, typename CT, bool MQ>
struct AttnConfig {
  static constexpr int kRows = MQ ? multi_query_rows(D) : kMaxGroup;
  // Keys per staged chunk: one-query blocks take 128 so that a thread scores one key for half
  // the rows (each converted K element serves several GQA heads); query tiles take 64. At head_dim
  // 512 one-query blocks take 64 too: a 16-bit cache's 128-key chunk (130 KiB) would leave room
  // for one ring buffer, 64 keys leave three, the bytes in flight of head_dim 256. (An fp8 cache
  // keeps the same shapes, so its staged chunks are about half the bytes.)
  static constexpr int kChunk = MQ || D > 256 ? 64 : 128;
  static constexpr int kChunkShift = kChunk == 64 ? 6 : 7;
  // Scores: a thread computes kRowsS rows x kKeysS keys of a chunk; a warp shares its rows.
  static constexpr int kKeysS = MQ ? 2 : 1;
  static constexpr int kKeySlots = kChunk / kKeysS;
  static constexpr int kRowGroupsS = kAttnThreads / kKeySlots;
  static constexpr int kRowsS = kRows / kRowGroupsS;
  // Weighted V: a thread owns kRowsV rows x kDimsV contiguous dims; a warp shares its rows (head
  // dims of 32 and more). Head_dim 16 has one dim a thread: a warp holds two row groups (the V
  // phase has no warp-collective step, so this only costs divergence), and a one-query block
  // has more row groups than rows: its threads past kRowGroupsV * kDimGroups own no row.
  static constexpr int kDimsV = D < 32 ? 1 : MQ ? D / 32 : (D >= 128 ? D / 128 : 1);
  static constexpr int kDimGroups = D / kDimsV;
  static constexpr int kRowGroupsV =
      kAttnThreads / kDimGroups < kRows ? kAttnThreads / kDimGroups : kRows;
  static constexpr int kRowsV = kRows / kRowGroupsV;
  // Staging: 16-byte segments (4 f32, 8 f16 / bf16, 16 fp8 elements); a key row is padded by 16
  // bytes so that the lanes' 16-byte reads of different rows fall on different banks. The
  // scores' dims run in segments, but each of their four fma chains still takes its dims in
  // increasing order, so the segment size changes no bits.
  static constexpr int kSegElems = 16 / static_cast<int>(sizeof(CT));
  static constexpr int kSegs = D / kSegElems;
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(CT)) + 16;
  static constexpr int kChunkBytes = kChunk * kRowBytes;
  // q rows, the split's scores, eight per-row arrays (statistics and query ranges).
  static constexpr int kFixedBytes = kRows * D * 4 + kRows * kSplit * 4 + kRows * kRowStateBytes;
  static constexpr bool kZeroFillV = false;        // chunk_values reads only the run's keys
  static constexpr int kBlocksPerSm = MQ ? 1 : 2;  // query tiles' register tiling needs the SM
  static_assert(kRowsS * kRowGroupsS == kRows && kRowsV * kRowGroupsV == kRows, "row split");
  static_assert(kRowGroupsV * kDimGroups <= kAttnThreads, "V owners fit the block");
  static_assert(kDimGroups % 32 == 0 || D < 32, "a warp shares its V rows");
  static_assert(kKeySlots % 32 == 0, "a warp shares its score rows");
  static_assert(kChunk == 1 << kChunkShift && kSplit % kChunk == 0, "chunks tile a split");
  static_assert(D % kSegElems == 0 && kSegElems % 4 == 0, "whole segments, four chains");
};

// Waits until at most n of this thread's cp.async groups are pending (n < kMaxStages).
__device__ __forceinline__ void cp_async_wait(int n) {
  switch (n) {
    case 0:
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
      break;
    case 3:
      asm volatile("cp.async.wait_group 3;\n" ::: "memory");
      break;
    case 4:
      asm volatile("cp.async.wait_group 4;\n" ::: "memory");
      break;
    case 5:
      asm volatile("cp.async.wait_group 5;\n" ::: "memory");
      break;
    case 6:
      asm volatile("cp.async.wait_group 6;\n" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 7;\n" ::: "memory");
      break;
  }
}

// Position in the chunk sequence of a run: split s, phase 0 (K) or 1 (V), chunk ci of the split
// (chunk ci holds keys [s * kSplit + (ci << chunk_shift), + chunk) clipped to the run's keys
// [lo, hi)).
struct Cursor {
  int s, phase, ci;
};

// One run: tokens [tb, te) of one sequence (te - tb <= the tile), its rows, its splits.
struct Run {
  int tb, nq, n_rows, n_h, h0, kv_head, seq;
  int lo, hi;            // union of the rows' key ranges: [lo, hi)
  int chunk_shift;       // log2(keys per chunk)
  int s_begin, s_end;    // splits this block computes: [s_begin, s_end)
  const int32_t* table;  // the sequence's block table
  __device__ int ci_first(int s) const { return (max(s * kSplit, lo) - s * kSplit) >> chunk_shift; }
  __device__ int ci_last(int s) const {
    return (min(s * kSplit + kSplit, hi) - 1 - s * kSplit) >> chunk_shift;
  }
  __device__ bool done(const Cursor& c) const { return c.s >= s_end; }
  __device__ void advance(Cursor& c) const {
    if (c.ci < ci_last(c.s)) {
      ++c.ci;
    } else if (c.phase == 0) {
      c.phase = 1;
      c.ci = ci_first(c.s);
    } else {
      ++c.s;
      c.phase = 0;
      if (c.s < s_end) c.ci = ci_first(c.s);
    }
  }
};

// Per-row state of a block's run in shared memory, the same for both arithmetics (this kernel's
// and attention_mma.cuh's): [rows] floats each, then [rows] ints each.
struct RowState {
  float* split_m;  // this split's statistics
  float* split_l;
  float* run_m;  // one_pass running state
  float* run_l;
  float* w_old;  // one_pass rescale factors
  float* w_new;
  int32_t* qpos;  // per query of the run: position and first key
  int32_t* qlo;
};

// Each of the run's query tokens' key range into st.qpos / st.qlo (thread i: query i), which the
// chunk steps mask by.
__device__ __forceinline__ void publish_key_ranges(const AttnParams& p, const Run& run,
                                                   const RowState& st) {
  if (threadIdx.x < run.nq) {
    const KeyRange r = key_range(p.positions[run.tb + threadIdx.x], p.window);
    st.qpos[threadIdx.x] = r.pos;
    st.qlo[threadIdx.x] = r.lo;
  }
}

// Lays a RowState for `rows` rows out at `at`; returns the first byte after it.
__device__ __forceinline__ unsigned char* carve_row_state(RowState& st, float* at, int rows) {
  st.split_m = at;
  st.split_l = st.split_m + rows;
  st.run_m = st.split_l + rows;
  st.run_l = st.run_m + rows;
  st.w_old = st.run_l + rows;
  st.w_new = st.w_old + rows;
  st.qpos = reinterpret_cast<int32_t*>(st.w_new + rows);
  st.qlo = st.qpos + rows;
  return reinterpret_cast<unsigned char*>(st.qlo + rows);
}

// Shared memory of a block (dynamic; layout from AttnConfig).
struct AttnSmem : RowState {
  float* qs;            // [kRows][D] the rows' q
  float* sc;            // [kRows][kSplit] scores, then exp(s - m), of the current split
  unsigned char* ring;  // [stages][kChunk][kRowBytes]
};

template <int D, typename CT, bool MQ>
__device__ __forceinline__ AttnSmem attn_smem(unsigned char* base) {
  using C = AttnConfig<D, CT, MQ>;
  AttnSmem m;
  m.qs = reinterpret_cast<float*>(base);
  m.sc = m.qs + C::kRows * D;
  m.ring = carve_row_state(m, m.sc + C::kRows * kSplit, C::kRows);
  return m;
}

// Starts the copies of chunk c of the run into ring buffer b (16 bytes per cp.async). A thread
// copies one 16-byte segment of kPasses rows; the block-table reads of all its rows are issued
// before the copies, so their latencies overlap. C: the block shape's config (kChunk, kSegs,
// kRowBytes, and kZeroFillV: the tensor-core kernel multiplies whole 16-key steps of V, so a V
// chunk's keys outside the run are stored as zeros instead of left as they were).
template <int D, typename CT, class C>
__device__ __forceinline__ void issue_chunk(const AttnParams& p, const Run& run, const Cursor& c,
                                            unsigned char* buf) {
  constexpr int kRowsPerPass = kAttnThreads / C::kSegs;
  constexpr int kPasses = (C::kChunk + kRowsPerPass - 1) / kRowsPerPass;
  const int base = c.s * kSplit + c.ci * C::kChunk;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
  const unsigned char* cache = static_cast<const unsigned char*>(c.phase == 0 ? p.k : p.v);
  const int seg = threadIdx.x % C::kSegs, row0 = threadIdx.x / C::kSegs;
  int32_t blk_id[kPasses];
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int key = base + row0 + k * kRowsPerPass;
    blk_id[k] = 0;
    if (key >= c0 && key < c1) {
      const int blk = p.bs_shift >= 0 ? key >> p.bs_shift : key / p.block_size;
      blk_id[k] = __ldg(run.table + blk);
    }
  }
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int key = base + row0 + k * kRowsPerPass;
    if (key < c0 || key >= c1) {
      if (C::kZeroFillV && c.phase == 1 && key - base < C::kChunk)
        *reinterpret_cast<uint4*>(buf + (key - base) * C::kRowBytes + seg * 16) = uint4{0, 0, 0, 0};
      continue;
    }
    const int off = p.bs_shift >= 0 ? key & (p.block_size - 1) : key % p.block_size;
    const int64_t slot = int64_t{blk_id[k]} * p.block_size + off;
    const unsigned char* src =
        cache + ((slot * p.n_kv_heads + run.kv_head) * D) * sizeof(CT) + seg * 16;
    cp_async16(buf + (key - base) * C::kRowBytes + seg * 16, src);
  }
}

// Starts a run's ring: its first p.stages chunks in flight (one commit group each, empty ones
// too, so that cp_async_wait's count holds). Returns the cursor of the next chunk to issue.
template <int D, typename CT, class C>
__device__ __forceinline__ Cursor start_ring(const AttnParams& p, const Run& run,
                                             unsigned char* ring) {
  Cursor prod{run.s_begin, 0, run.ci_first(run.s_begin)};
  for (int b = 0; b < p.stages; ++b) {
    if (!run.done(prod)) {
      issue_chunk<D, CT, C>(p, run, prod, ring + b * C::kChunkBytes);
      run.advance(prod);
    }
    cp_async_commit();
  }
  return prod;
}

// Streams the run's chunks through the ring, in order, for both arithmetics: chunk(c, buf) once
// chunk c has landed for every thread (and what the block wrote before is published), then the
// buffer is refilled with the chunk `prod` points at; after a split's last K chunk softmax(s),
// after its last V chunk finish(s). Every thread of the block calls it.
// one_barrier (a block-uniform choice, for arithmetics whose softmax and finish read only the
// thread's own registers and state: the row-owning form): one block barrier a chunk instead of
// two. The barrier before chunk c also says every thread is done with chunk c - 1, so that
// chunk's buffer is refilled there, before chunk c's arithmetic, with the chunk it would have
// taken after it: the same chunks in the same buffers. Commit groups: start_ring's `stages`, then
// one a chunk from the second on, so chunk c is group c either way; with the refill committed
// before chunk c's arithmetic rather than after it, one group more is younger than chunk c's at
// its wait (stages - 2 may be pending; 246b5c6 waited for stages - 1 there, which let chunk c's
// own group be pending from chunk `stages` on: its A/B figures for this form are void).
template <int D, typename CT, class C, class Chunk, class Softmax, class Finish>
__device__ __forceinline__ void stream_chunks(const AttnParams& p, const Run& run,
                                              unsigned char* ring, Cursor prod, Chunk&& chunk,
                                              Softmax&& softmax, Finish&& finish,
                                              bool one_barrier = false) {
  int b = 0, b_prev = p.stages - 1;
  bool first = true;
  for (Cursor c{run.s_begin, 0, run.ci_first(run.s_begin)}; !run.done(c); run.advance(c)) {
    // Chunk c has landed (for this thread's copies).
    cp_async_wait(one_barrier && !first ? p.stages - 2 : p.stages - 1);
    __syncthreads();              // ... for every thread's; q, qpos, sc, statistics published
    if (one_barrier && !first) {  // chunk c - 1's buffer is free
      if (!run.done(prod)) {
        issue_chunk<D, CT, C>(p, run, prod, ring + b_prev * C::kChunkBytes);
        run.advance(prod);
      }
      cp_async_commit();
    }
    chunk(c, static_cast<const unsigned char*>(ring + b * C::kChunkBytes));
    const bool last = c.ci == run.ci_last(c.s);
    if (!one_barrier) {
      __syncthreads();  // buffer b is free; the split's scores are complete
      if (!run.done(prod)) {
        issue_chunk<D, CT, C>(p, run, prod, ring + b * C::kChunkBytes);
        run.advance(prod);
      }
      cp_async_commit();
    }
    if (last && c.phase == 0) softmax(c.s);
    if (last && c.phase == 1) finish(c.s);
    first = false;
    b_prev = b;
    b = b + 1 == p.stages ? 0 : b + 1;
  }
  cp_async_wait(0);
}

// chunk_scores' step over the 16 dims [d0, d0 + 16) of an fp8 cache (seg: key slot ks's row at
// d0): each 32-bit word converts to the four dims one step of the chains takes, right before
// the rows use them. (Converting all 16 first, as the wider types do with their 8 or 4, keeps 16
// more floats live: the one-query kernel spilled at head_dim 512.) Each chain still takes its
// dims in increasing order, so the bits are those of converting first.
template <int D, class C>
__device__ __forceinline__ void fp8_segment_scores(const Run& run, const AttnSmem& sm,
                                                   const unsigned char* seg, int rg, int d0,
                                                   float (&a)[C::kRowsS][C::kKeysS][4]) {
  uint4 w[C::kKeysS];
#pragma unroll
  for (int k = 0; k < C::kKeysS; ++k)
    w[k] = *reinterpret_cast<const uint4*>(seg + k * C::kKeySlots * C::kRowBytes);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float kf[C::kKeysS][4];
#pragma unroll
    for (int k = 0; k < C::kKeysS; ++k)
      cvt_word<__nv_fp8_e4m3>(j == 0 ? w[k].x : j == 1 ? w[k].y : j == 2 ? w[k].z : w[k].w, kf[k]);
#pragma unroll
    for (int i = 0; i < C::kRowsS; ++i) {
      const int r = rg + i * C::kRowGroupsS;
      if (r >= run.n_rows) continue;  // uniform per warp
      const float4 x = *reinterpret_cast<const float4*>(sm.qs + r * D + d0 + 4 * j);
#pragma unroll
      for (int k = 0; k < C::kKeysS; ++k) {
        a[i][k][0] = fmaf(x.x, kf[k][0], a[i][k][0]);
        a[i][k][1] = fmaf(x.y, kf[k][1], a[i][k][1]);
        a[i][k][2] = fmaf(x.z, kf[k][2], a[i][k][2]);
        a[i][k][3] = fmaf(x.w, kf[k][3], a[i][k][3]);
      }
    }
  }
}

// Scores of chunk c for every row: sc[r][key - split base].
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void chunk_scores(const AttnParams& p, const Run& run, const Cursor& c,
                                             const AttnSmem& sm, const unsigned char* buf) {
  using C = AttnConfig<D, CT, MQ>;
  const int sbase = c.s * kSplit, base = sbase + c.ci * C::kChunk;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
  const int ks = threadIdx.x % C::kKeySlots, rg = threadIdx.x / C::kKeySlots;
  if (rg >= run.n_rows) return;  // uniform per warp
  float a[C::kRowsS][C::kKeysS][4];
#pragma unroll
  for (int i = 0; i < C::kRowsS; ++i)
#pragma unroll
    for (int k = 0; k < C::kKeysS; ++k) a[i][k][0] = a[i][k][1] = a[i][k][2] = a[i][k][3] = 0.0f;
#pragma unroll 2
  for (int d0 = 0; d0 < D; d0 += C::kSegElems) {
    if constexpr (sizeof(CT) == 1) {
      fp8_segment_scores<D, C>(run, sm, buf + ks * C::kRowBytes + d0, rg, d0, a);
    } else {
      float kf[C::kKeysS][C::kSegElems];
#pragma unroll
      for (int k = 0; k < C::kKeysS; ++k) {
        load_cvt<CT, C::kSegElems>(buf + (ks + k * C::kKeySlots) * C::kRowBytes + d0 * sizeof(CT),
                                   kf[k]);
      }
#pragma unroll
      for (int i = 0; i < C::kRowsS; ++i) {
        const int r = rg + i * C::kRowGroupsS;
        if (r >= run.n_rows) continue;  // uniform per warp
        const float* qr = sm.qs + r * D + d0;
#pragma unroll
        for (int e = 0; e < C::kSegElems; e += 4) {
          const float4 x = *reinterpret_cast<const float4*>(qr + e);
#pragma unroll
          for (int k = 0; k < C::kKeysS; ++k) {
            a[i][k][0] = fmaf(x.x, kf[k][e + 0], a[i][k][0]);
            a[i][k][1] = fmaf(x.y, kf[k][e + 1], a[i][k][1]);
            a[i][k][2] = fmaf(x.z, kf[k][e + 2], a[i][k][2]);
            a[i][k][3] = fmaf(x.w, kf[k][e + 3], a[i][k][3]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < C::kRowsS; ++i) {
    const int r = rg + i * C::kRowGroupsS;
    if (r >= run.n_rows) continue;
#pragma unroll
    for (int k = 0; k < C::kKeysS; ++k) {
      const int key = base + ks + k * C::kKeySlots;
      if (key < c0 || key >= c1) continue;
      float s =
          __fadd_rn(__fadd_rn(a[i][k][0], a[i][k][1]), __fadd_rn(a[i][k][2], a[i][k][3])) * p.scale;
      if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
      sm.sc[r * kSplit + (key - sbase)] = s;
    }
  }
}

// Row r's keys in split s: [kb, ke) (empty when the split is outside its range).
__device__ __forceinline__ void row_keys(const RowState& sm, int q, int s, int& kb, int& ke) {
  kb = max(s * kSplit, sm.qlo[q]);
  ke = min(s * kSplit + kSplit, sm.qpos[q] + 1);
}

// One_pass, the end of split s: one thread per row merges the split's (m, l) into the running
// (M, L) and leaves the rescale factors in w_old / w_new for the rows' owners (after the barrier).
__device__ __forceinline__ void update_running_stats(const Run& run, int s, const RowState& sm) {
  const int r = threadIdx.x;
  if (r < run.n_rows) {
    const int q = r / run.n_h;
    int kb, ke;
    row_keys(sm, q, s, kb, ke);
    if (kb < ke) {
      if (s == sm.qlo[q] / kSplit) {
        sm.run_m[r] = sm.split_m[r], sm.run_l[r] = sm.split_l[r];
      } else {
        merge_weights(sm.run_m[r], sm.run_l[r], sm.split_m[r], sm.split_l[r], sm.w_old[r],
                      sm.w_new[r]);
      }
    }
  }
  __syncthreads();
}

// Split plan: row r's partial of split s in scratch, [D] values then m, l. Rows by token, or by
// sequence for the single-token launch (select 1).
template <int D>
__device__ __forceinline__ float* partial_row(const AttnParams& p, const Run& run, int r, int s) {
  const int prow = p.select == 1 ? run.seq : run.tb + r / run.n_h, h = run.h0 + r % run.n_h;
  return p.partials + ((int64_t{prow} * p.n_heads + h) * p.n_splits + s) * (D + 2);
}

// The run of tokens [tb, te) of sequence seq for a block's kv head and heads [h0, h0 + n_h):
// its key range and the splits this block computes. False when the block has nothing to do (a
// split plan's split outside the run's keys: the grid is sized for the step's largest context, or
// a capacity; nothing is read).
__device__ __forceinline__ bool make_run(const AttnParams& p, int tb, int te, int seq, int kv_head,
                                         int h0, int n_h, int chunk_shift, Run& run) {
  run.tb = tb;
  run.nq = te - tb;
  run.n_h = n_h;
  run.n_rows = run.nq * n_h;
  run.h0 = h0;
  run.kv_head = kv_head;
  run.seq = seq;
  run.lo = INT32_MAX;
  run.hi = 0;
  run.chunk_shift = chunk_shift;
  for (int i = 0; i < run.nq; ++i) {
    const KeyRange r = key_range(p.positions[tb + i], p.window);
    run.lo = min(run.lo, r.lo);
    run.hi = max(run.hi, r.pos + 1);
  }
  if (p.one_pass) {
    run.s_begin = run.lo / kSplit;
    run.s_end = (run.hi - 1) / kSplit + 1;
  } else {
    run.s_begin = blockIdx.y;
    run.s_end = run.s_begin + 1;
    if (run.s_begin < run.lo / kSplit || run.s_begin > (run.hi - 1) / kSplit) return false;
  }
  run.table = p.block_tables + int64_t{seq} * p.max_blocks;
  return true;
}

// acc[i][:] += p[row i][key] * v[key][dims] for the keys of chunk c, keys in increasing order.
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void chunk_values(
    const Run& run, const Cursor& c, const AttnSmem& sm, const unsigned char* buf,
    float (&acc)[AttnConfig<D, CT, MQ>::kRowsV][AttnConfig<D, CT, MQ>::kDimsV]) {
  using C = AttnConfig<D, CT, MQ>;
  constexpr int DV = C::kDimsV;
  const int sbase = c.s * kSplit, base = sbase + c.ci * C::kChunk;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
  const int dg = threadIdx.x % C::kDimGroups, rg = threadIdx.x / C::kDimGroups;
  if (rg >= run.n_rows) return;  // uniform per warp (head_dim >= 32)
  const unsigned char* vb = buf + dg * DV * sizeof(CT);
  int jb[C::kRowsV], je[C::kRowsV];
  bool full = true;
#pragma unroll
  for (int i = 0; i < C::kRowsV; ++i) {
    const int r = rg + i * C::kRowGroupsV;
    if (r < run.n_rows) {
      int kb, ke;
      row_keys(sm, r / run.n_h, c.s, kb, ke);
      jb[i] = max(c0, kb);
      je[i] = min(c1, ke);
      full = full && jb[i] == c0 && je[i] == c1;
    } else {
      jb[i] = je[i] = c0;
    }
  }
  if (full) {  // every owned row takes every key of the chunk
    int j = c0;
    for (; j < c1 && (j & 3) != 0; ++j) {
      float v[DV];
      load_cvt<CT, DV>(vb + (j - base) * C::kRowBytes, v);
#pragma unroll
      for (int i = 0; i < C::kRowsV; ++i) {
        const int r = rg + i * C::kRowGroupsV;
        if (r >= run.n_rows) continue;
        const float pr = sm.sc[r * kSplit + (j - sbase)];
#pragma unroll
        for (int e = 0; e < DV; ++e) acc[i][e] = fmaf(pr, v[e], acc[i][e]);
      }
    }
    for (; j + 4 <= c1; j += 4) {
      float v[4][DV];
#pragma unroll
      for (int u = 0; u < 4; ++u) load_cvt<CT, DV>(vb + (j + u - base) * C::kRowBytes, v[u]);
#pragma unroll
      for (int i = 0; i < C::kRowsV; ++i) {
        const int r = rg + i * C::kRowGroupsV;
        if (r >= run.n_rows) continue;
        const float4 p4 = *reinterpret_cast<const float4*>(sm.sc + r * kSplit + (j - sbase));
        const float pr[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int e = 0; e < DV; ++e) acc[i][e] = fmaf(pr[u], v[u][e], acc[i][e]);
      }
    }
    for (; j < c1; ++j) {
      float v[DV];
      load_cvt<CT, DV>(vb + (j - base) * C::kRowBytes, v);
#pragma unroll
      for (int i = 0; i < C::kRowsV; ++i) {
        const int r = rg + i * C::kRowGroupsV;
        if (r >= run.n_rows) continue;
        const float pr = sm.sc[r * kSplit + (j - sbase)];
#pragma unroll
        for (int e = 0; e < DV; ++e) acc[i][e] = fmaf(pr, v[e], acc[i][e]);
      }
    }
  } else {  // rows whose range starts or ends inside the chunk: each takes its own keys
    for (int j = c0; j < c1; ++j) {
      float v[DV];
      load_cvt<CT, DV>(vb + (j - base) * C::kRowBytes, v);
#pragma unroll
      for (int i = 0; i < C::kRowsV; ++i) {
        if (j < jb[i] || j >= je[i]) continue;
        const int r = rg + i * C::kRowGroupsV;
        const float pr = sm.sc[r * kSplit + (j - sbase)];
#pragma unroll
        for (int e = 0; e < DV; ++e) acc[i][e] = fmaf(pr, v[e], acc[i][e]);
      }
    }
  }
}

// Softmax statistics of split s, one warp per row: m, then p_j = exp(s_j - m) in place and l.
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void split_softmax(const Run& run, int s, const AttnSmem& sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < run.n_rows; r += kAttnWarps) {
    int kb, ke;
    row_keys(sm, r / run.n_h, s, kb, ke);
    if (kb >= ke) continue;  // no key of this row in the split
    float* s_row = sm.sc + r * kSplit + (kb - s * kSplit);
    const int n = ke - kb;
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
    if (lane == 0) sm.split_m[r] = m, sm.split_l[r] = l;
  }
}

// The end of split s: split plan, the partials go to scratch; one_pass, they merge into the
// running state (M, L per row in shared memory, O in the owners' registers). acc is zeroed.
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void split_finish(
    const AttnParams& p, const Run& run, int s, const AttnSmem& sm,
    float (&acc)[AttnConfig<D, CT, MQ>::kRowsV][AttnConfig<D, CT, MQ>::kDimsV],
    float (&O)[AttnConfig<D, CT, MQ>::kRowsV][AttnConfig<D, CT, MQ>::kDimsV]) {
  using C = AttnConfig<D, CT, MQ>;
  constexpr int DV = C::kDimsV;
  const int dg = threadIdx.x % C::kDimGroups, rg = threadIdx.x / C::kDimGroups;
  if (p.one_pass) update_running_stats(run, s, sm);
#pragma unroll
  for (int i = 0; i < C::kRowsV; ++i) {
    const int r = rg + i * C::kRowGroupsV;
    if (r < run.n_rows) {
      const int q = r / run.n_h;
      int kb, ke;
      row_keys(sm, q, s, kb, ke);
      if (kb < ke) {
        if (p.one_pass) {
          const bool first = s == sm.qlo[q] / kSplit;
#pragma unroll
          for (int e = 0; e < DV; ++e)
            O[i][e] = first ? acc[i][e] : merge_value(O[i][e], acc[i][e], sm.w_old[r], sm.w_new[r]);
        } else {
          float* part = partial_row<D>(p, run, r, s);
#pragma unroll
          for (int e = 0; e < DV; ++e) part[dg * DV + e] = acc[i][e];
          if (dg == 0) part[D] = sm.split_m[r], part[D + 1] = sm.split_l[r];
        }
      }
    }
#pragma unroll
    for (int e = 0; e < DV; ++e) acc[i][e] = 0.0f;
  }
}

// Attention of one run (tokens [tb, te) of one sequence) for this block's kv head and heads.
template <int D, typename CT, bool MQ>
__device__ void attend_run(const AttnParams& p, const AttnSmem& sm, int tb, int te, int seq,
                           int kv_head, int h0, int n_h) {
  using C = AttnConfig<D, CT, MQ>;
  constexpr int DV = C::kDimsV;
  Run run;
  if (!make_run(p, tb, te, seq, kv_head, h0, n_h, C::kChunkShift, run)) return;

  const Cursor prod = start_ring<D, CT, C>(p, run, sm.ring);
  publish_key_ranges(p, run, sm);
  for (int i = threadIdx.x; i < run.n_rows * D; i += kAttnThreads) {
    const int r = i / D, d = i % D;
    sm.qs[i] = p.q[int64_t{tb + r / n_h} * p.ldq + int64_t{h0 + r % n_h} * D + d];
  }

  float acc[C::kRowsV][DV], O[C::kRowsV][DV];
#pragma unroll
  for (int i = 0; i < C::kRowsV; ++i)
#pragma unroll
    for (int e = 0; e < DV; ++e) acc[i][e] = O[i][e] = 0.0f;
  stream_chunks<D, CT, C>(
      p, run, sm.ring, prod,
      [&](const Cursor& c, const unsigned char* buf) {
        if (c.phase == 0) {
          chunk_scores<D, CT, MQ>(p, run, c, sm, buf);
        } else {
          chunk_values<D, CT, MQ>(run, c, sm, buf, acc);
        }
      },
      [&](int s) { split_softmax<D, CT, MQ>(run, s, sm); },
      [&](int s) { split_finish<D, CT, MQ>(p, run, s, sm, acc, O); });
  if (p.one_pass) {
    const int dg = threadIdx.x % C::kDimGroups, rg = threadIdx.x / C::kDimGroups;
#pragma unroll
    for (int i = 0; i < C::kRowsV; ++i) {
      const int r = rg + i * C::kRowGroupsV;
      if (r >= run.n_rows) continue;
      float* o = p.out + (int64_t{tb + r / n_h} * p.n_heads + h0 + r % n_h) * D + dg * DV;
#pragma unroll
      for (int e = 0; e < DV; ++e) o[e] = __fdiv_rn(O[i][e], sm.run_l[r]);
    }
  }
  __syncthreads();  // shared memory is reused by the block's next run
}

}  // namespace memra::kernels::detail
