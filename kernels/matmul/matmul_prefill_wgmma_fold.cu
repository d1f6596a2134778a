// The wgmma matmul for tiled Q4_K weights on Hopper (sm_90a) in the BF16 kernel's structure
// (matmul_prefill_wgmma.cu), for steps of more than 64 tokens: 128 rows x 128 tokens a block, two
// compute warpgroups that issue one wgmma.m64n128k16 a k16 step with A from registers, and a copy
// warpgroup (nine lanes of it) that fills each sub-stage's buffer by bulk copies as soon as its
// "empty" mbarrier says the compute warps are done with it. Measured against
// matmul_prefill_wgmma_quant.cu (one thread's copies behind a block barrier a chunk): the 8B gate
// shape at 512 tokens 369 -> 242 us with the fold's sums staged (below), the BF16 kernel's 125
// still ahead (PERFORMANCE.md, thirteenth round: each chunk's end drains the wgmma chain and folds
// on the CUDA cores).
//
// Per element the order is the folded one (fold.cuh), as in every Q4_K kernel: each warp decodes
// its m16 tile's A fragments from the staged quants and multiplies them by the group scales, one
// wgmma chain a 256-element chunk from registers zeroed beforehand, then the mins' k16 step on
// mma.sync and p = fma(d, s, -32 dmin b); chunks fold left to right. kernel-check compares the
// outputs with the other Q4_K kernels bit for bit.
//
// By default a chunk's records arrive whole, one 2,304-byte copy a tile (four quads and the 16
// rows' headers) into a ring of chunk slots, and each sub-stage (64 of K, a quarter of a chunk)
// brings only the x tile, xp_offset's 128 x 64 tile (16 KB, one copy, as the BF16 kernel), into a
// ring of its own: 12 copies a chunk. The sub-stage ring before it (MEMRA_WGMMA_CHUNK_RING=0)
// staged, per tile and sub-stage, the record's quad for its four steps (512 B) and the headers
// again (256 B) beside the x tile: 68 copies a chunk, and its copies alone took 150 of the 8B gate
// shape's 206 us at 512 tokens (PERFORMANCE.md, thirty-first round).
#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail {
namespace {

using T = Tiled<DType::q4_k>;
constexpr int kBM = 128, kSub = 64, kCompute = 256, kThreads = kCompute + 128;
constexpr int kTiles = kBM / 16;
constexpr int kQuadBytes = 512, kHeadBytes = 256;  // tiled.cuh: a quad at 512 u, heads at 2048
constexpr int kQuads = kTiles * kQuadBytes;        // 4 KB
constexpr int kHeads = kTiles * kHeadBytes;        // 2 KB
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");
static_assert(kXpTokens == 128 && kSub == kXpK, "the x tile is xp_offset's tile");
static_assert(T::kBytes == 4 * kQuadBytes + kHeadBytes, "a record is four quads and the heads");

constexpr int kBN = 128;  // tokens a block: wgmma m64n128
constexpr int kStages = 7;
constexpr int kXStage = kBN * kSub * 2;  // 16 KB: xp_offset's tile, one copy
constexpr int kStageBytes = kQuads + kHeads + kXStage;
constexpr int kRingBytes = kStages * kStageBytes;
constexpr int kBarBytes = 2 * kStages * 8;  // a full and an empty mbarrier a stage
// A chunk's mins' B fragments of the block's tokens (16 B per token half), in two buffers.
constexpr int kXsumBytes = 2 * kCompute * 16;
constexpr int kSmem = kRingBytes + kBarBytes + kXsumBytes;
static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");

// The chunk ring (kChunkRing): a chunk's whole records (four quads and the heads, one 2,304-byte
// copy a tile) in one of kWSlots slots, and the x tiles in their own ring of kXSlots sub-stages:
// 12 bulk copies a chunk instead of 68 (the heads were copied again with every sub-stage's quads).
constexpr int kWSlots = 4, kXSlots = 8;
constexpr int kWSlot = kTiles * T::kBytes;  // 18 KB
constexpr int kRingSmem =
    kXSlots * kXStage + kWSlots * kWSlot + 2 * (kXSlots + kWSlots) * 8 + kXsumBytes;
static_assert(kRingSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int kCopyRegs = 40, kComputeRegs = 232;

// Chunk c's record of the block's tile m (rows past the matrix repeat the last tile), and the x
// tile of sub-stage q, in global memory: what every schedule's copies read.
__device__ __forceinline__ const uint8_t* tile_record(const MatmulArgs& a, int row0, int m, int c) {
  const int64_t tile = min(row0 / 16 + m, (a.n_out - 1) / 16);
  return a.w + (tile * (a.n_in / kChunk) + c) * T::kBytes;
}
__device__ __forceinline__ const uint16_t* x_tile(const MatmulArgs& a, int tok0, int q) {
  return a.xp + xp_offset(tok0, q * kSub, a.n_in);
}
// The x tile of sub-stage q into dst: one bulk copy of xp_offset's tile, or (kRows) one tensor
// copy of the rows form's 64-k x 128-token box (xmap, x_rows_map).
template <bool kRows>
__device__ __forceinline__ void copy_x_tile(const MatmulArgs& a, const CUtensorMap* xmap,
                                            uint8_t* dst, int tok0, int q, uint64_t* bar) {
  if constexpr (kRows)
    tensor_copy_2d(dst, xmap, q * kSub, tok0, bar);
  else
    bulk_copy(dst, x_tile(a, tok0, q), kXStage, bar);
}

// Sub-stage q of the block at (row0, tok0) into a stage buffer, completing on its barrier (one
// thread issues it); rows past the matrix repeat the last tile.
__device__ __forceinline__ void fill_stage(const MatmulArgs& a, uint8_t* stage, uint64_t* bar,
                                           int q, int row0, int tok0) {
  mbar_arrive_expect_tx(bar, kStageBytes);
  const int c = q / 4, u = q % 4;
#pragma unroll 1
  for (int m = 0; m < kTiles; ++m) {
    const uint8_t* rec = tile_record(a, row0, m, c);
    bulk_copy(stage + m * kQuadBytes, rec + u * kQuadBytes, kQuadBytes, bar);
    bulk_copy(stage + kQuads + m * kHeadBytes, rec + 4 * kQuadBytes, kHeadBytes, bar);
  }
  bulk_copy(stage + kQuads + kHeads, x_tile(a, tok0, q), kXStage, bar);
}

// The same copies from the copy warp's lanes (kLaneCopies, the default): lane m < 8 issues tile
// m's two, lane 8 the x tile's, after lane 0 has set the barrier's byte count (a copy completing
// before that would be counted all the same; the warp meets first so none does). One lane issued
// 17 copies a sub-stage: shared, the 8B gate shape at 512 tokens measured 244 -> 214 us.
__device__ __forceinline__ void fill_stage_lanes(const MatmulArgs& a, uint8_t* stage, uint64_t* bar,
                                                 int q, int row0, int tok0, int lane) {
  if (lane == 0) mbar_arrive_expect_tx(bar, kStageBytes);
  __syncwarp();
  const int c = q / 4, u = q % 4;
  if (lane < kTiles) {
    const uint8_t* rec = tile_record(a, row0, lane, c);
    bulk_copy(stage + lane * kQuadBytes, rec + u * kQuadBytes, kQuadBytes, bar);
    bulk_copy(stage + kQuads + lane * kHeadBytes, rec + 4 * kQuadBytes, kHeadBytes, bar);
  } else if (lane == kTiles) {
    bulk_copy(stage + kQuads + kHeads, x_tile(a, tok0, q), kXStage, bar);
  }
}

// Rows g and g + 8 of this warp's tile from its heads in shared memory (a stage's, or a chunk
// slot's). Read where needed rather than kept: the compute warps' 232 registers hold the two
// 64-float accumulators.
__device__ __forceinline__ void head_rows(const uint8_t* heads, int g, FoldRow& r_g,
                                          FoldRow& r_g8) {
  r_g = fold_row(ld_u128(heads + 16 * g));
  r_g8 = fold_row(ld_u128(heads + 16 * (g + 8)));
}

// Where this warp's quad of sub-stage u and its tile's heads sit: in a stage, or (kChunkRing) in
// the chunk's slot, whose records are whole.
template <bool kChunkRing>
__device__ __forceinline__ const uint8_t* quad_of(const uint8_t* at, int warp, int u) {
  return kChunkRing ? at + warp * T::kBytes + u * kQuadBytes : at + warp * kQuadBytes;
}
template <bool kChunkRing>
__device__ __forceinline__ const uint8_t* heads_of(const uint8_t* at, int warp) {
  return kChunkRing ? at + warp * T::kBytes + 4 * kQuadBytes : at + kQuads + warp * kHeadBytes;
}

// This warp's A fragments of sub-stage u's four k16 steps, decoded and scaled (fold.cuh).
__device__ __forceinline__ void load_a(const uint8_t* quad_at, const uint8_t* heads, int lane,
                                       int u, uint32_t (&af)[4][4]) {
  FoldRow r_g, r_g8;
  head_rows(heads, lane >> 2, r_g, r_g8);
  const uint4 quad = ld_u128(quad_at + 16 * lane);
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    T::folded_frag(quad, v, fold_scales(r_g, r_g8, (4 * u + v) >> 1), af[v]);
  }
}

// Chunk c's end (heads: this warp's tile's headers; xs: the mins' B fragments of the block's
// tokens for the chunk, token i's sums 4h .. 4h + 3 as bias_b_both at xs[2i + h]): the mins' step
// for each n8 tile, p = fma(d, s, nb * b) into the running sum in order, s restarts from +0.
__device__ __forceinline__ void fold_end(const uint8_t* heads, const uint4* xs, int c, int lane,
                                         float (&total)[kBN / 2], float (&s)[kBN / 2]) {
  const int g = lane >> 2, t = lane & 3;
  FoldRow r_g, r_g8;
  head_rows(heads, g, r_g, r_g8);
  uint32_t ba[4];
  bias_a(r_g, r_g8, t, ba);
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {  // a tile at a time: its B fragment, then its fold
    const uint2 bb = reinterpret_cast<const uint2*>(xs + 2 * (8 * j + g) + (t & 1))[t >> 1];
    float(&p)[4] = *reinterpret_cast<float(*)[4]>(s + 4 * j);  // s of tile j becomes p
    fold_tile(p, ba, bb, r_g, r_g8);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      total[4 * j + i] = c == 0 ? p[i] : __fadd_rn(total[4 * j + i], p[i]);
      p[i] = 0.0f;  // the next chunk's chain starts from +0
    }
  }
}

// The two compute warpgroups meet (named barrier 1; the copy warpgroup never takes part).
__device__ __forceinline__ void compute_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kCompute) : "memory");
}

// The chunk ring's copy lane: chunk c's whole records into slot c % kWSlots once chunk c -
// kWSlots has left it, then its four x tiles into the x ring, each once its sub-stage's slot is
// free.
template <bool kRows>
__device__ __forceinline__ void copy_chunk_ring(const MatmulArgs& a, const CUtensorMap* xmap,
                                                uint8_t* wring, uint8_t* xring, uint64_t* wfull,
                                                uint64_t* wempty, uint64_t* xfull, uint64_t* xempty,
                                                int row0, int tok0) {
  const int n_chunks = a.n_in / kChunk;
  for (int c = 0; c < n_chunks; ++c) {
    const int w = c % kWSlots;
    if (c >= kWSlots) mbar_wait(wempty + w, (c / kWSlots - 1) & 1);
    mbar_arrive_expect_tx(wfull + w, kWSlot);
#pragma unroll 1
    for (int m = 0; m < kTiles; ++m)
      bulk_copy(wring + w * kWSlot + m * T::kBytes, tile_record(a, row0, m, c), T::kBytes,
                wfull + w);
#pragma unroll 1
    for (int u = 0; u < 4; ++u) {
      const int q = 4 * c + u, b = q % kXSlots;
      if (q >= kXSlots) mbar_wait(xempty + b, (q / kXSlots - 1) & 1);
      mbar_arrive_expect_tx(xfull + b, kXStage);
      copy_x_tile<kRows>(a, xmap, xring + b * kXStage, tok0, q, xfull + b);
    }
  }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kChunkRing (the default): the chunk ring above. Otherwise the sub-stage ring, its copies
// shared by the copy warp's lanes with kLaneCopies (fill_stage_lanes). (Two offsets of the
// compute warpgroups were measured slower: a strict ping-pong, taking turns on the tensor cores
// with two handoffs a chunk, 4-5% while the copies bounded the kernel, fourteenth round; on the
// chunk ring, the second warpgroup half a chunk behind with each staging the chunk's sums for
// itself, gate 136.7 -> 142.5 us, thirty-second round. PERFORMANCE.md.)
// Block (x, y): tokens [128 x, + 128) of the 128-row block of outs that y names. kRows (with the
// chunk ring only): x is x.xp's rows form, read through xmap (x_rows_map; a zeroed map otherwise).
template <bool kLaneCopies, bool kChunkRing, bool kRows>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_fold_kernel(const MatmulArgs x, const BlockOuts outs,
                              const __grid_constant__ CUtensorMap xmap) {
  detail::wait_for_inputs();
  static_assert(kChunkRing || !kRows, "the rows form takes the chunk ring's copies");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem_xp[];
  uint8_t* const smem = kRows ? rows_smem() : smem_xp;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int by = static_cast<int>(blockIdx.y);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.block_begin, by, a);
  const int row0 = (by - outs.block_begin[o]) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
  const int n_sub = a.n_in / kSub;
  // The barriers and roles as matmul_prefill_wgmma.cu's kernel sets them up. (Written once, as a
  // wgmma.cuh helper both kernels call, it changed ~500 lines of the BF16 kernel's SASS: kept
  // apart, as measured.) The chunk ring: x slots, then chunk slots, then the x slots' full and
  // empty barriers, then the chunk slots'.
  constexpr int kXRingBytes = kChunkRing ? kXSlots * kXStage : kStages * kStageBytes;
  constexpr int kNX = kChunkRing ? kXSlots : kStages;  // x buffers (stages)
  uint8_t* const wring = smem + kXRingBytes;
  uint64_t* const full = reinterpret_cast<uint64_t*>(wring + (kChunkRing ? kWSlots * kWSlot : 0));
  uint64_t* const empty = full + kNX;
  uint64_t* const wfull = empty + kNX;  // (kChunkRing)
  uint64_t* const wempty = wfull + kWSlots;
  if (tid == 0) {
    mbar_init_stages(full, kNX);
    mbar_init_stages(empty, kNX, kCompute / 32);
    if constexpr (kChunkRing) {
      mbar_init_stages(wfull, kWSlots);
      mbar_init_stages(wempty, kWSlots, kCompute / 32);
    }
  }
  __syncthreads();
  if (warp >= kCompute / 32) {  // the copy warpgroup: its first lane (or warp) issues the copies
    setmaxnreg_dec<kCopyRegs>();
    if constexpr (kChunkRing) {
      if (warp == kCompute / 32 && lane == 0)
        copy_chunk_ring<kRows>(a, &xmap, wring, smem, wfull, wempty, full, empty, row0, tok0);
    } else {
      run_copies<kStages, kCompute, kLaneCopies>(
          warp, lane, n_sub, smem, kStageBytes, full, empty,
          [&](int q, uint8_t* stage, uint64_t* bar) { fill_stage(a, stage, bar, q, row0, tok0); },
          [&](int q, uint8_t* stage, uint64_t* bar, int l) {
            fill_stage_lanes(a, stage, bar, q, row0, tok0, l);
          });
    }
    return;
  }
  setmaxnreg_inc<kComputeRegs>();
  auto release = [&](int q) {
    if (lane == 0) mbar_arrive(empty + q % kNX);
  };
  // s: the chunk's chain (n8 tile j in s[4j .. 4j + 3], mma.sync's C layout); total: the running
  // chunk sum.
  float s[kBN / 2], total[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) s[i] = total[i] = 0.0f;
  // The mins' B fragments: each compute thread loads one token's half of the chunk's group sums
  // (token tok0 + tid / 2, sums 4 (tid % 2) .. + 3) when the chunk starts, and stages them,
  // converted once, in shared memory for every warp's fold at the chunk's end; so the fold, while
  // the tensor cores idle, neither waits on a global load (loaded there, 16 of them a chunk, each
  // behind the last, they were its main cost) nor converts the same sums in all eight warps.
  // (ptxas issues the load two sub-stages before the chunk's end, early enough to hide it.)
  const int x_tok = tok0 + (tid >> 1);
  const float* x_src =
      a.xsum + static_cast<int64_t>(min(x_tok, a.n_tokens - 1)) * a.xsum_stride + 4 * (tid & 1);
  uint4* const xs = reinterpret_cast<uint4*>(kChunkRing ? wempty + kWSlots : empty + kNX);
  const int n_chunks = n_sub / 4;
  for (int c = 0; c < n_chunks; ++c) {
    const float4 xv = __ldg(reinterpret_cast<const float4*>(x_src + 8 * c));
    const uint8_t* slot = wring + (c % kWSlots) * kWSlot;  // (kChunkRing)
    if constexpr (kChunkRing) mbar_wait(wfull + c % kWSlots, (c / kWSlots) & 1);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int q = 4 * c + u;
      const uint8_t* stage = smem + (q % kNX) * (kChunkRing ? kXStage : kStageBytes);
      mbar_wait(full + q % kNX, (q / kNX) & 1);  // sub-stage q has landed
      const uint8_t* at = kChunkRing ? slot : stage;
      uint32_t af[4][4];
      load_a(quad_of<kChunkRing>(at, warp, u), heads_of<kChunkRing>(at, warp), lane, u, af);
      const uint8_t* X = kChunkRing ? stage : stage + kQuads + kHeads;
      wgmma_fence();
#pragma unroll
      for (int v = 0; v < 4; ++v) wgmma_m64n128k16(s, af[v], x_step_desc<kRows, kBN>(X, v));
      wgmma_commit();
      if (u > 0) {
        wgmma_wait<1>();  // sub-stage q - 1 is done reading
        release(q - 1);
      }
    }
    // Two buffers: a warp stores chunk c + 1's sums only after every warp passed chunk c's
    // barrier, and chunk c + 2's only after every warp finished chunk c's fold.
    uint4* const xs_c = xs + (c & 1) * kCompute;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);  // as bias_b for tokens past the batch
    xs_c[tid] = x_tok < a.n_tokens ? bias_b_both(xv) : zero;
    compute_sync();
    wgmma_wait<0>();  // the chunk ends: the mins, d and dmin, then fold it in order
    const int q3 = 4 * c + 3;
    const uint8_t* heads_at = kChunkRing ? slot : smem + (q3 % kNX) * kStageBytes;
    fold_end(heads_of<kChunkRing>(heads_at, warp), xs_c, c, lane, total, s);
    release(q3);  // after fold_end has read the headers
    if constexpr (kChunkRing) {
      if (lane == 0) mbar_arrive(wempty + c % kWSlots);
    }
  }
  store_tile<kBN>(a, total, row0, tok0, warp, lane);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

}  // namespace

// On by default (MEMRA_WGMMA_FOLD=0 for the A/B): 8B Q4_K_M pp512 8,138 -> 10,632 tok/s on the
// H200 (8,662 before the fold's sums were staged).
// Steps of 17-64 tokens take the pipelined kernel (matmul_wgmma_fold64.cu) instead, 64-token
// tiles in this one's order (this kernel's 128-token tiles measured 3,059 tok/s at 64 sequences
// against the quantized kernel's 3,383).
bool prefill_wgmma_fold_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_FOLD", true);
  return enabled;
}

// The sub-stage ring's copies from the copy warp's lanes: on by default (MEMRA_WGMMA_COPY_LANES=0
// for the A/B): 8B Q4_K_M pp512 10,627 -> 11,607 tok/s on the H200, the same bits.
bool prefill_wgmma_copy_lanes_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_COPY_LANES", true);
  return enabled;
}

template <bool kLaneCopies, bool kChunkRing, bool kRows = false>
void launch_schedule(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  launch_block_outs<prefill_wgmma_fold_kernel<kLaneCopies, kChunkRing, kRows>, kBN>(
      x, outs, kThreads, kChunkRing ? kRingSmem : kSmem, stream, x_rows_map(x, kBN));
}

void launch_prefill_wgmma_fold(const MatmulArgs& a, cudaStream_t stream) {
  launch_prefill_wgmma_fold(a, BlockOuts::of(a), stream);
}

void launch_prefill_wgmma_fold(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  if (x.n_tokens <= kDecodeTokens || outs.n < 1)
    fail(ErrorCode::internal,
         "prefill_wgmma_fold: {} tokens (128-token tiles take over {}), {} outputs", x.n_tokens,
         kDecodeTokens, outs.n);
  // The chunk ring: on by default (MEMRA_WGMMA_CHUNK_RING=0 for the A/B, the same bits): the 8B
  // gate shape at 512 tokens 204.6 -> 136.9 us, 8B Q4_K_M pp512 11,897 -> 15,259 tok/s on the
  // H200.
  // x's rows form takes the chunk ring whatever the switch says (the same bits).
  static const bool chunk_ring = env_switch("MEMRA_WGMMA_CHUNK_RING", true);
  if (x.xp_rows)
    launch_schedule<true, true, true>(x, outs, stream);
  else if (chunk_ring)
    launch_schedule<true, true>(x, outs, stream);
  else if (prefill_wgmma_copy_lanes_enabled())
    launch_schedule<true, false>(x, outs, stream);
  else
    launch_schedule<false, false>(x, outs, stream);
}

}  // namespace memra::kernels::matmul_detail
