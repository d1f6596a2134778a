// A one-split decode block's scores and values with the mma operands transposed (private to
// attention.cu; the decode kernel's kTransposed form, MEMRA_DECODE_TRANSPOSED): the query rows
// are the columns of each m16n8k16 product and the keys (scores) or the head dims (values) its
// rows, so a block of up to 8 query rows needs half the products of decode_chains.cuh's form, each
// output element the same chain of products in the same order.
//
// Why. A one-query block has one to a few query rows (a kv head's query heads, MEMRA_DECODE_SPREAD
// removed in the sixty-first round: one), and decode_chains.cuh's products carry them as the 16
// rows of A: 15 of 16 rows are padding, ~768 mma a block (the scores: two chunks x two 8-key tiles
// x 8 dim steps x q's three terms a warp; the values: two 8-dim tiles x 16 key steps x three
// terms). Transposed, a warp's 16 keys (or 16 dims) are A's rows and the query rows B's 8 columns:
// 7 of 8 columns padding and 48 mma a warp for each phase instead of 96.
//
// The same bits: an element of D = A B + C is the same dot product of the same 16 pairs plus the
// same accumulator wherever it sits in the tile (tools/probes/mma_transpose.cu checks this on the
// GPU, and kernel-check compares this form with the generic kernel bit for bit); the chains keep
// mma_chunk_scores' and mma_chunk_values' order (the dims' or keys' 16-steps, each step's terms
// smallest first).
#pragma once

#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/decode_chains.cuh"
#include "kernels/attention/decode_cluster.cuh"
#include "kernels/attention/decode_tensor.cuh"

namespace memra::kernels::detail {

// The most query rows the transposed form takes: an n8 tile's columns.
constexpr int kTransposedMaxRows = 8;

// The scores of chunks [kCi0, kCi0 + kCh) of split s, side by side: warp w takes keys
// [w kKeysW, + kKeysW) of each chunk (A: the 16 keys' K rows, a dim step at a time), q's rows as
// B's columns; each step's operands loaded a step ahead. A chunk without keys of the run is
// computed on whatever its rows hold and not stored. rows: chunk kCi0's first K row (its chunks'
// rows contiguous). kStaged: the rows of q's terms staged (staged_row's; B's columns past them
// repeat the last, their results unstored). kSwizzled: K's rows in the tensor copies' layout
// (decode_tensor.cuh; the whole split only).
template <int D, typename CT, int kCi0 = 0, int kCh = kSplit / MmaConfig<D, CT, false>::kChunk,
          int kStaged = MmaConfig<D, CT, false>::kRows, bool kSwizzled = false>
__device__ __forceinline__ void decode_scores_t(const AttnParams& p, const Run& run, int s,
                                                const MmaSmem& sm, const unsigned char* rows) {
  using C = MmaConfig<D, CT, false>;
  constexpr int kSteps = D / 16;
  static_assert(C::kKeysW == 16 && kStaged <= C::kRows,
                "a warp's keys of a chunk: one 16-row tile");
  static_assert(kCi0 >= 0 && kCh >= 1 && (kCi0 + kCh) * C::kChunk <= kSplit, "chunks of the split");
  static_assert(!kSwizzled || (kCi0 == 0 && kCh * C::kChunk == kSplit), "swizzled: whole splits");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sbase = s * kSplit, k0 = warp * C::kKeysW;
  // A (x4): lanes 0-15 address the keys' rows at the step's first 8 dims, lanes 16-31 the next 8.
  const auto a_at = [&](int c, int kk) {
    return rows + key_chunk_offset<kSwizzled, C::kRowBytes>(c * C::kChunk + k0 + (lane & 15),
                                                            2 * kk + (lane >> 4), p.bs_shift);
  };
  // B (x2): lanes 0-7 address q's rows 0-7 at the step's first 8 dims, lanes 8-15 the next 8.
  const unsigned char* q_lane =
      sm.q + min(lane & 7, kStaged - 1) * C::kRowBytes + 16 * ((lane >> 3) & 1);
  float acc[kCh][4];
#pragma unroll
  for (int c = 0; c < kCh; ++c) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
  uint32_t a[2][kCh][4], b[2][C::kTerms][2];
  const auto load = [&](int buf, int kk) {
#pragma unroll
    for (int c = 0; c < kCh; ++c) ldsm_x4(a[buf][c], a_at(c, kk));
#pragma unroll
    for (int i = 0; i < C::kTerms; ++i)
      ldsm_x2(b[buf][i][0], b[buf][i][1], q_lane + i * kStaged * C::kRowBytes + 32 * kk);
  };
  steps_loaded_ahead<kSteps>(load, [&](int buf) {
#pragma unroll
    for (int i = C::kTerms - 1; i >= 0; --i)
#pragma unroll
      for (int c = 0; c < kCh; ++c) mma16816<CT>(acc[c], a[buf][c], b[buf][i][0], b[buf][i][1]);
  });
  // acc[c]: (key g, row 2t), (key g, row 2t + 1), (key g + 8, row 2t), (key g + 8, row 2t + 1).
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int c = 0; c < kCh; ++c) {
    const int base = sbase + (kCi0 + c) * C::kChunk;
    const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = base + k0 + g + 8 * h;
      if (key < c0 || key >= c1) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 2 * t + e;
        if (r < run.n_rows)
          sm.sc[r * C::kScStride + (key - sbase)] = scaled_score(p, acc[c][2 * h + e]);
      }
    }
  }
}

// acc += v^T p^T over the 16-key steps of chunks [kCi0, kCi0 + kCh) of split s that hold keys of
// the run, in key order: warp w takes dims [w kDimsW, + kDimsW) (A: V's rows transposed), the
// rows' p as B's columns. acc: (dim g, row 2t), (dim g, row 2t + 1), (dim g + 8, row 2t), (dim
// g + 8, row 2t + 1) of the warp's dims. rows: chunk kCi0's first V row (its chunks' rows
// contiguous). kStaged: the scores' rows staged (B's columns past them repeat the last). kSwizzled:
// V's rows in the tensor copies' layout (decode_tensor.cuh, blocks of 2^bs_shift; whole splits).
template <int D, typename CT, int kCi0 = 0, int kCh = kSplit / MmaConfig<D, CT, false>::kChunk,
          int kStaged = MmaConfig<D, CT, false>::kRows, bool kSwizzled = false>
__device__ __forceinline__ void decode_values_t(const Run& run, int s, const MmaSmem& sm,
                                                const unsigned char* rows, float (&acc)[4],
                                                int bs_shift) {
  using C = MmaConfig<D, CT, false>;
  static_assert(C::kDimsW == 16, "a warp's dims: one 16-row tile");
  static_assert(!kSwizzled || (kCi0 == 0 && kCh * C::kChunk == kSplit), "swizzled: whole splits");
  constexpr int kFirst = kCi0 * C::kChunk, kEnd = (kCi0 + kCh) * C::kChunk;  // split-relative
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sbase = s * kSplit;
  const int j0 = max(kFirst, (max(sbase, run.lo) - sbase) & ~15);
  const int j1 = min(kEnd, (min(sbase + kSplit, run.hi) - sbase + 15) & ~15);
  // A (x4, transposed): lanes address keys (lane & 7) + 8 (lane >> 4) of the step at the warp's
  // first 8 dims (lanes 0-7, 16-23) or its next 8 (lanes 8-15, 24-31).
  const int key_lane = (lane & 7) + 8 * (lane >> 4) - kFirst;
  const int chunk_lane = (warp * C::kDimsW + 8 * ((lane >> 3) & 1)) / 8;
  // B (x2): lanes 0-7 address p's rows 0-7 at the step's first 8 keys, lanes 8-15 the next 8.
  const unsigned char* p_lane =
      reinterpret_cast<const unsigned char*>(sm.sc + min(lane & 7, kStaged - 1) * C::kScStride) +
      2 * 8 * ((lane >> 3) & 1);
  uint32_t a[2][4], b[2][C::kTerms][2];
  const auto load = [&](int buf, int j) {
    ldsm_x4_t(a[buf],
              rows + key_chunk_offset<kSwizzled, C::kRowBytes>(j + key_lane, chunk_lane, bs_shift));
#pragma unroll
    for (int i = 0; i < C::kTerms; ++i)
      ldsm_x2(b[buf][i][0], b[buf][i][1], p_lane + 2 * (i * kSplit + j));
  };
  const auto step = [&](int buf) {
#pragma unroll
    for (int i = C::kTerms - 1; i >= 0; --i) mma16816<CT>(acc, a[buf], b[buf][i][0], b[buf][i][1]);
  };
  key_steps_loaded_ahead(j0, j1, load, step);
}

// The split's partial (decode_values_t's acc, and the statistics the softmax left) where
// mma_split_finish puts it (the split plan's partials), or, kCluster, where cluster_merge reads
// it (`part`, this block's shared memory; the statistics stay in sm.split_m and sm.split_l).
template <int D, bool kCluster>
__device__ __forceinline__ void decode_split_finish_t(const AttnParams& p, const Run& run, int s,
                                                      const MmaSmem& sm, const float (&acc)[4],
                                                      float* part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int d = warp * (D / kAttnWarps) + g;
  if constexpr (!kCluster) store_split_stats<D>(p, run, s, sm);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = 2 * t + e;
    if (r >= run.n_rows) continue;
    float* row;
    if constexpr (kCluster) {
      row = part + r * cluster_part_stride<D>();
    } else {
      int kb, ke;
      row_keys(sm, r / run.n_h, s, kb, ke);
      if (kb >= ke) continue;
      row = partial_row<D>(p, run, r, s);
    }
    row[d] = acc[e], row[d + 8] = acc[2 + e];
  }
}

// Chunk kCi of split s's scores (the forms that take a split a chunk at a time: the pipe and ring
// forms), by the transposed products or attention_mma.cuh's (the same bits). rows: the chunk's K
// rows; kStaged: q's rows staged.
template <int D, typename CT, bool kTransposed, int kCi,
          int kStaged = MmaConfig<D, CT, false>::kRows>
__device__ __forceinline__ void decode_chunk_scores(const AttnParams& p, const Run& run, int s,
                                                    const MmaSmem& sm, const unsigned char* rows) {
  if constexpr (kTransposed)
    decode_scores_t<D, CT, kCi, 1, kStaged>(p, run, s, sm, rows);
  else
    mma_chunk_scores<D, CT, false, kStaged>(p, run, Cursor{s, 0, kCi}, sm, rows);
}

// A split's values taken a chunk at a time (the pipe and ring forms), by the transposed products
// or attention_mma.cuh's, and its partial stored (mma_split_finish's place, the split plan's
// partials): the same bits either way. Its accumulators start at zero.
template <int D, typename CT, bool kTransposed, int kStaged = MmaConfig<D, CT, false>::kRows>
struct ChunkValues {
  using C = MmaConfig<D, CT, false>;
  float t[4];  // transposed: decode_values_t's
  float acc[C::kMTiles][C::kNTilesV][4], O[C::kMTiles][C::kNTilesV][4];  // else mma_chunk_values'

  __device__ __forceinline__ ChunkValues() {
    if constexpr (kTransposed)
      t[0] = t[1] = t[2] = t[3] = 0.0f;
    else
      zero_tiles<C>(acc, O);
  }

  // acc += p . v over chunk kCi's steps with keys of the run; rows: the chunk's V rows.
  template <int kCi>
  __device__ __forceinline__ void add(const Run& run, int s, const MmaSmem& sm,
                                      const unsigned char* rows, int bs_shift) {
    if constexpr (kTransposed)
      decode_values_t<D, CT, kCi, 1, kStaged>(run, s, sm, rows, t, bs_shift);
    else
      mma_chunk_values<D, CT, false, kStaged>(run, Cursor{s, 1, kCi}, sm, rows, acc);
  }

  __device__ __forceinline__ void finish(const AttnParams& p, const Run& run, int s,
                                         const MmaSmem& sm) {
    if constexpr (kTransposed)
      decode_split_finish_t<D, false>(p, run, s, sm, t, nullptr);
    else
      mma_split_finish<D, CT, false>(p, run, s, sm, acc, O);
  }
};

}  // namespace memra::kernels::detail
