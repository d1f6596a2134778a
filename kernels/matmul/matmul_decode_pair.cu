// The tiled decode kernel's pair form (MEMRA_TILED_PAIR_X; large launches by default): at 5-8
// tokens a block takes two neighbouring 16-row tiles of one output, and each chunk's x rows (8
// tokens x 512 bytes of f16) come from L2 once into shared memory for both tiles, instead of once
// per tile into each warp's registers.
//
// Why. At 8 tokens a one-token-tile warp (matmul_decode_tiled.cu) reads 4 KB of x a chunk beside
// 2.3 KB of Q4_K weights: the 8B output matrix's launch moves 622 MB of x through L2 for 311 MB of
// weights, and the products take 12-16% longer at 8 tokens than at 4 on the same weights and the
// same instruction count (H100, docs/PERFORMANCE.md forty-fifth round), which pointed at x's bytes.
// Measured (forty-sixth round): the output matrix gains 5-14%, the small launches lose (see
// pair_min_tiles).
// Here warps 2j and 2j + 1 (pair j) take chunks c = j, j + 4, ... of tiles 2p and 2p + 1; the
// pair copies chunk c's x into one of its two stages (cp.async, 16 bytes a copy; rows padded to
// 544 bytes, so that a warp's fragment reads meet no bank twice), meets at a 64-thread barrier,
// and each warp reads its B fragments from the stage. Each chunk partial is chunk_partial's on
// the same operands (the same fragments, read from shared memory), stored in its tile's slot and
// summed in chunk order as ChunkSum::fold_write_chunks sums them: the same bits as every other
// kernel (kernel-check compares them).
#include <atomic>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kPairWarps = 8, kPairThreads = 32 * kPairWarps, kPairs = kPairWarps / 2;
constexpr int kStageRow = kChunk * 2 + 32;  // a token's chunk of f16 x, padded
constexpr int kStageBytes = 8 * kStageRow;  // a chunk's x rows: 8 tokens
constexpr int kStagesBytes = kPairs * 2 * kStageBytes;
// At most: K up to 32,256, within every sm_80+ part's opt-in limit (163 KB on an A100).
constexpr int kPairSmemLimit = 160 * 1024;
using TileSum = ChunkSum<kPairWarps, 16, 8>;  // kPartFloats: one tile's chunk partial

// Dynamic shared memory of a launch over K = n_in: the pairs' two stages each, then both tiles'
// chunk slots ([tile][chunk][kPartFloats]).
int pair_smem_bytes(int64_t n_in) {
  return kStagesBytes + 2 * static_cast<int>(n_in / kChunk) * TileSum::kPartFloats * 4;
}

// The 64 threads of pair j (barrier j + 1; 0 is __syncthreads').
__device__ __forceinline__ void pair_barrier(int pair) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(pair + 1) : "memory");
}

// Chunk c's x rows of a's tokens into `stage` (zeros past the batch, as x_frag's: a copy of 0
// source bytes from token 0's row): 256 copies of 16 bytes, 4 for each of the pair's threads (p:
// 0..63), one commit group.
__device__ __forceinline__ void stage_x(const MatmulArgs& a, int c, int p, unsigned char* stage) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int piece = p + 64 * i, tok = piece >> 5, seg = piece & 31;
    const bool real = tok < a.n_tokens;
    cp_async16(stage + tok * kStageRow + seg * 16,
               a.xh + static_cast<int64_t>(real ? tok : 0) * a.n_in + c * kChunk + seg * 8,
               real ? 16 : 0);
  }
  cp_async_commit();
}

// Block b's place: output o (a's w, y, n_out, ldy set to it), its first tile, and this warp's
// tile (tile0 + warp % 2).
struct PairPlace {
  int tile0, tile;
  bool has;  // the output has this warp's tile (an odd tile count leaves the last one alone)
};
__device__ __forceinline__ PairPlace pair_place(const MultiOut& outs, int b, MatmulArgs& a) {
  const int o = take_output(outs, outs.tile_begin, b, a);
  PairPlace p;
  p.tile0 = 2 * (b - outs.tile_begin[o]);
  p.tile = p.tile0 + ((static_cast<int>(threadIdx.x) >> 5) & 1);
  p.has = p.tile < (a.n_out + 15) / 16;
  return p;
}

// A warp's first chunk (chunk j of its tile), loaded before the wait where `load` (EarlyChunk:
// weights only).
template <DType D>
__device__ __forceinline__ EarlyChunk<D> early_pair_chunk(const MatmulArgs& x, const MultiOut& outs,
                                                          bool load) {
  if (!load) return {};
  MatmulArgs a = x;
  const PairPlace p = pair_place(outs, static_cast<int>(blockIdx.x), a);
  const int n_chunks = a.n_in / kChunk, pair = static_cast<int>(threadIdx.x) >> 6;
  return load_early<D>(a.w, p.tile, pair, n_chunks, p.has && pair < n_chunks);
}

// outs: tile_begin counts blocks of two tiles (pack_blocks(outs, 2)). early: round 0's weights
// loaded before the wait.
template <DType D>
__global__ void __launch_bounds__(kPairThreads, 3)
    pair_decode_kernel(const MatmulArgs x, const MultiOut outs, bool early) {
  const EarlyChunk<D> first = early_pair_chunk<D>(x, outs, early);
  detail::wait_for_inputs(detail::Trigger::late);
  extern __shared__ __align__(16) unsigned char pair_smem[];
  MatmulArgs a = x;
  const PairPlace place = pair_place(outs, static_cast<int>(blockIdx.x), a);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int pair = warp >> 1, half = warp & 1;
  const int n_chunks = a.n_in / kChunk;
  unsigned char* stages = pair_smem + pair * 2 * kStageBytes;
  float* slots = reinterpret_cast<float*>(pair_smem + kStagesBytes);
  float* mine = slots + half * n_chunks * TileSum::kPartFloats;
  const uint8_t* tile_w = a.w + static_cast<int64_t>(place.tile) * n_chunks * Tiled<D>::kBytes;

  LaneChunk<D> cur = first.chunk;
  for (int c = pair, k = 0; c < n_chunks; c += kPairs, ++k) {
    unsigned char* stage = stages + (k & 1) * kStageBytes;
    // The weights first (DRAM), then x (L2) behind them. The stage rewritten here was read at
    // chunk k - 2, which both warps finished before meeting at chunk k - 1's barrier.
    if (place.has && (k > 0 || !first.loaded))
      cur.load(tile_w + static_cast<int64_t>(c) * Tiled<D>::kBytes, lane);
    stage_x(a, c, half * 32 + lane, stage);
    cp_async_wait<0>();
    pair_barrier(pair);  // the pair's copies of chunk c have landed
    if (place.has) {
      float acc[1][4] = {};  // p_c of the warp's tile, one token tile
      const unsigned char* row = stage + g * kStageRow + 8 * t;
      chunk_partial<D, 1>(
          a, cur, [&](int, int s) { return *reinterpret_cast<const uint2*>(row + 32 * s); }, lane,
          c * kChunk, acc);
      TileSum::store_at(mine + c * TileSum::kPartFloats,
                        reinterpret_cast<const float(&)[1][1][4]>(acc), g, t);
    }
  }
  __syncthreads();                 // every chunk's partial of both tiles is written
  detail::let_dependents_start();  // Trigger::late: only the sums and writes are left
  // Threads [128 h, 128 h + 128) sum and write tile h.
  static_assert(2 * TileSum::kPartFloats == kPairThreads, "a thread an element of both tiles");
  const int h = static_cast<int>(threadIdx.x) / TileSum::kPartFloats;
  TileSum::fold_write_chunks(a, slots + h * n_chunks * TileSum::kPartFloats, n_chunks,
                             (place.tile0 + h) * 16,
                             static_cast<int>(threadIdx.x) - h * TileSum::kPartFloats);
}

// 0: off; 1: launches that do not take the tiled kernel's ahead form; 2: every launch; 3 (`big`,
// the default): launches that do not take the ahead form, of pair_min_tiles or more row tiles.
int pair_x_mode() {
  static const int mode = env_choice("MEMRA_TILED_PAIR_X", {"0", "1", "all", "big"}, 3);
  return mode;
}

// The row tiles from which a launch gains from the pair form, measured at 8 tokens (H100,
// memra-kernel-bench, us, one-token tiles -> pairs; docs/PERFORMANCE.md, forty-sixth round): Q4_K
// gains only on the output matrix (9,496 tiles: 152 -> 138; gate's 768 18.8 -> 19.3, q/k/v's 384
// 11.9 -> 12.6), Q6_K from gate (26.2 -> 23.0; output 220 -> 188; q/k/v 15.0 -> 16.1), Q8_0 on
// every shape (q/k/v 16.2 -> 15.2, gate 27.1 -> 25.1, output 240 -> 228). Whole 8B Q4_K_M steps
// of 6 and 8 sequences lost 4-5% with pairs on every launch without the ahead form (not measured
// why; the form halves the blocks of the model's small launches, v alone: 32 blocks), so the rule
// takes the large launches only, a block count of several waves either way: 8B Q8_0 at 8
// sequences +3.4%, Q4_K_M +0.3%.
template <DType D>
constexpr int64_t pair_min_tiles() {
  return D == DType::q4_k ? 4096 : 1024;
}

}  // namespace

template <DType D>
bool pair_x_takes(const MatmulArgs& x, bool ahead, int64_t tiles) {
  const int mode = pair_x_mode();
  if (mode == 0 || (mode != 2 && ahead) || (mode == 3 && tiles < pair_min_tiles<D>())) return false;
  return x.n_tokens >= 5 && x.n_tokens <= 8 && pair_smem_bytes(x.n_in) <= kPairSmemLimit &&
         reinterpret_cast<uintptr_t>(x.xh) % 16 == 0;  // (the stages' 16-byte copies)
}

template <DType D>
void launch_decode_pair(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const MultiOut pairs = pack_blocks(outs, 2);
  const auto blocks = static_cast<unsigned>(pairs.tile_begin[pairs.n]);
  const int smem = pair_smem_bytes(x.n_in);
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(pair_decode_kernel<D>, kPairSmemLimit, smem_set);
  if (blocks > 0)
    detail::launch(pair_decode_kernel<D>, blocks, kPairThreads, smem, stream, x, pairs,
                   early_weights_enabled());
}

#define MEMRA_INSTANTIATE(D)                                       \
  template bool pair_x_takes<D>(const MatmulArgs&, bool, int64_t); \
  template void launch_decode_pair<D>(const MatmulArgs&, const MultiOut&, cudaStream_t);
MEMRA_INSTANTIATE(DType::q4_k)
MEMRA_INSTANTIATE(DType::q6_k)
MEMRA_INSTANTIATE(DType::q8_0)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
