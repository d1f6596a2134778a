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
#include <cooperative_groups.h>

#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
using Sum = ChunkSum<kWarps, 16, 1>;

// The chunk partial of rows g, g + 8 with scale groups in the mma's columns (types in the
// per-group order): p[0], p[1] in every lane of the quad.
template <DType D>
__device__ __forceinline__ void columns_partial(const MatmulArgs& a, const LaneChunk<D>& cur,
                                                int lane, int k0, float (&p)[2]) {
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
      xf[set][u] = x_frag(a, 0, 0, t, k0, ((8 * set + g) * kGroupSteps) + u, kChunk / 16);
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

// Chunk c's partial of rows g, g + 8 of row tile `tile` (p[0], p[1] in the quad's lanes t == 0 at
// least): what every block shape of this file folds.
template <DType D>
__device__ __forceinline__ void tile_chunk_partial(const MatmulArgs& a, int tile, int c,
                                                   int n_chunks, int lane, float (&p)[2]) {
  using T = Tiled<D>;
  const uint8_t* w = a.w + (static_cast<int64_t>(tile) * n_chunks + c) * T::kBytes;
  const int k0 = c * kChunk;
  LaneChunk<D> cur;
  cur.load(w, lane);
  if constexpr (kFold<D>) {
    // The folded order (fold.cuh) is one chain over the chunk: the token in column 0.
    float f[4];
    fold_partial(a, cur, lane, k0, f);
    p[0] = f[0];
    p[1] = f[2];
  } else {
    columns_partial(a, cur, lane, k0, p);
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
// MEMRA_SINGLE_PACK=0: one tile a block for any K (the A/B; the same bits).
bool pack_enabled() {
  static const bool enabled = env_switch("MEMRA_SINGLE_PACK", true);
  return enabled;
}

// kExperts: MultiOut's expert mode, where a block first finds its pair's expert matrix, x row and
// y row; the arithmetic after that is the same code. outs.tile_begin counts blocks here (the
// launchers' pack_blocks), `pack` tiles a block.
template <DType D, bool kExperts>
__global__ void __launch_bounds__(kThreads, 3)
    single_decode_kernel(const MatmulArgs x, const MultiOut outs, int pack) {
  detail::wait_for_inputs(detail::Trigger::late);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.tile_begin, static_cast<int>(blockIdx.x), a);
  const int tiles = (a.n_out + 15) / 16;
  int block_index = static_cast<int>(blockIdx.x) - outs.tile_begin[o];
  if constexpr (kExperts) {
    const int blocks = (tiles + pack - 1) / pack;  // a pair's
    const int pair = block_index / blocks;
    block_index -= pair * blocks;
    a.w += static_cast<int64_t>(__ldg(outs.ids + pair)) * outs.expert_bytes[o];
    a.y += static_cast<int64_t>(pair) * a.ldy;
    const int64_t row = pair / outs.x_div;
    a.xh += row * a.n_in;
    a.xsum += row * a.xsum_stride;
    a.xinv += row;
  }
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_chunks = a.n_in / kChunk;
  // This warp's chunk partial of tile `tile` into part[slot] (lanes t == 0 hold it).
  auto chunk_partial = [&](int tile, int c, int slot) {
    float p[2];
    tile_chunk_partial<D>(a, tile, c, n_chunks, lane, p);
    if (t == 0) {
      float* mine = part + slot * Sum::kPartFloats;
      mine[g] = p[0];
      mine[g + 8] = p[1];
    }
  };

  if (pack > 1) {  // one round: warp w runs chunk w % n_chunks of the block's tile w / n_chunks
    const int tile = block_index * pack + warp / n_chunks;
    if (warp < pack * n_chunks && tile < tiles) chunk_partial(tile, warp % n_chunks, warp);
    __syncthreads();
    detail::let_dependents_start();  // Trigger::late: only the sums and writes are left
    Sum{part}.fold_write_packed(a, block_index * pack * 16, pack, n_chunks);
    return;
  }
  const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
  Sum sum{part};
  // Each warp walks its chunks one round at a time. (Loading the next chunk's quants before
  // computing the current one was measured 2-22% slower per matrix on the H200: the extra
  // registers cost more than the loads in flight gained.)
  for (int r = 0; r < n_rounds; ++r) {
    const int c = r * kWarps + warp;
    if (c < n_chunks) chunk_partial(block_index, c, (r & 1) * kWarps + warp);
    __syncthreads();  // round r's partials are all written
    sum.fold(r, n_chunks);
  }
  detail::let_dependents_start();  // Trigger::late: only the writes are left
  sum.write(a, block_index * 16);
}

// A row tile's chunks split over the blocks of a thread block cluster (blockIdx.x: the tile
// times the cluster's size, plus the block's rank), for products of too few row tiles to fill the
// GPU's block slots (a layer's o and down projections at one token, K of 4,096-12,288 in 16-48
// chunks a tile: 256 blocks, two thirds of a wave, each walking 2-6 rounds). Block q computes
// chunks [q per, (q + 1) per) with the single kernel's arithmetic (tile_chunk_partial) into its
// shared memory; after a cluster barrier, block 0's first 16 threads fold every chunk's partial in
// chunk order from the blocks' shared memory (the same chain as ChunkSum's fold, so the same bits)
// and write the rows.
template <DType D>
__global__ void __launch_bounds__(kThreads, 3)
    split_decode_kernel(const MatmulArgs x, const MultiOut outs) {
  detail::wait_for_inputs(detail::Trigger::late);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) float parts[];  // [chunk - begin][row]: this block's partials
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  MatmulArgs a = x;
  const int tile_block = static_cast<int>(blockIdx.x) / split;
  const int o = take_output(outs, outs.tile_begin, tile_block, a);
  const int tile = tile_block - outs.tile_begin[o];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_chunks = a.n_in / kChunk, per = (n_chunks + split - 1) / split;
  const int begin = rank * per, end = min(n_chunks, begin + per);
  for (int c = begin + warp; c < end; c += kWarps) {
    float p[2];
    tile_chunk_partial<D>(a, tile, c, n_chunks, lane, p);
    if (t == 0) {
      parts[(c - begin) * 16 + g] = p[0];
      parts[(c - begin) * 16 + g + 8] = p[1];
    }
  }
  cluster.sync();                  // every block's partials are in its shared memory
  detail::let_dependents_start();  // Trigger::late: only the fold and the writes are left
  if (rank == 0 && threadIdx.x < 16) {
    const int row = tile * 16 + static_cast<int>(threadIdx.x);
    float total = 0.0f;
#pragma unroll 8
    for (int c = 0; c < n_chunks; ++c) {
      const float* src = cluster.map_shared_rank(parts + (c % per) * 16 + threadIdx.x, c / per);
      const float v = *src;
      total = c == 0 ? v : __fadd_rn(total, v);
    }
    if (row < a.n_out) a.y[row] = total * a.xinv[0];
  }
  cluster.sync();  // no block leaves while block 0 may still read its partials
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

// MEMRA_SINGLE_SPLIT=2|3|4: one-token products of fewer row tiles than three blocks an SM take
// split_decode_kernel with a tile's chunks over that many blocks (unset or 1: never, the default
// until measured; the same bits either way).
int split_blocks() {
  static const int n = [] {
    const char* v = std::getenv("MEMRA_SINGLE_SPLIT");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return 1;
    for (const char* ok : {"2", "3", "4"})
      if (std::strcmp(v, ok) == 0) return *ok - '0';
    fail(ErrorCode::invalid_argument, "MEMRA_SINGLE_SPLIT={}: expected 1, 2, 3 or 4", v);
  }();
  return n;
}

// The split launch where split_blocks() takes the product: false where it does not.
template <DType D>
bool launch_split(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const int split = split_blocks();
  if (split <= 1) return false;
  const int tiles = outs.tile_begin[outs.n], n_chunks = static_cast<int>(x.n_in / kChunk);
  const int per = (n_chunks + split - 1) / split;
  const size_t smem = static_cast<size_t>(per) * 16 * sizeof(float);
  // At least half a round a block (K of 1,024, the 0.6B's, keeps its packed blocks).
  if (tiles <= 0 || per < kWarps / 2 || smem > 48 * 1024 ||
      tiles >= 3 * detail::multiprocessors() || !prefill_wgmma_available())
    return false;
  detail::launch_clustered(split_decode_kernel<D>, dim3(static_cast<unsigned>(tiles * split)),
                           dim3(kThreads), smem, stream, static_cast<unsigned>(split), x, outs);
  return true;
}

// outs with tile_begin turned from tiles into blocks of `pack` tiles (per pair in expert mode:
// n_pairs = an output's tiles / its matrix's tiles).
MultiOut pack_blocks(MultiOut outs, int pack) {
  int begin = 0;
  for (int o = 0; o < outs.n; ++o) {
    const int tiles = (outs.n_out[o] + 15) / 16;
    const int n = outs.tile_begin[o + 1] - outs.tile_begin[o];  // n_pairs * tiles, or tiles
    const int blocks = n / tiles * ((tiles + pack - 1) / pack);
    outs.tile_begin[o] = begin;
    begin += blocks;
  }
  outs.tile_begin[outs.n] = begin;
  return outs;
}

template <DType D, bool kExperts>
void launch_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const int pack = pack_enabled() ? tiles_per_block(static_cast<int>(x.n_in / kChunk)) : 1;
  const MultiOut m = pack_blocks(outs, pack);
  const auto blocks = static_cast<unsigned>(m.tile_begin[m.n]);
  if (blocks > 0)
    detail::launch(single_decode_kernel<D, kExperts>, blocks, kThreads, 0, stream, x, m, pack);
}

}  // namespace

bool single_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_SINGLE_DECODE", true);
  return enabled;
}

template <DType D>
void launch_decode_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  if (launch_split<D>(x, outs, stream)) return;
  launch_single<D, false>(x, outs, stream);
}

template <DType D>
void launch_decode_experts(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  launch_single<D, true>(x, outs, stream);
}

#define MEMRA_INSTANTIATE(D)                                                               \
  template void launch_decode_single<D>(const MatmulArgs&, const MultiOut&, cudaStream_t); \
  template void launch_decode_experts<D>(const MatmulArgs&, const MultiOut&, cudaStream_t);
MEMRA_INSTANTIATE(DType::q4_k)
MEMRA_INSTANTIATE(DType::q6_k)
MEMRA_INSTANTIATE(DType::q8_0)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
