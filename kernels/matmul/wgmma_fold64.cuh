// Private to kernels/matmul: what the two forms of the pipelined Q4_K wgmma kernel at 17-64 tokens
// share (matmul_wgmma_fold64.cu: 128-row blocks whose warpgroups walk every chunk of their rows;
// matmul_wgmma_fold64_split.cu: 64-row blocks whose two warpgroups take the chunks in turn): a
// stage's bulk copies, one chunk's wgmma chain and one chunk's end, operand for operand, so both
// forms give the same bits (fold_chunk_wgmma's arithmetic, summed in chunk order).
#pragma once

#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail::fold64 {

using T = Tiled<DType::q4_k>;
constexpr int kBN = 64;  // a block's tokens (the split form's token halves: kN = 32)
// One k16 step of a block's x of kN tokens (2 KB at 64), a chunk's 16 steps (32 KB).
template <int kN>
constexpr int kStepBytesOf = kN * 16 * 2;
template <int kN>
constexpr int kXStageOf = 16 * kStepBytesOf<kN>;
// The mins' B fragments of a chunk, [token][half] (bias_b_both): one uint4 a thread of 2 kN.
template <int kN>
constexpr int kXsOf = 2 * kN;
constexpr int kXsPerChunk = kXsOf<kBN>;
static_assert(kBN * 2 == kXpTokens, "a block's tokens are half of an xp tile");

// A stage of a block of kTiles m16 row tiles and kN tokens: the tiles' records of one chunk, then
// its x. In x's rows form (kRows) the x boxes need 1,024-byte alignment, which the records' sizes
// keep (a record is 2,304 bytes: whole kilobytes for any even kTiles).
template <int kTiles, int kN = kBN>
struct Stage {
  static_assert(kN == 64 || kN == 32, "64 tokens, or the split form's halves");
  static constexpr int kRecBytes = kTiles * T::kBytes;
  static constexpr int kBytes = kRecBytes + kXStageOf<kN>;
  static_assert(kTiles + kChunk / 16 <= 32, "one lane a copy");
  static_assert(kBytes % 128 == 0, "stages 128-byte aligned");
  static_assert(kRecBytes % 1024 == 0 && kBytes % 1024 == 0, "x's rows boxes 1,024-byte aligned");
};

// Templates, instantiated only by the kernels' sm_90a code.

// Warp `warp` of the kWarps that share a stage's copies issues its part of chunk c's into `stage`
// (completing on `bar`, which arm_stage has armed): tile records warp, warp + kWarps, ... (rows
// past the matrix repeat the last tile) and x pieces warp, warp + kWarps, ...: the 2 KB of each k16
// step's xp tile that hold the block's tokens, or (kRows) the rows form's 64-k x kN-token boxes of
// the chunk through xmap (x_rows_map for kN-token boxes; rows past the batch arrive as zeros, and
// the box's whole 128 kN bytes count). A lane a copy: the warp's tiles on its first lanes, its x
// pieces on the next.
// Why shared (fifty-first round): the kernels' first wgmma of a chunk waits for its whole
// warpgroup, and one warp issuing every copy (each a pass of an elect loop: the copies' operands
// go through the uniform registers one lane at a time) held the others there: 18% of the split
// form's warp samples, at 64 tokens on an H100.
template <int kTiles, bool kRows, int kN, int kWarps>
__device__ __forceinline__ void copy_chunk_part(const MatmulArgs& a, const CUtensorMap* xmap,
                                                uint8_t* stage, uint64_t* bar, int c, int row0,
                                                int tok0, int warp, int lane) {
  using S = Stage<kTiles, kN>;
  constexpr int kStep = kStepBytesOf<kN>;
  constexpr int kPieces = kRows ? kChunk / kXRowsK : kChunk / 16;
  constexpr int kWarpTiles = (kTiles + kWarps - 1) / kWarps;
  constexpr int kWarpPieces = (kPieces + kWarps - 1) / kWarps;
  static_assert(kWarpTiles + kWarpPieces <= 32, "one lane a copy");
  const int n_chunks = a.n_in / kChunk;
  if (lane < kWarpTiles) {
    const int i = warp + kWarps * lane;
    if (i < kTiles) {
      const int64_t tile = min(row0 / 16 + i, (a.n_out - 1) / 16);
      bulk_copy(stage + i * T::kBytes, a.w + (tile * n_chunks + c) * T::kBytes, T::kBytes, bar);
    }
  } else if (lane < kWarpTiles + kWarpPieces) {
    const int p = warp + kWarps * (lane - kWarpTiles);
    if (p >= kPieces) return;
    if constexpr (kRows)
      tensor_copy_2d(stage + S::kRecBytes + p * (kN * 128), xmap, c * kChunk + p * kXRowsK, tok0,
                     bar);
    else
      bulk_copy(stage + S::kRecBytes + p * kStep,
                a.xp + xp_offset(tok0, int64_t{c} * kChunk + 16 * p, a.n_in), kStep, bar);
  }
}

// Arms `bar` for a stage's copies (one thread: before the warps that issue them meet, so that the
// byte count is set before any copy completes).
template <int kTiles, int kN = kBN>
__device__ __forceinline__ void arm_stage(uint64_t* bar) {
  mbar_arrive_expect_tx(bar, Stage<kTiles, kN>::kBytes);
}

// One warp fills `stage` with chunk c, completing on `bar`: lane 0 arms it first (the warp meets
// before any copy is issued), then every copy of the chunk (copy_chunk_part's, one warp's share).
template <int kTiles, bool kRows = false, int kN = kBN>
__device__ __forceinline__ void copy_chunk(const MatmulArgs& a, const CUtensorMap* xmap,
                                           uint8_t* stage, uint64_t* bar, int c, int row0, int tok0,
                                           int lane) {
  if (lane == 0) arm_stage<kTiles, kN>(bar);
  __syncwarp();
  copy_chunk_part<kTiles, kRows, kN, 1>(a, xmap, stage, bar, c, row0, tok0, 0, lane);
}

// One chunk's wgmma chain into cur for a warp's m16 tile (rec: its record in the stage; X: the
// stage's x, in xp's layout or kRows the rows form's boxes; r_g, r_g8: its rows' headers), its 16
// steps in four groups of four. af: two sets of A fragments, set u % 2 for group u, so a set is
// rewritten only after the group before last has completed (wgmma_wait<1>). after_first(): what the
// warp does while the first group runs (the chunk before's end: it may read a completed accumulator
// set, never cur). The chunk completes here, not across a loop's back edge: a wgmma in flight there
// (or at any join) makes ptxas serialize them all (C7514).
// (kN8: the block's n8 token tiles, 8 or the token halves' 4.)
template <bool kRows, int kN8, typename AfterFirst>
__device__ __forceinline__ void chunk_chain(const uint8_t* rec, const uint8_t* X,
                                            const FoldRow& r_g, const FoldRow& r_g8, int lane,
                                            uint32_t (&af)[2][4][4], float (&cur)[kN8][4],
                                            AfterFirst&& after_first) {
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const T::Quad quad = T::load(rec, u, lane);
#pragma unroll
    for (int v = 0; v < 4; ++v)
      T::folded_frag(quad, v, fold_scales(r_g, r_g8, (4 * u + v) >> 1), af[u & 1][v]);
    wgmma_fence();
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const uint64_t desc = x_step_desc<kRows, 8 * kN8>(X, 4 * u + v);
      if (u == 0 && v == 0)
        wgmma_m64nk16<false>(cur, af[0][0], desc);
      else
        wgmma_m64nk16<true>(cur, af[u & 1][v], desc);
    }
    wgmma_commit();
    if (u == 0)
      after_first();
    else if (u < 3)
      wgmma_wait<1>();  // group u - 1 is done: its A set may be rewritten
    else
      wgmma_wait<0>();
  }
}

// A chunk's end for a warp's m16 tile (r_g, r_g8: its rows' headers; xs: the chunk's staged mins'
// fragments; s: its completed chain): the mins' step per n8 tile and p = fma(d, s, nb * b)
// (fold_tile's arithmetic), handed to add(n, p) n8 tile by tile. s is only read: an accumulator
// written by other instructions while the other set's wgmmas run makes ptxas serialize every
// wgmma (C7515).
template <int kN8, typename Add>
__device__ __forceinline__ void chunk_end(const FoldRow& r_g, const FoldRow& r_g8, const uint4* xs,
                                          int lane, const float (&s)[kN8][4], Add&& add) {
  const int g = lane >> 2, t = lane & 3;
  uint32_t ba[4];
  bias_a(r_g, r_g8, t, ba);
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
    const uint2 bb = reinterpret_cast<const uint2*>(xs + 2 * (8 * n + g) + (t & 1))[t >> 1];
    float b[4] = {0.0f, 0.0f, 0.0f, 0.0f}, p[4];
    mma_f16(b, ba, bb.x, bb.y);
    fold_chunk(p, s[n], b, r_g, r_g8);
    add(n, p);
  }
}
}  // namespace memra::kernels::matmul_detail::fold64
