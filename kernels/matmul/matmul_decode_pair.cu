// The decode matmul at 2-8 tokens over tiled K-quant weights (Q4_K, Q6_K, Q8_0) with two 16-row
// tiles a warp: each warp decodes chunk c of both tiles against one load of the chunk's x.
//
// Why. The tiled decode kernel (matmul_decode_tiled.cu) gives a block one tile and its warps the
// tile's chunks, so every warp loads its chunk's x for all the step's tokens: 16 B fragments of
// 8 tokens x 256 elements (4 KB) beside 2.3 KB of Q4_K weights. Over a matrix that is n_out x K
// bytes of x through L2 for the ~0.56 n_out x K bytes of weights, and at 8 sequences the 8B
// model's products took 0.71 ms a step more than the one-token kernel on the same weights
// (docs/PERFORMANCE.md, twenty-fourth round's step profile). Two tiles a warp halve that x
// traffic and double each warp's weight bytes in flight; at two blocks an SM (the second tile's
// registers) an SM keeps as many bytes in flight as before.
//
// The chunk partials are chunk_partial's (tiled_chunk.cuh) on the same operands, and the 32 rows'
// partials are summed in chunk order by ChunkSum: matmul.cu's canonical order, so the outputs are
// the other decode kernels' bits (kernel-check compares them).
#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
using Sum = ChunkSum<kWarps, 32, 8>;  // 32 rows x 8 tokens a warp's partial

// A warp's chunk of both tiles (the second absent past the matrix's last tile).
template <DType D>
struct PairChunk {
  LaneChunk<D> tile[2];
  bool loaded;

  __device__ __forceinline__ void load(const uint8_t* rec0, int64_t tile_stride, bool two,
                                       int lane) {
    tile[0].load(rec0, lane);
    if (two) tile[1].load(rec0 + tile_stride, lane);
    loaded = true;
  }
};

// Where block b's pair of tiles is: its output's args (a) and first tile.
struct PairPlace {
  MatmulArgs a;
  int tile0, tiles, n_chunks;
};

__device__ __forceinline__ PairPlace pair_place(const MatmulArgs& x, const MultiOut& outs) {
  PairPlace p{x, 0, 0, 0};
  const int b = static_cast<int>(blockIdx.x);
  const int o = take_output(outs, outs.tile_begin, b, p.a);
  p.tile0 = 2 * (b - outs.tile_begin[o]);
  p.tiles = (p.a.n_out + 15) / 16;
  p.n_chunks = p.a.n_in / kChunk;
  return p;
}

// The warp's round-0 chunks, loaded before the wait where `load` (EarlyChunk's contract: weights
// only, constants of the step).
template <DType D>
__device__ __forceinline__ PairChunk<D> early_pair(const MatmulArgs& x, const MultiOut& outs,
                                                   bool load) {
  PairChunk<D> e{};
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (!load) return e;
  const PairPlace p = pair_place(x, outs);
  if (warp < p.n_chunks) {
    const int64_t stride = static_cast<int64_t>(p.n_chunks) * Tiled<D>::kBytes;
    e.load(p.a.w + p.tile0 * stride + static_cast<int64_t>(warp) * Tiled<D>::kBytes, stride,
           p.tile0 + 1 < p.tiles, static_cast<int>(threadIdx.x) & 31);
  }
  return e;
}

// Block b: tiles 2b', 2b' + 1 of its output (b' its index there) over a's tokens. Two blocks an
// SM: 128 registers a thread hold both tiles' chunks and the x fragments.
template <DType D>
__global__ void __launch_bounds__(kThreads, 2)
    pair_decode_kernel(const MatmulArgs x, const MultiOut outs, bool early) {
  using T = Tiled<D>;
  const PairChunk<D> first = early_pair<D>(x, outs, early);
  detail::wait_for_inputs(detail::Trigger::late);
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  const PairPlace p = pair_place(x, outs);
  const MatmulArgs& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_rounds = (p.n_chunks + kWarps - 1) / kWarps;
  const bool two = p.tile0 + 1 < p.tiles;
  const int64_t stride = static_cast<int64_t>(p.n_chunks) * T::kBytes;
  const uint8_t* rows = a.w + p.tile0 * stride;
  Sum sum{part};
  // Chunk c's partials of both tiles (their quants in cur) into round r's slot.
  const auto chunk = [&](int r, int c, const PairChunk<D>& cur) {
    const int k0 = c * kChunk;
    uint2 xf[kChunk / 16];  // the chunk's x, one load for both tiles
#pragma unroll
    for (int s = 0; s < kChunk / 16; ++s) xf[s] = x_frag(a, 0, g, t, k0, s, kChunk / 16);
    const auto frag = [&](int, int s) { return xf[s]; };
    float acc[2][1][4] = {};
    chunk_partial<D, 1>(a, cur.tile[0], frag, lane, k0, acc[0]);
    if (two) chunk_partial<D, 1>(a, cur.tile[1], frag, lane, k0, acc[1]);
    sum.store(acc, r, warp, g, t);
  };
  // Round 0 peeled from the loop, so the chunks loaded before the wait do not hold their
  // registers over the later rounds.
  if (warp < p.n_chunks) {
    PairChunk<D> cur = first;
    if (!cur.loaded) cur.load(rows + static_cast<int64_t>(warp) * T::kBytes, stride, two, lane);
    chunk(0, warp, cur);
  }
  __syncthreads();  // round 0's partials are all written
  sum.fold(0, p.n_chunks);
  for (int r = 1; r < n_rounds; ++r) {
    const int c = r * kWarps + warp;
    if (c < p.n_chunks) {
      PairChunk<D> cur;
      cur.load(rows + static_cast<int64_t>(c) * T::kBytes, stride, two, lane);
      chunk(r, c, cur);
    }
    __syncthreads();  // round r's partials are all written
    sum.fold(r, p.n_chunks);
  }
  detail::let_dependents_start();  // Trigger::late: only the writes are left
  sum.write(a, p.tile0 * 16);      // rows past n_out (an absent second tile) are not written
}

}  // namespace

// MEMRA_PAIR_DECODE=1: 2-8 tokens over tiled K-quant weights take this kernel (the A/B, off by
// default until measured; the same bits either way).
bool pair_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_PAIR_DECODE", false);
  return enabled;
}

template <DType D>
void launch_decode_pair(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  MultiOut m = outs;  // tile_begin in tiles -> in blocks of two tiles
  int begin = 0;
  for (int o = 0; o < m.n; ++o) {
    m.tile_begin[o] = begin;
    begin += ((m.n_out[o] + 15) / 16 + 1) / 2;
  }
  m.tile_begin[m.n] = begin;
  if (begin > 0)
    detail::launch(pair_decode_kernel<D>, static_cast<unsigned>(begin), kThreads, 0, stream, x, m,
                   early_weights_enabled());
}

template void launch_decode_pair<DType::q4_k>(const MatmulArgs&, const MultiOut&, cudaStream_t);
template void launch_decode_pair<DType::q6_k>(const MatmulArgs&, const MultiOut&, cudaStream_t);
template void launch_decode_pair<DType::q8_0>(const MatmulArgs&, const MultiOut&, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
