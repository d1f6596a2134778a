// The decode matmul (1-64 tokens) over tiled weights (tiled.cuh): a block owns one 16-row tile
// and its warps take the tile's 256-element chunks in turn, as the ggml-layout decode kernel
// (matmul_decode.cu) does, but a warp loads a chunk's quants straight from global memory into
// registers (four coalesced 16-byte loads a lane, its rows' headers with them) instead of staging
// raw blocks in shared memory and picking quants out of them. The mma chains, group steps and chunk
// sums are the ggml kernels' exactly, on the same operands, so the outputs are bit-identical to
// them (matmul.cu's canonical order).
#include <atomic>
#include <type_traits>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/one_token_x.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail {
namespace {

template <DType D, int kNT>
struct TiledDecodeCfg {
  // One token tile: 8 warps at up to 80 registers, 3 blocks (24 warps) a SM: an 8B model's
  // 6144-row QKV (384 blocks) runs in one wave. A register prefetch of the warp's next chunk
  // (128 registers, 2 blocks a SM) measured 1-12% slower on every Qwen3-8B shape but Q4_K's
  // down and output projections (receipts/2026-11-30-kernel-bench.json,
  // docs/PERFORMANCE-HISTORY.md); the next chunk copied into a shared-memory stage a warp instead
  // (cp.async, no register cost) measured slower on every shape it took (H100, 8 tokens, us: Q4_K
  // gate 19.0 -> 21.4, Q8_0 gate 26.9 -> 31.9; 8B Q4_K_M c8 -5%; docs/PERFORMANCE.md,
  // forty-sixth round). Eight token tiles: 4 warps (their accumulators need the
  // registers). F16/BF16 records are 8 KB, a lane's chunk 64 registers: 2 blocks a SM, still 128 KB
  // of loads in flight per SM (4-warp blocks, 4 a SM, the 8B QKV in one wave instead of 1.45,
  // measured no faster: 19.6 vs 19.8 us on QKV, 35.7 vs 33.7 us on down, 8B BF16 decode 153 vs 159
  // tok/s). Two or four token tiles (9-16 tokens; the K-quants' 17-64 in token groups,
  // batch_token_tiles): 8 warps as for one tile, 2 blocks a SM at up to 128 registers (four tiles
  // spill 4-8 bytes for F16/BF16 and Q8_0, none for Q4_K and Q6_K).
  static constexpr int kWarps = kNT <= 4 ? 8 : 4;
  static constexpr int kMinBlocks = kNT == 1 && Tiled<D>::kScaled ? 3 : 2;
  // The ahead form (MEMRA_TILED_AHEAD, takes_ahead): two chunks a warp in registers, 2 blocks a SM.
  static constexpr int kMinBlocksAhead = 2;
  static constexpr int kThreads = kWarps * 32;
  using Sum = ChunkSum<kWarps, 16, 8 * kNT>;  // its partials: static shared memory
};

// MEMRA_TILED_ROUNDS: how a block of one or two token tiles (F16/BF16 at one token too; the
// K-quants' one-token products run matmul_decode_single.cu) sums its rounds of chunks: "free" (the
// default) or "barrier", as MEMRA_SINGLE_ROUNDS there: every chunk's partial in a slot of
// its own (n_chunks x 512 bytes a token tile) and one block barrier, or a barrier and a fold after
// every round. The same bits. Measured on the H200 (docs/PERFORMANCE.md, twenty-sixth round): Q4_K
// down at 8 tokens 26.7 -> 23.1 us, 8B Q4_K_M c8 1,911.7 -> 1,932.1 tok/s.
bool tiled_free_rounds() {
  static const bool free = env_choice("MEMRA_TILED_ROUNDS", {"barrier", "free"}, 1) == 1;
  return free;
}
// Whether a launch over K = n_in takes the free rounds (one or two token tiles; their slots
// within the kFreeSlotBytes of dynamic shared memory the kernels opt into: K up to 32,768 at one
// token tile, 16,384 at two), and the dynamic shared memory it needs: none where the slots fit the
// round buffers' static 8 or 16 KB (K up to 4,096).
constexpr int kFreeSlotBytes = 64 * 1024;
template <DType D, int kNT>
bool takes_free_rounds(int n_in) {
  return kNT <= 2 && tiled_free_rounds() &&
         n_in / kChunk * TiledDecodeCfg<D, kNT>::Sum::kPartFloats * 4 <= kFreeSlotBytes;
}
template <DType D, int kNT>
int free_rounds_smem(int n_in) {
  using Sum = typename TiledDecodeCfg<D, kNT>::Sum;
  return takes_free_rounds<D, kNT>(n_in) ? Sum::dynamic_slot_bytes(n_in / kChunk) : 0;
}
// MEMRA_TILED_AHEAD: how many chunks a warp of the scaled types' (Q8_0, the K-quants)
// one-token-tile blocks (2-8 tokens) holds in registers: 2 (the default: it loads its next chunk
// before multiplying the current one, the ahead form, 2 blocks a SM instead of 3) on single-output
// launches of at least 3 chunks a warp (K >= 6,144 at 8 warps: the 8B's down projection, 6 chunks a
// warp, one wave of 256 blocks); 1 (a chunk loaded, multiplied, then the next: the form before); or
// `all`: the ahead form from two chunks a warp (K >= 4,096), grouped launches too (the 8B's q/k/v
// and gate/up, o, v). Free rounds only. Why: such a block's warps walk their chunks one DRAM round
// trip after another, which a chunk in flight under the arithmetic overlaps. Each chunk's partial
// is the same mma chains on the same operands, stored in the same slot: the same bits. Measured on
// the H200 (docs/PERFORMANCE.md, forty-fifth round), 8 tokens, 2 -> 1: down Q4_K 21.3 vs 24.2 us,
// Q6_K 26.5 vs 32.5, Q8_0 26.5 vs 30.9; 8B Q4_K_M c8 2,089 vs 2,003 tok/s. `all` is slower on
// every shape it adds (q/k/v 11.2 -> 14.4 us for Q4_K, the output 148 -> 168): at two chunks a
// warp the third block a SM hides more than a chunk ahead does.
int tiled_ahead_rounds() {  // chunks a warp from which the form runs: 3 (=2), 2 (=all), 0 never
  static const int rounds = [] {
    const int i = env_choice("MEMRA_TILED_AHEAD", {"1", "2", "all"}, 1);
    return i == 0 ? 0 : i == 1 ? 3 : 2;
  }();
  return rounds;
}
// grouped: a MultiOut launch (q/k/v, gate/up), which only `all` takes.
template <DType D, int kNT>
bool takes_ahead(int n_in, bool grouped = false) {
  const int rounds = tiled_ahead_rounds();
  return kNT == 1 && Tiled<D>::kScaled && rounds > 0 && (!grouped || rounds == 2) &&
         takes_free_rounds<D, kNT>(n_in) &&
         n_in / kChunk >= rounds * TiledDecodeCfg<D, kNT>::kWarps;
}

// A block's free-round slots (ChunkSum::slots), or null for a barrier every round.
template <class Sum>
__device__ __forceinline__ float* chunk_slots(const MatmulArgs& a, bool free, float* part,
                                              float* dynamic) {
  if (!free) return nullptr;
  return Sum::slots(a.n_in / kChunk, part, dynamic);
}

// One block's 16-row tile (tile `tile_index` of a.w) over a's tokens (at most 8 kNT): the chunk
// partials in rounds, summed in chunk order (matmul.cu's canonical order), written to a.y.
// kTrigger: let the next kernel's blocks start before the writes (Trigger::late). first: the
// warp's round-0 chunk where the kernel loaded it before its wait (EarlyChunk). chunk_parts: the
// free rounds' slots (free_rounds_smem), or null for a barrier every round.
// kAhead (free rounds only): 2, a warp's next chunk loaded before the current one is multiplied
// (takes_ahead). x: where one token tile's x comes from (one_token_x.cuh: XPrepared over a, or
// XRaw); more token tiles read a's prepared form.
template <DType D, int kNT, bool kTrigger, int kAhead = 1, typename X = XPrepared>
__device__ __forceinline__ void tile_rows(const MatmulArgs& a, float* part, int tile_index,
                                          const EarlyChunk<D>& first, float* chunk_parts,
                                          const X& x) {
  static_assert(kAhead == 1 || (kAhead == 2 && kNT == 1), "the ahead form: one token tile");
  static_assert(kAhead == 1 || std::is_same_v<X, XPrepared>, "the ahead form: x prepared");
  using C = TiledDecodeCfg<D, kNT>;
  using T = Tiled<D>;
  constexpr int kWarps = C::kWarps;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_chunks = a.n_in / kChunk;
  const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
  const uint8_t* tile = a.w + static_cast<int64_t>(tile_index) * n_chunks * T::kBytes;
  typename C::Sum sum{part};

  auto record = [&](int c) { return tile + static_cast<int64_t>(c) * T::kBytes; };
  // Chunk c's partial (its quants in cur; one token tile's x read through xs: x, or
  // x.first_round() for the warp's first chunk) into round r's slot, or chunk c's (free rounds).
  auto chunk = [&](const auto& xs, int r, int c, const LaneChunk<D>& cur) {
    const int k0 = c * kChunk;
    float acc[1][kNT][4] = {};  // the chunk partial p_c (matmul.cu), one m16 tile
    if constexpr (kNT == 1) {
      const auto b1 = xs.column0_frags(k0, lane);
      chunk_partial<D, 1>(
          a, cur, [&](int, int s) { return b1[s]; }, lane, k0, acc[0]);
    } else {
      chunk_partial<D, kNT>(
          a, cur, [&](int n, int s) { return x_frag(a, n, g, t, k0, s, kChunk / 16); }, lane, k0,
          acc[0]);
    }
    if (chunk_parts != nullptr)
      C::Sum::store_at(chunk_parts + c * C::Sum::kPartFloats, acc, g, t);
    else
      sum.store(acc, r, warp, g, t);
  };

  // One or two token tiles: round 0 peeled from the loop, so that a chunk loaded before the wait
  // (one token tile only) does not hold its registers over the later rounds. (Eight token tiles
  // load every chunk here: their accumulators leave no registers to spare.)
  int r0 = 0;
  if constexpr (kNT <= 2) {
    if (chunk_parts != nullptr) {  // every chunk of the warp in turn, one barrier at the end
      if constexpr (kAhead == 2) {
        if (warp < n_chunks) {
          LaneChunk<D> cur = first.chunk;
          if (!first.loaded) cur.load(record(warp), lane);
          for (int c = warp; c < n_chunks; c += kWarps) {
            const bool more = c + kWarps < n_chunks;  // uniform per warp
            LaneChunk<D> next;
            if (more) next.load(record(c + kWarps), lane);
            chunk(x, 0, c, cur);
            if (more) cur = next;
          }
        }
      } else {
        if (warp < n_chunks) {
          LaneChunk<D> cur = first.chunk;
          if (!first.loaded) cur.load(record(warp), lane);
          chunk(x.first_round(), 0, warp, cur);
        }
        for (int c = warp + kWarps; c < n_chunks; c += kWarps) {
          LaneChunk<D> cur;
          cur.load(record(c), lane);
          chunk(x, 0, c, cur);
        }
      }
      __syncthreads();                                         // every chunk's partial is written
      if constexpr (kTrigger) detail::let_dependents_start();  // only the sums and writes are left
      C::Sum::fold_write_chunks(a, chunk_parts, n_chunks, tile_index * 16);
      return;
    }
    if (warp < n_chunks) {
      LaneChunk<D> cur = first.chunk;
      if (!first.loaded) cur.load(record(warp), lane);
      chunk(x.first_round(), 0, warp, cur);
    }
    __syncthreads();  // round 0's partials are all written
    sum.fold(0, n_chunks);
    r0 = 1;
  }
  for (int r = r0; r < n_rounds; ++r) {
    const int c = r * kWarps + warp;
    if (c < n_chunks) {
      LaneChunk<D> cur;
      cur.load(record(c), lane);
      chunk(x, r, c, cur);
    }
    __syncthreads();  // round r's partials are all written
    sum.fold(r, n_chunks);
  }
  if constexpr (kTrigger) detail::let_dependents_start();  // only the writes are left
  sum.write(a, tile_index * 16);
}

// A warp's round-0 chunk of block `tile`'s tile, loaded before the wait where `load`.
template <DType D, int kNT>
__device__ __forceinline__ EarlyChunk<D> early_tile_chunk(const MatmulArgs& a, int tile,
                                                          bool load) {
  const int n_chunks = a.n_in / kChunk, warp = static_cast<int>(threadIdx.x) >> 5;
  return load_early<D>(a.w, tile, warp, n_chunks, kNT == 1 && load && warp < n_chunks);
}

// a's tokens [8 kNT group, 8 kNT (group + 1)): the x rows, their sums and scales, and the y rows.
template <int kNT>
__device__ __forceinline__ MatmulArgs token_group(MatmulArgs a, int group) {
  const int t0 = 8 * kNT * group;
  a.xh += static_cast<int64_t>(t0) * a.n_in;
  a.xsum += static_cast<int64_t>(t0) * a.xsum_stride;
  a.xinv += t0;
  a.y += static_cast<int64_t>(t0) * a.ldy;
  a.n_tokens = min(8 * kNT, a.n_tokens - t0);
  return a;
}

// Block b runs tile b / groups over token group b % groups (groups: the launch's token groups of
// 8 kNT; a tile's groups are neighbours, so its weights come from DRAM once and from L2 after).
// early: round 0's weights are loaded before the wait (EarlyChunk).
// kAhead: tile_rows' (the ahead form: free rounds only, so `free` is true there). kRawX: one
// token's x read raw (x.x_raw, one_token_x.cuh: XRaw), else its prepared form; kC0: how it reaches
// column 0's lanes (one_token_x.cuh: Column0).
template <DType D, int kNT, int kAhead = 1, bool kRawX = false, Column0 kC0 = Column0::shuffle>
__global__ void __launch_bounds__(TiledDecodeCfg<D, kNT>::kThreads,
                                  kAhead == 2 ? TiledDecodeCfg<D, kNT>::kMinBlocksAhead
                                              : TiledDecodeCfg<D, kNT>::kMinBlocks)
    tiled_decode_kernel(const MatmulArgs x, int groups, bool early, bool free) {
  using C = TiledDecodeCfg<D, kNT>;
  const EarlyChunk<D> first =
      early_tile_chunk<D, kNT>(x, static_cast<int>(blockIdx.x) / groups, early);
  detail::wait_for_inputs(detail::Trigger::late);
  static_assert(!kRawX || kNT == 1, "x read raw: one token");
  const int tile = static_cast<int>(blockIdx.x) / groups;
  __shared__ __align__(16) float part[C::Sum::kSmemFloats];
  extern __shared__ __align__(16) float chunk_parts[];  // free rounds' slots past K = 4,096
  MatmulArgs a = token_group<kNT>(x, static_cast<int>(blockIdx.x) % groups);
  float* const slots = chunk_slots<typename C::Sum>(a, free, part, chunk_parts);
  if constexpr (kRawX) {
    __shared__ float inv;  // the row's 2^-shift, for the writes after the block's barrier
    a.xinv = &inv;
    const int warp = static_cast<int>(threadIdx.x) >> 5;  // its first chunk is chunk `warp`
    const RawFirst x0 =
        XRaw::load_first_halves(a.x_raw, warp * kChunk, a.x_raw_early && warp < a.n_in / kChunk);
    uint2* stage = nullptr;
    if constexpr (kC0 == Column0::stage) {
      __shared__ __align__(16) uint2 stages[C::kWarps * kColumn0StageSlots];
      stage = stages + warp * kColumn0StageSlots;
    }
    tile_rows<D, kNT, true, kAhead>(a, part, tile, first, slots,
                                    raw_x<kC0>(a.x_raw, a.x_parts, a.n_parts, &inv, x0, stage));
  } else {
    tile_rows<D, kNT, true, kAhead>(a, part, tile, first, slots, XPrepared{a});
  }
}

// The same for block blockIdx.x of a MultiOut launch (its output's tile).
template <DType D, int kNT>
__device__ __forceinline__ EarlyChunk<D> early_multi_chunk(const MatmulArgs& x,
                                                           const MultiOut& outs, bool load) {
  if (!load) return {};
  MatmulArgs a = x;
  const int b = static_cast<int>(blockIdx.x);
  const int o = take_output(outs, outs.tile_begin, b, a);
  return early_tile_chunk<D, kNT>(a, b - outs.tile_begin[o], true);
}

// Several outputs of one x in one launch (q, k and v of a layer; gate and up): block b runs tile
// b - tile_begin[o] of output o, the same instructions as that output's own launch, so the same
// bits; the small k and v matrices no longer leave most SMs idle for a launch of their own.
template <DType D, int kNT, int kAhead = 1>
__global__ void __launch_bounds__(TiledDecodeCfg<D, kNT>::kThreads,
                                  kAhead == 2 ? TiledDecodeCfg<D, kNT>::kMinBlocksAhead
                                              : TiledDecodeCfg<D, kNT>::kMinBlocks)
    tiled_decode_multi_kernel(const MatmulArgs x, const MultiOut outs, bool early, bool free) {
  using C = TiledDecodeCfg<D, kNT>;
  const EarlyChunk<D> first = early_multi_chunk<D, kNT>(x, outs, early);
  detail::wait_for_inputs(detail::Trigger::late);
  __shared__ __align__(16) float part[C::Sum::kSmemFloats];
  extern __shared__ __align__(16) float chunk_parts[];  // free rounds' slots past K = 4,096
  const int b = static_cast<int>(blockIdx.x);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.tile_begin, b, a);
  tile_rows<D, kNT, true, kAhead>(a, part, b - outs.tile_begin[o], first,
                                  chunk_slots<typename C::Sum>(a, free, part, chunk_parts),
                                  XPrepared{a});
}

// Expert blockIdx.y's rows, 8 kNT at a time (each group the same instructions as a decode of
// those rows alone: the outputs are matmul's bits for each row).
template <DType D, int kNT>
__global__ void __launch_bounds__(TiledDecodeCfg<D, kNT>::kThreads,
                                  TiledDecodeCfg<D, kNT>::kMinBlocks)
    tiled_decode_grouped_kernel(const MatmulArgs x, const ExpertRows rows) {
  using C = TiledDecodeCfg<D, kNT>;
  detail::wait_for_inputs(detail::Trigger::late);
  __shared__ __align__(16) float part[C::Sum::kSmemFloats];
  const int e = static_cast<int>(blockIdx.y);
  const int begin = rows.begin[e], end = rows.begin[e + 1];
  for (int r0 = begin; r0 < end; r0 += 8 * kNT) {
    MatmulArgs a = x;
    a.w += static_cast<int64_t>(e) * rows.expert_bytes;
    a.xh += static_cast<int64_t>(r0) * a.n_in;
    a.xsum += static_cast<int64_t>(r0) * a.xsum_stride;
    a.xinv += r0;
    a.y += static_cast<int64_t>(r0) * a.ldy;
    a.n_tokens = min(8 * kNT, end - r0);
    __syncthreads();  // the previous group's last fold has read part
    // (dependents start at exit; the experts' weights are not loaded before the wait: the rows
    // come from the router's output)
    tile_rows<D, kNT, false>(a, part, static_cast<int>(blockIdx.x), EarlyChunk<D>{}, nullptr,
                             XPrepared{a});
  }
}

// The ahead form of a one-token-tile launch (kernel: tiled_decode_kernel's or
// tiled_decode_multi_kernel's <D, 1, 2>, args its arguments before `early` and `free`) where
// takes_ahead says so; false where it does not, and nothing is launched.
template <DType D, class Kernel, class... Args>
bool launch_ahead(Kernel kernel, bool grouped, int n_in, unsigned blocks, cudaStream_t stream,
                  const Args&... args) {
  if (!takes_ahead<D, 1>(n_in, grouped)) return false;
  static std::atomic<uint64_t> smem_set{0};  // one a kernel (Kernel and Args differ)
  allow_smem_once(kernel, kFreeSlotBytes, smem_set);
  detail::launch(kernel, blocks, TiledDecodeCfg<D, 1>::kThreads, free_rounds_smem<D, 1>(n_in),
                 stream, args..., early_weights_enabled(), true);
  return true;
}

template <DType D, int kNT>
void launch(const MatmulArgs& a, cudaStream_t stream) {
  using C = TiledDecodeCfg<D, kNT>;
  const int groups = (a.n_tokens + 8 * kNT - 1) / (8 * kNT);
  const unsigned blocks = static_cast<unsigned>((a.n_out + 15) / 16 * groups);
  if constexpr (kNT == 1 && Tiled<D>::kScaled) {
    if (pair_x_takes<D>(a, takes_ahead<D, 1>(a.n_in), (a.n_out + 15) / 16)) {
      MultiOut one;
      one.add(a.w, a.y, a.n_out, a.ldy);
      return launch_decode_pair<D>(a, one, stream);
    }
    if (launch_ahead<D>(tiled_decode_kernel<D, 1, 2>, false, a.n_in, blocks, stream, a, groups))
      return;
  }
  if constexpr (kNT == 1 && !Tiled<D>::kScaled) {
    if (a.x_raw != nullptr) {  // F16/BF16 at one token reading x raw
      // (MEMRA_RAW_X_STAGE is fixed for the process, so one kernel is ever launched here.)
      const auto kernel = raw_x_column0_staged()
                              ? tiled_decode_kernel<D, 1, 1, true, Column0::stage>
                              : tiled_decode_kernel<D, 1, 1, true>;
      static std::atomic<uint64_t> raw_smem_set{0};
      allow_smem_once(kernel, kFreeSlotBytes, raw_smem_set);
      return detail::launch(kernel, blocks, C::kThreads, free_rounds_smem<D, 1>(a.n_in), stream, a,
                            groups, early_weights_enabled(), takes_free_rounds<D, 1>(a.n_in));
    }
  }
  static std::atomic<uint64_t> smem_set{0};  // (past 48 KB with the static round buffers)
  if constexpr (kNT <= 2) allow_smem_once(tiled_decode_kernel<D, kNT>, kFreeSlotBytes, smem_set);
  detail::launch(tiled_decode_kernel<D, kNT>, blocks, C::kThreads, free_rounds_smem<D, kNT>(a.n_in),
                 stream, a, groups, early_weights_enabled(), takes_free_rounds<D, kNT>(a.n_in));
}

}  // namespace

// MEMRA_TWO_TILE_DECODE=0: 9-16 tokens on eight token tiles, six of them empty (the form before;
// the A/B), in this kernel and the file-layout one (matmul_decode.cu). Each token's chunk
// partials are the same mma chains on the same operands whatever the token tiles a block holds, so
// the same bits.
bool two_tile_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_TWO_TILE_DECODE", true);
  return enabled;
}

namespace {
// The token tiles of a block that takes the whole batch in one token group, the forms with free
// rounds and grouped launches: 1 up to 8 tokens, 2 at 9-16 (unless MEMRA_TWO_TILE_DECODE=0); 0
// for larger batches.
int one_group_tiles(int64_t n_tokens) {
  if (n_tokens <= 8) return 1;
  return n_tokens <= kTwoTileTokens && two_tile_decode_enabled() ? 2 : 0;
}
}  // namespace

bool tiled_decode_groups_take(int64_t n_tokens) {
  return one_group_tiles(n_tokens) > 0;
}

// The token tiles a block of the tiled decode kernel takes at 17-64 tokens, the batch in token
// groups of 8 x that many over neighbouring blocks: 2 for the K-quants, 8 (all of them) for
// F16/BF16. MEMRA_BATCH_TOKEN_TILES=2|4|8 sets it for every dtype (the A/B). A token's chunk
// partials are the same mma chains whatever the block's tiles: the same bits. Measured on the H200
// (docs/PERFORMANCE.md, twenty-seventh round; us at 64 tokens, 8 / 4 / 2 tiles): Q4_K down 120.2 /
// 108.0 / 100.1, Q8_0 down 112.4 / 107.7 / 103.2, Q6_K down 97.6 / 103.7 / 101.1, F16 down 99.2 /
// 114.9 / 115.0; 8B Q4_K_M at 64 sequences 4,205 / 4,316 / 4,621 tok/s (its Q6_K v, 1,024 rows,
// is 64 blocks at 8 tiles, 256 at 2).
template <DType D>
int batch_token_tiles() {
  static const int forced = [] {  // 0: not forced
    const int i = env_choice("MEMRA_BATCH_TOKEN_TILES", {"2", "4", "8"}, -1);
    return i < 0 ? 0 : 2 << i;
  }();
  if (forced > 0) return forced;
  return Tiled<D>::kScaled ? 2 : 8;
}

// The n8 token tiles a block takes for a batch of n_tokens (1, 2, 4 or 8).
template <DType D>
int block_token_tiles(int n_tokens) {
  if (const int tiles = one_group_tiles(n_tokens); tiles > 0) return tiles;
  return n_tokens <= kTwoTileTokens ? 8 : batch_token_tiles<D>();
}

template <DType D>
void launch_decode_tiled(const MatmulArgs& a, cudaStream_t stream) {
  switch (block_token_tiles<D>(a.n_tokens)) {
    case 1:
      return launch<D, 1>(a, stream);
    case 2:
      return launch<D, 2>(a, stream);
    case 4:
      return launch<D, 4>(a, stream);
    default:
      return launch<D, 8>(a, stream);
  }
}

// On by default since the H200 A/B (docs/PERFORMANCE.md, twelfth round: 8B BF16 decode 180.2 ->
// 189.8 tok/s, Q4_K_M at 8 sequences 1,516.8 -> 1,637.1); MEMRA_GROUPED_DECODE=0 launches each
// output alone (the A/B; the same bits).
bool grouped_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_GROUPED_DECODE", true);
  return enabled;
}

namespace {
template <DType D, int kNT>
void launch_multi(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(outs.tile_begin[outs.n]);
  if constexpr (kNT == 1 && Tiled<D>::kScaled) {
    if (pair_x_takes<D>(x, takes_ahead<D, 1>(x.n_in, true), outs.tile_begin[outs.n]))
      return launch_decode_pair<D>(x, outs, stream);
    if (launch_ahead<D>(tiled_decode_multi_kernel<D, 1, 2>, true, x.n_in, blocks, stream, x, outs))
      return;
  }
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(tiled_decode_multi_kernel<D, kNT>, kFreeSlotBytes, smem_set);
  detail::launch(tiled_decode_multi_kernel<D, kNT>, blocks, TiledDecodeCfg<D, kNT>::kThreads,
                 free_rounds_smem<D, kNT>(x.n_in), stream, x, outs, early_weights_enabled(),
                 takes_free_rounds<D, kNT>(x.n_in));
}
}  // namespace

template <DType D>
void launch_decode_tiled_multi(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  switch (one_group_tiles(x.n_tokens)) {
    case 1:
      return launch_multi<D, 1>(x, outs, stream);
    case 2:
      return launch_multi<D, 2>(x, outs, stream);
    default:  // its blocks have no token groups: it would drop the batch's later tokens
      fail(ErrorCode::internal, "matmul: grouped tiled decode launch of {} tokens", x.n_tokens);
  }
}

template <DType D>
void launch_decode_tiled_grouped(const MatmulArgs& a, const ExpertRows& rows, cudaStream_t stream) {
  // One token tile a pass where the experts average at most 8 rows (decode batches: an expert's
  // few rows in one pass, a rare larger one in more, which find its weights in L2), eight
  // otherwise.
  const dim3 grid(static_cast<unsigned>((a.n_out + 15) / 16), static_cast<unsigned>(rows.n_expert));
  if (a.n_tokens <= 8 * rows.n_expert) {
    detail::launch(tiled_decode_grouped_kernel<D, 1>, grid, TiledDecodeCfg<D, 1>::kThreads, 0,
                   stream, a, rows);
  } else {
    detail::launch(tiled_decode_grouped_kernel<D, 8>, grid, TiledDecodeCfg<D, 8>::kThreads, 0,
                   stream, a, rows);
  }
}

template void launch_decode_tiled_grouped<DType::q4_k>(const MatmulArgs&, const ExpertRows&,
                                                       cudaStream_t);
template void launch_decode_tiled_grouped<DType::q6_k>(const MatmulArgs&, const ExpertRows&,
                                                       cudaStream_t);
template void launch_decode_tiled_grouped<DType::q8_0>(const MatmulArgs&, const ExpertRows&,
                                                       cudaStream_t);
#define MEMRA_INSTANTIATE_MULTI(D) \
  template void launch_decode_tiled_multi<D>(const MatmulArgs&, const MultiOut&, cudaStream_t);
MEMRA_INSTANTIATE_MULTI(DType::q4_k)
MEMRA_INSTANTIATE_MULTI(DType::q6_k)
MEMRA_INSTANTIATE_MULTI(DType::q8_0)
MEMRA_INSTANTIATE_MULTI(DType::f16)
MEMRA_INSTANTIATE_MULTI(DType::bf16)
#undef MEMRA_INSTANTIATE_MULTI
template void launch_decode_tiled<DType::q4_k>(const MatmulArgs&, cudaStream_t);
template void launch_decode_tiled<DType::q6_k>(const MatmulArgs&, cudaStream_t);
template void launch_decode_tiled<DType::q8_0>(const MatmulArgs&, cudaStream_t);
template void launch_decode_tiled<DType::f16>(const MatmulArgs&, cudaStream_t);
template void launch_decode_tiled<DType::bf16>(const MatmulArgs&, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
