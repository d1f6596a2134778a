// The one-token decode matmul's block over tiled K-quant weights (matmul_decode_single.cu's kernel
// and the persistent chain's, matmul_decode_chain.cu): the same code, so the same bits.
//
// The one-token decode matmul over tiled K-quant weights (Q6_K, Q8_0): the group sums of a chunk
// land in the mma's N columns instead of tokens. Q4_K's folded order (fold.cuh) has one chain per
// chunk, not one per group, so there the token sits in column 0 (fold_partial, tiled_chunk.cuh);
// the block shape, the chunk rounds and the expert mode are shared.
//
// Why. With tokens in N (matmul_decode_tiled.cu), a one-token decode uses one column of eight:
// every lane still runs each scale group's scaling (8 FMA on four accumulators, of which one lane
// in four holds the real token), its two scale shuffles and its x group-sum loads, eight or
// sixteen times a chunk, and loads 16 x fragments of which it uses the token's. Measured on the
// H200 that is ~750 instructions a warp per 4 KB of Q4_K weights: the kernel is bound by
// instruction issue at a third of copy bandwidth.
//
// Here column j of the step's B fragment holds the token's x where step s belongs to group
// 8 * set + j (zeros elsewhere), so after the chunk's 16 steps, accumulator set `set` holds
// s_(8 set + j) of every row in column j: each group's chain of its own steps from +0, on the same
// operands as before (the zero columns of other steps add exact zeros). Lane t of a quad then
// holds groups 2t and 2t + 1 of its rows g and g + 8, decodes their scales itself, and the chunk
// partial p = fma(scale_j, s_j, p) (then fma(bias_j, xsum_j, p)) walks the groups in order from
// lane 0 to lane 3 of the quad with one shuffle per lane: matmul.cu's canonical order, so the
// outputs are bit-identical to every other kernel's (kernel-check compares them).
#pragma once

#include "kernels/launch.cuh"
#include "kernels/matmul/one_token_x.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail::single_decode {

constexpr int kWarps = 8, kThreads = kWarps * 32;
using Sum = ChunkSum<kWarps, 16, 1>;

// The step of lane fragment i (of kSets x kGroupSteps, set-major) that column g's lanes take in
// columns_partial: the steps of the groups in column g, one group a set.
template <DType D>
__device__ __forceinline__ int columns_step(int g, int i) {
  constexpr int kGroupSteps = Tiled<D>::kGroup / 16;
  return (8 * (i / kGroupSteps) + g) * kGroupSteps + i % kGroupSteps;
}

// The chunk partial of rows g, g + 8 with scale groups in the mma's columns (types in the
// per-group order): p[0], p[1] in every lane of the quad. x: where the token's x comes from
// (one_token_x.cuh).
template <DType D, typename X>
__device__ __forceinline__ void columns_partial(const X& x, const LaneChunk<D>& cur, int lane,
                                                int k0, float (&p)[2]) {
  using T = Tiled<D>;
  static_assert(T::kScaled, "groups as columns needs scale groups");
  constexpr int kGroupSteps = T::kGroup / 16;    // 2 (Q4_K, Q8_0) or 1 (Q6_K)
  constexpr int kSets = kChunk / T::kGroup / 8;  // accumulator tiles of 8 groups: 1 or 2
  const int g = lane >> 2, t = lane & 3;
  // This lane's x fragments: the steps of the groups in column g (one per set).
  uint2 xf[kSets][kGroupSteps];
#pragma unroll
  for (int set = 0; set < kSets; ++set) {
#pragma unroll
    for (int u = 0; u < kGroupSteps; ++u)
      xf[set][u] = x.frag(k0, t, columns_step<D>(g, set * kGroupSteps + u), set * kGroupSteps + u);
  }
  float s[kSets][4] = {};
#pragma unroll
  for (int st = 0; st < kChunk / 16; ++st) {
    const int grp = st / kGroupSteps, set = grp / 8, col = grp % 8, u = st % kGroupSteps;
    uint32_t af[4];
    T::frag(cur.quad[st >> 2], st & 3, af);
    const bool mine = g == col;
    mma_f16(s[set], af, mine ? xf[set][u].x : 0u, mine ? xf[set][u].y : 0u);
  }
  // The chunk partial of rows g, g + 8: groups in order, lane t applying 2t and 2t + 1.
  static_assert(!T::kBias, "the tiled type with mins (Q4_K) takes the folded order (fold.cuh)");
  p[0] = 0.0f;
  p[1] = 0.0f;
#pragma unroll
  for (int set = 0; set < kSets; ++set) {
    float2 sc[2][2];  // [row g / g + 8][group 2t / 2t + 1]: {scale, 0}
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int i = 0; i < 2; ++i) sc[h][i] = T::scale(cur.head[h], 8 * set + 2 * t + i);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (t == q) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          p[0] = fmaf(sc[0][i].x, s[set][i], p[0]);
          p[1] = fmaf(sc[1][i].x, s[set][2 + i], p[1]);
        }
      }
      const int src = (lane & ~3) | q;
      p[0] = __shfl_sync(0xffffffffu, p[0], src);
      p[1] = __shfl_sync(0xffffffffu, p[1], src);
    }
  }
}

// A warp's first chunk of x at k0 as its partial reads it (one_token_x.cuh: RawFirst), where
// `load`: lane_halves' two float4s for the folded types, columns_partial's two fragments for the
// others (float4 4 s + t of step s).
template <DType D>
__device__ __forceinline__ RawFirst load_first_x(const float* row, int k0, bool load) {
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  if constexpr (kFold<D>) {
    return XRaw::load_first_halves(row, k0, load);
  } else {
    static_assert(kChunk / Tiled<D>::kGroup / 8 * (Tiled<D>::kGroup / 16) == 2,
                  "a lane takes two fragments a chunk");
    return load_raw_first(row, k0, 4 * columns_step<D>(g, 0) + t, 4 * columns_step<D>(g, 1) + t,
                          load);
  }
}

// Row tiles a block takes for K of n_chunks chunks: one while K gives every warp a chunk (or
// more), else as many as keep the warps busy (3 chunks: 2 tiles, 6 warps; 1 chunk: 8 tiles).
// At one token a block's time is a round's latency whatever its work, so a short K (MoE experts:
// Qwen3-30B-A3B's down, K = 768, 3 of 8 warps busy) took three times the blocks, and waves, it
// needs. A tile's chunk partials and their fold are the same either way (the same bits).
__host__ __device__ constexpr int tiles_per_block(int n_chunks) {
  return n_chunks > kWarps / 2 ? 1 : kWarps / n_chunks;
}

// A warp's chunk in the first (with several tiles a block, the only) round: chunk `warp` of the
// block's tile, or chunk warp % n_chunks of its tile warp / n_chunks. has: the warp has one.
struct FirstChunk {
  int tile, c;
  bool has;
};

__device__ __forceinline__ FirstChunk first_chunk(int block_index, int pack, int n_chunks,
                                                  int tiles, int warp) {
  if (pack > 1) {
    const int tile = block_index * pack + warp / n_chunks;
    return {tile, warp % n_chunks, warp < pack * n_chunks && tile < tiles};
  }
  return {block_index, warp, warp < n_chunks};
}

// A warp's first chunk of block `block` of a plain product, loaded before the wait (EarlyChunk,
// tiled_chunk.cuh): not in expert mode, whose matrix comes from the router's output.
template <DType D>
__device__ __forceinline__ EarlyChunk<D> early_chunk(const MatmulArgs& x, const MultiOut& outs,
                                                     int pack, bool load, int block) {
  if (!load) return {};
  MatmulArgs a = x;
  const int o = take_output(outs, outs.tile_begin, block, a);
  const int n_chunks = a.n_in / kChunk;
  const FirstChunk f = first_chunk(block - outs.tile_begin[o], pack, n_chunks, (a.n_out + 15) / 16,
                                   static_cast<int>(threadIdx.x) >> 5);
  return load_early<D>(a.w, f.tile, f.c, n_chunks, f.has);
}

// Block `block_index` of one output's product (a: that output's, after take_output and, in expert
// mode, its pair's matrix and rows; x: where its x comes from, one_token_x.cuh): `pack` row tiles,
// or one tile in free rounds (`free`) or barrier rounds. first: the warp's first chunk where it
// was loaded before the wait. part: the round buffers (Sum::kSmemFloats floats of shared memory),
// chunk_slots: the free rounds' slots past them (dynamic shared memory). Ends with the block's
// rows of y written; lets dependents start (Trigger::late) before the last sums.
template <DType D, typename X>
__device__ __forceinline__ void block_product(const MatmulArgs& a, const X& x, int block_index,
                                              int pack, bool free, const EarlyChunk<D>& first,
                                              float* part, float* chunk_slots) {
  using T = Tiled<D>;
  const int tiles = (a.n_out + 15) / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_chunks = a.n_in / kChunk;
  const bool by_chunk = free && pack == 1;  // (packed blocks have one round either way)
  float* chunk_parts = Sum::slots(n_chunks, part, chunk_slots);  // the free rounds' slots
  float* parts = by_chunk ? chunk_parts : part;
  // This warp's partial of chunk c (its quants in cur; x read through xs: x, or x.first_round()
  // for the warp's first chunk) into parts[slot] (lanes t == 0 hold it).
  auto chunk_partial = [&](const auto& xs, const LaneChunk<D>& cur, int c, int slot) {
    const int k0 = c * kChunk;
    float p[2];
    if constexpr (kFold<D>) {
      // The folded order (fold.cuh) is one chain over the chunk: the token in column 0.
      float f[4];
      fold_partial(xs, cur, lane, k0, f);
      p[0] = f[0];
      p[1] = f[2];
    } else {
      columns_partial(xs, cur, lane, k0, p);
    }
    if (t == 0) {
      float* mine = parts + slot * Sum::kPartFloats;
      mine[g] = p[0];
      mine[g + 8] = p[1];
    }
  };
  auto record = [&](int tile, int c) {
    return a.w + (static_cast<int64_t>(tile) * n_chunks + c) * T::kBytes;
  };

  // The first round, from the chunk loaded before the wait where there is one. (Peeled from the
  // loop below, so that chunk's registers are not held across the other rounds.)
  const FirstChunk f = first_chunk(block_index, pack, n_chunks, tiles, warp);
  LaneChunk<D> cur = first.chunk;
  if (f.has && !first.loaded) cur.load(record(f.tile, f.c), lane);
  if (by_chunk) {
    // Every chunk of the warp in turn, each partial in its chunk's slot; no barrier between.
    if (f.has) chunk_partial(x.first_round(), cur, f.c, f.c);
    for (int c = warp + kWarps; c < n_chunks; c += kWarps) {
      cur.load(record(block_index, c), lane);
      chunk_partial(x, cur, c, c);
    }
    __syncthreads();                 // every chunk's partial is written
    detail::let_dependents_start();  // Trigger::late: only the sums and writes are left
    Sum::fold_write_chunks(a, chunk_parts, n_chunks, block_index * 16);
    return;
  }
  if (f.has) chunk_partial(x.first_round(), cur, f.c, warp);
  __syncthreads();                   // the first round's partials are all written
  if (pack > 1) {                    // that was the only round
    detail::let_dependents_start();  // Trigger::late: only the sums and writes are left
    Sum{part}.fold_write_packed(a, block_index * pack * 16, pack, n_chunks);
    return;
  }
  const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
  Sum sum{part};
  sum.fold(0, n_chunks);
  // Each warp walks its chunks one round at a time. (Loading the next chunk's quants before
  // computing the current one was measured 2-22% slower per matrix on the H200: the extra
  // registers cost more than the loads in flight gained.)
  for (int r = 1; r < n_rounds; ++r) {
    const int c = r * kWarps + warp;
    if (c < n_chunks) {
      cur.load(record(block_index, c), lane);
      chunk_partial(x, cur, c, (r & 1) * kWarps + warp);
    }
    __syncthreads();  // round r's partials are all written
    sum.fold(r, n_chunks);
  }
  detail::let_dependents_start();  // Trigger::late: only the writes are left
  sum.write(a, block_index * 16);
}

}  // namespace memra::kernels::matmul_detail::single_decode
