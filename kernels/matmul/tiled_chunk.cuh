// Private to kernels/matmul: one warp's chunk partial p_c (matmul.cu's canonical order) of one
// 16-row tile over tiled weights (tiled.cuh), shared by the decode kernels that read records and x
// from global memory (matmul_decode_tiled.cu) and from shared-memory stages
// (matmul_decode_cluster.cu), so both compute every partial with the same instructions on the
// same operands.
#pragma once

#include "kernels/matmul/decode_common.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels::matmul_detail {

// A lane's part of one tile record: its quants for the chunk's 16 steps and its rows' heads.
// `rec` may point to global or shared memory.
template <DType D>
struct LaneChunk {
  using T = Tiled<D>;
  typename T::Quad quad[4];
  typename T::Head head[2];  // rows g and g + 8

  // kStream: rec is in global memory, read once a launch (tiled.cuh's kRecordUse); false for a
  // shared-memory stage (the cluster kernel), where the loads stay plain.
  template <bool kStream = true>
  __device__ __forceinline__ void load(const uint8_t* rec, int lane) {
#pragma unroll
    for (int u = 0; u < 4; ++u) quad[u] = T::template load<kStream>(rec, u, lane);
    head[0] = T::template head<kStream>(rec, lane >> 2);
    head[1] = T::template head<kStream>(rec, (lane >> 2) + 8);
  }
};

// A warp's first chunk of a decode product, loaded before the kernel waits for the one before it
// (detail::wait_for_inputs). Why: the kernel before a layer's product is a small one (a norm, the
// f16 preparation of x) that lets its dependents start at once (launch.cuh), so the product's
// blocks are resident while it runs, and their first round of weights (all of them where K is
// 1,024, half of q/k/v's at the 8B shape) can be in flight instead of waiting for x. Weights are
// constants of a step: uploaded and tiled before any product runs (matmul_tile synchronizes),
// which is what makes this the one read before a wait that scripts/check_kernels.py allows.
// loaded: false where the warp has no first chunk or the kernel loads after the wait
// (MEMRA_EARLY_WEIGHTS=0).
template <DType D>
struct EarlyChunk {
  LaneChunk<D> chunk;
  bool loaded;
};

// Chunk c of tile `tile` of w (n_chunks chunks a tile) when `load`.
template <DType D>
__device__ __forceinline__ EarlyChunk<D> load_early(const uint8_t* w, int tile, int c, int n_chunks,
                                                    bool load) {
  EarlyChunk<D> e{};
  if (load) {
    e.chunk.load(w + (static_cast<int64_t>(tile) * n_chunks + c) * Tiled<D>::kBytes,
                 static_cast<int>(threadIdx.x) & 31);
    e.loaded = true;
  }
  return e;
}

// MEMRA_EARLY_WEIGHTS=0: every chunk loaded after the wait (the A/B; the same bits).
bool early_weights_enabled();

// acc[n] += k16 steps s0 .. s0 + kSteps - 1 of the chunk for each token tile n: one mma chain per
// tile in step order (the whole chunk for F16/BF16 and the folded types, one scale group for the
// other quantized types). xf(n, s): the lane's B fragment of token tile n, step s (zero past the
// batch). fold: the rows' headers, whose group scales multiply A (fold.cuh).
template <DType D, int kNT, int kSteps, typename XF>
__device__ __forceinline__ void mma_steps(const LaneChunk<D>& cur, XF&& xf, int s0,
                                          float (&acc)[kNT][4], const FoldRow* fold = nullptr) {
#pragma unroll
  for (int u = 0; u < kSteps; ++u) {
    const int s = s0 + u;
    uint32_t af[4];
    if constexpr (kFold<D>)
      Tiled<D>::folded_frag(cur.quad[s >> 2], s & 3, fold_scales(fold[0], fold[1], s >> 1), af);
    else
      Tiled<D>::frag(cur.quad[s >> 2], s & 3, af);
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const uint2 b = xf(n, s);
      mma_f16(acc[n], af, b.x, b.y);
    }
  }
}

// The chunk at k0 of the lane's tile: acc[n] = p_c for token tile n (from +0), tokens tok0 + 8n ..
// of a. xf: the B fragments (mma_steps); a: the group sums of x (xsum) the folded types' mins take.
template <DType D, int kNT, typename XF>
__device__ __forceinline__ void chunk_partial(const MatmulArgs& a, const LaneChunk<D>& cur, XF&& xf,
                                              int lane, int k0, float (&acc)[kNT][4],
                                              int tok0 = 0) {
  using T = Tiled<D>;
  constexpr int kGroupSteps = T::kGroup / 16;
  constexpr int kGroups = kChunk / T::kGroup;  // 8 or 16 per chunk
  const int g = lane >> 2, t = lane & 3;
  if constexpr (!T::kScaled) {
    mma_steps<D, kNT, kChunk / 16>(cur, xf, 0, acc);
  } else if constexpr (kFold<D>) {  // s into acc (the caller's +0), then the chunk's end
    const FoldRow rows[1][2] = {{fold_row(cur.head[0]), fold_row(cur.head[1])}};
    mma_steps<D, kNT, kChunk / 16>(cur, xf, 0, acc, rows[0]);
    uint2 bb[kNT];
    bias_b_tiles(a, tok0, k0 / kChunk, g, t, bb);
    fold_tiles(reinterpret_cast<float(&)[1][kNT][4]>(acc), rows, bb, t);
  } else {
    static_assert(!T::kBias, "the tiled type with mins (Q4_K) takes the folded order (fold.cuh)");
    // Lane t decodes groups t, t + 4, ... of its two rows; the quad's other lanes shuffle them.
    float2 own[2][kGroups / 4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int i = 0; i < kGroups / 4; ++i) own[h][i] = T::scale(cur.head[h], 4 * i + t);
    }
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      const int src = (lane & ~3) | (j & 3);
      float2 sc[2];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        sc[h] = make_float2(__shfl_sync(0xffffffffu, own[h][j >> 2].x, src), 0.0f);
      float grp[kNT][4] = {};
      mma_steps<D, kNT, kGroupSteps>(cur, xf, j * kGroupSteps, grp);
#pragma unroll
      for (int n = 0; n < kNT; ++n) apply_group<false>(acc[n], grp[n], sc[0], sc[1], {});
    }
  }
}

// The folded chunk partial (fold.cuh) of one token in the mma's column 0: p's registers 0 and 2 in
// lanes t == 0 hold rows g and g + 8. The one-token kernel's form of chunk_partial<D, 1> for the
// folded types (matmul_decode_single.cu), with the same operands in the same steps, so the same
// bits. x: where the token's x comes from (one_token_x.cuh: XPrepared, XRaw).
template <DType D, typename X>
__device__ __forceinline__ void fold_partial(const X& x, const LaneChunk<D>& cur, int lane, int k0,
                                             float (&p)[4]) {
  static_assert(kFold<D>, "the folded types");
  const int t = lane & 3;
  uint2 bb;
  const auto xf = x.fold_operands(k0, lane, bb);  // the token's B fragments, before the decoding
  const FoldRow rows[2] = {fold_row(cur.head[0]), fold_row(cur.head[1])};
  float s[4] = {};
#pragma unroll
  for (int st = 0; st < kChunk / 16; ++st) {
    uint32_t af[4];
    Tiled<D>::folded_frag(cur.quad[st >> 2], st & 3, fold_scales(rows[0], rows[1], st >> 1), af);
    mma_f16(s, af, xf[st].x, xf[st].y);
  }
  uint32_t ba[4];
  bias_a(rows[0], rows[1], t, ba);
  float b[4] = {};
  mma_f16(b, ba, bb.x, bb.y);
  fold_chunk(p, s, b, rows[0], rows[1]);
}

}  // namespace memra::kernels::matmul_detail
