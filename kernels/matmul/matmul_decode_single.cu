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
#include <atomic>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled_chunk.cuh"
#include "kernels/matmul/wgmma.cuh"

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

// This block's output o of a MultiOut launch: a = x with that output's matrix and y, and the
// block's row tile within it (returned). Kernel parameters only, so it may run before the wait
// for the previous kernel (kernels/launch.cuh's constant_ rule).
__device__ __forceinline__ int constant_block_output(const MatmulArgs& x, const MultiOut& outs,
                                                     MatmulArgs& a, int& o) {
  o = 0;
  while (o + 1 < outs.n && static_cast<int>(blockIdx.x) >= outs.tile_begin[o + 1]) ++o;
  a = x;
  a.w = outs.w[o];
  a.y = outs.y[o];
  a.n_out = outs.n_out[o];
  a.ldy = outs.ldy[o];
  return static_cast<int>(blockIdx.x) - outs.tile_begin[o];
}

// One warp's chunk partial of rows g, g + 8 (lanes t == 0 hold it) from its record `rec` (global
// or shared memory), written to the round's partial buffer.
template <DType D>
__device__ __forceinline__ void chunk_to_part(const MatmulArgs& a, const uint8_t* rec, int c, int r,
                                              int warp, int lane, float* part) {
  const int g = lane >> 2, t = lane & 3;
  const int k0 = c * kChunk;
  LaneChunk<D> cur;
  cur.load(rec, lane);
  float p[2];
  if constexpr (kFold<D>) {
    // The folded order (fold.cuh) is one chain over the chunk: the token in column 0.
    float f[4];
    fold_partial(a, cur, lane, k0, f);
    p[0] = f[0];
    p[1] = f[2];
  } else {
    columns_partial(a, cur, lane, k0, p);
  }
  if (t == 0) {  // lanes t == 0 hold the partial
    float* mine = part + ((r & 1) * kWarps + warp) * Sum::kPartFloats;
    mine[g] = p[0];
    mine[g + 8] = p[1];
  }
}

// kExperts: MultiOut's expert mode, where a block first finds its pair's expert matrix, x row and
// y row; the arithmetic after that is the same code.
template <DType D, bool kExperts>
__global__ void __launch_bounds__(kThreads, 3)
    single_decode_kernel(const MatmulArgs x, const MultiOut outs) {
  using T = Tiled<D>;
  detail::wait_for_inputs(detail::Trigger::late);
  MatmulArgs a;
  int o = 0;
  int tile_index = constant_block_output(x, outs, a, o);
  if constexpr (kExperts) {
    const int tiles = (a.n_out + 15) / 16;
    const int pair = tile_index / tiles;
    tile_index -= pair * tiles;
    a.w += static_cast<int64_t>(__ldg(outs.ids + pair)) * outs.expert_bytes[o];
    a.y += static_cast<int64_t>(pair) * a.ldy;
    const int64_t row = pair / outs.x_div;
    a.xh += row * a.n_in;
    a.xsum += row * a.xsum_stride;
    a.xinv += row;
  }
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_chunks = a.n_in / kChunk;
  const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
  const uint8_t* tile = a.w + static_cast<int64_t>(tile_index) * n_chunks * T::kBytes;
  Sum sum{part};

  // Each warp walks its chunks one round at a time. (Loading the next chunk's quants before
  // computing the current one was measured 2-22% slower per matrix on the H200: the extra
  // registers cost more than the loads in flight gained; staged_decode_kernel keeps them in
  // shared memory instead.)
  for (int r = 0; r < n_rounds; ++r) {
    const int c = r * kWarps + warp;
    if (c < n_chunks)
      chunk_to_part<D>(a, tile + static_cast<int64_t>(c) * T::kBytes, c, r, warp, lane, part);
    __syncthreads();  // round r's partials are all written
    sum.fold(r, n_chunks);
  }
  detail::let_dependents_start();  // Trigger::late: only the writes are left
  sum.write(a, tile_index * 16);
}

// The staged form (Hopper): the same rounds and the same arithmetic on the same records, read
// from shared memory that bulk copies (cp.async.bulk) fill kStages rounds ahead.
//
// Why. The one-token kernel measured 51% of DRAM bandwidth on the 8B gate/up shape (Nsight
// Compute, receipts/2026-12-02-gpu-check-profile-run.log): a warp loads one 2.3 KB record, then
// computes, so an SM has ~15 warps x one record in flight at best, ~2 MB over the GPU, which at
// ~1 us of latency is ~2.2 TB/s, what it reached. Here a block has kStages rounds (8 records
// each) in flight from its start, without registers: 55-70 KB a block, three blocks an SM. The
// weights are constant, so the first copies are issued before the wait for the previous kernel
// and overlap its tail.
template <DType D>
inline constexpr int kStages = Tiled<D>::kBytes* kWarps * 3 <= 56 * 1024 ? 3 : 2;
template <DType D>
inline constexpr int kRoundBytes = Tiled<D>::kBytes* kWarps;
template <DType D>
inline constexpr int kStagedSmem = kStages<D>* kRoundBytes<D> + 8 * kStages<D>;

// Thread 0: round r's records (kWarps of them, fewer in the last round) into buffer r % kStages.
template <DType D>
__device__ __forceinline__ void constant_round_copy(uint8_t* smem, uint64_t* full,
                                                    const uint8_t* tile, int r, int n_chunks) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int buffer = r % kStages<D>;
  const int bytes = min(kWarps, n_chunks - r * kWarps) * Tiled<D>::kBytes;
  mbar_arrive_expect_tx(full + buffer, bytes);
  bulk_copy(smem + buffer * kRoundBytes<D>, tile + static_cast<int64_t>(r) * kRoundBytes<D>, bytes,
            full + buffer);
#endif
}

// Thread 0, before the wait: the stage barriers and the first kStages rounds' copies (weights and
// kernel parameters only).
template <DType D>
__device__ __forceinline__ int constant_staged_start(const MatmulArgs& x, const MultiOut& outs,
                                                     MatmulArgs& a, uint8_t* smem) {
  int o = 0;
  const int tile_index = constant_block_output(x, outs, a, o);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (threadIdx.x == 0) {
    const int n_chunks = a.n_in / kChunk;
    const uint8_t* tile = a.w + static_cast<int64_t>(tile_index) * n_chunks * Tiled<D>::kBytes;
    uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages<D> * kRoundBytes<D>);
    mbar_init_stages(full, kStages<D>);
    const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
    for (int r = 0; r < min(kStages<D>, n_rounds); ++r)
      constant_round_copy<D>(smem, full, tile, r, n_chunks);
  }
#endif
  return tile_index;
}

template <DType D>
__global__ void __launch_bounds__(kThreads, 3)
    staged_decode_kernel(const MatmulArgs x, const MultiOut outs) {
  extern __shared__ __align__(128) uint8_t smem[];
  MatmulArgs a;
  const int tile_index = constant_staged_start<D>(x, outs, a, smem);
  detail::wait_for_inputs(detail::Trigger::late);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tiled<D>;
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages<D> * kRoundBytes<D>);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_chunks = a.n_in / kChunk;
  const int n_rounds = (n_chunks + kWarps - 1) / kWarps;
  const uint8_t* tile = a.w + static_cast<int64_t>(tile_index) * n_chunks * T::kBytes;
  Sum sum{part};
  __syncthreads();  // the barriers' initialization is visible to every thread
  for (int r = 0; r < n_rounds; ++r) {
    const int buffer = r % kStages<D>;
    mbar_wait(full + buffer, (r / kStages<D>)&1);  // round r's records have landed
    const int c = r * kWarps + warp;
    if (c < n_chunks)
      chunk_to_part<D>(a, smem + buffer * kRoundBytes<D> + warp * T::kBytes, c, r, warp, lane,
                       part);
    __syncthreads();  // round r's partials are written and its buffer read
    if (threadIdx.x == 0 && r + kStages<D> < n_rounds) {
      // The buffer's reads (generic proxy) before the copy's writes (async proxy).
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      constant_round_copy<D>(smem, full, tile, r + kStages<D>, n_chunks);
    }
    sum.fold(r, n_chunks);
  }
  detail::let_dependents_start();  // Trigger::late: only the writes are left
  sum.write(a, tile_index * 16);
#else
  (void)tile_index;
  __trap();  // launched only where staged_decode_enabled() found sm_90a code
#endif
}

}  // namespace

// On by default where the build has sm_90a code and the GPU runs it; MEMRA_DECODE_STAGED=0 for
// the A/B (the same bits: kernel-check compares them).
bool staged_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_DECODE_STAGED", true);
  return enabled && prefill_wgmma_available();
}

bool single_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_SINGLE_DECODE", true);
  return enabled;
}

template <DType D>
void launch_decode_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(outs.tile_begin[outs.n]);
  if (blocks == 0) return;
  if (staged_decode_enabled()) {
    constexpr auto kernel = staged_decode_kernel<D>;
    static std::atomic<uint64_t> smem_set{0};
    allow_smem_once(kernel, kStagedSmem<D>, smem_set);
    detail::launch(kernel, blocks, kThreads, kStagedSmem<D>, stream, x, outs);
  } else {
    detail::launch(single_decode_kernel<D, false>, blocks, kThreads, 0, stream, x, outs);
  }
}

template <DType D>
void launch_decode_experts(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(outs.tile_begin[outs.n]);
  if (blocks > 0)
    detail::launch(single_decode_kernel<D, true>, blocks, kThreads, 0, stream, x, outs);
}

#define MEMRA_INSTANTIATE(D)                                                               \
  template void launch_decode_single<D>(const MatmulArgs&, const MultiOut&, cudaStream_t); \
  template void launch_decode_experts<D>(const MatmulArgs&, const MultiOut&, cudaStream_t);
MEMRA_INSTANTIATE(DType::q4_k)
MEMRA_INSTANTIATE(DType::q6_k)
MEMRA_INSTANTIATE(DType::q8_0)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
