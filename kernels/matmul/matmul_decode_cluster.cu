// The decode matmul at 17-32 tokens over tiled weights (tiled.cuh) on Hopper (sm_90a): x staged
// once in shared memory for a cluster of blocks instead of read per 16-row tile from L2.
//
// Why. The tiled decode kernel (matmul_decode_tiled.cu) gives each 16-row tile its own block,
// which reads the batch's whole x from L2 as mma B fragments: at 64 tokens and K = 4096 that is
// 512 KB a tile, 134 MB for a 4096-row matrix against its 9 MB of Q4_K weights, and the Qwen3-8B
// profile at 64 sequences measured those launches at 47-58 us (47% of the step). Here
// a block owns two row tiles and a cluster of blocks (MEMRA_DECODE_CLUSTER, 4 by default) shares
// each chunk of x: every block's copy warp bulk-copies a share of the chunk's token rows with
// multicast into every block of the cluster, so x crosses L2 once per cluster (32 rows x 4
// blocks = 128 rows) instead of once per 16 rows.
//
// Block: kTiles = 2 m16 row tiles x the batch's tokens (8 kNT, absent ones zero). Eight compute
// warps: for each tile and token half (a team), kSplit = 2 warps taking the tile's chunks in turn
// (c = p, p + 2, ...), so each of the SM's schedulers has two; and one copy warp, whose lanes fill
// kStages stages of [x chunk: the tokens' 256 f16 each, rows 544 bytes apart so the B loads are
// conflict-free | the block's two tile records of the chunk] on a "full" mbarrier. A compute warp,
// done with a stage, arrives on that stage's "empty" mbarrier in every block of the cluster (each
// one's multicast writes there), so a copy lane refills a stage only once all the cluster's
// readers are gone.
//
// Order: every chunk partial p_c is chunk_partial's (tiled_chunk.cuh), the tiled decode kernel's
// instructions on the same operands (B fragments read from shared memory instead of global, the
// same values), so the same bits; the team's warp 0 keeps the running sum and adds each round's
// partials in chunk order (its own, then warp 1's through shared memory), matmul.cu's canonical
// order. kernel-check compares the outputs with the ggml-layout kernels bit for bit.
//
// Where it pays (memra-kernel-bench, Qwen3-8B shapes, H200; docs/PERFORMANCE.md seventeenth and
// eighteenth rounds): at 32 tokens Q4_K q/k/v 21 vs 54 us, gate 39 vs 57 (wgmma), down 54 vs 83;
// the other dtypes only where wgmma does not take the output (cluster_decode_takes). At 64 tokens
// (kNT = 8, which the template takes but nothing instantiates) its time doubles with the tokens,
// 44 vs 63 on q/k/v but 82 vs 64 on gate (wgmma) and 114 vs 119 on down: 8B Q4_K_M at 64
// sequences 3,279 vs 3,553 tok/s, so 33-64 tokens keep the kernels before it. What bounds it
// (Nsight Compute at 32 sequences): issue, with few warps: 0.37-0.49 instructions a cycle per
// scheduler from 2.4-3.7 warps, each waiting 7.6 cycles an instruction (long scoreboard 1.8,
// fixed-latency dependences 1.6); a gate launch takes 19.6 us with its weights in L2 (ncu's
// replays) against 38.5 us streamed from DRAM, so DRAM latency is not hidden either, and a deeper
// ring (6-8 stages) did not help: it costs Q4_K its second block an SM.
#include <atomic>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/cluster.cuh"
#include "kernels/matmul/tiled_chunk.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kTiles = 2;   // m16 row tiles a block
constexpr int kHalves = 2;  // token halves: warps a tile and chunk, each with half the tokens
constexpr int kSplit = 2;   // warps a tile and half, taking its chunks in turn
constexpr int kTeams = kTiles * kHalves;  // a team: the kSplit warps of one tile and half
constexpr int kCompute = kTeams * kSplit;
constexpr int kThreads = (kCompute + 1) * 32;  // + the copy warp
constexpr int kXRow = 2 * kChunk + 32;         // bytes between staged token rows

template <DType D, int kNT>
struct ClusterCfg {
  using T = Tiled<D>;
  static constexpr int kXBytes = 8 * kNT * kXRow;
  static constexpr int kStage = kXBytes + kTiles * T::kBytes;
  static constexpr int kWarpTiles = kNT / kHalves;  // n8 token tiles a warp
  static_assert(kWarpTiles * kHalves == kNT, "token tiles split evenly");
  // The partials warps p > 0 hand to their team's warp 0: [round % 2][p - 1][team][register][lane].
  static constexpr int kXchgFloats = 2 * (kSplit - 1) * kTeams * kWarpTiles * 4 * 32;
  // 4 stages: Q4_K's 96 KB let two blocks share an SM. More stages (6-8, as many as fit) measured
  // slower or the same at 32 tokens (Q4_K q/k/v 30 vs 22 us: one block an SM; F16 27 vs 27),
  // so the look-ahead is not what bounds it (docs/PERFORMANCE.md, eighteenth round).
  static constexpr int kStages = 4;
  static constexpr int kSmem = kStages * kStage + 4 * kXchgFloats + 2 * kStages * 8;
  static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");
  static_assert(kXRow % 16 == 0 && T::kBytes % 16 == 0, "bulk copies of 16-byte pieces");
};

template <DType D, int kNT>
__global__ void __launch_bounds__(kThreads, 1)
    cluster_decode_kernel(const MatmulArgs a, int copy_lanes) {
  detail::wait_for_inputs(detail::Trigger::late);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = ClusterCfg<D, kNT>;
  using T = Tiled<D>;
  extern __shared__ __align__(128) uint8_t smem[];
  float* xchg = reinterpret_cast<float*>(smem + C::kStages * C::kStage);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::kStages * C::kStage + 4 * C::kXchgFloats);
  uint64_t* empty = full + C::kStages;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_chunks = a.n_in / kChunk;
  const uint32_t rank = cluster_rank(), n_blocks = cluster_size();
  if (threadIdx.x == 0) {
    mbar_init_stages(full, C::kStages);
    mbar_init_stages(empty, C::kStages, static_cast<int>(n_blocks) * kTeams);
  }
  // Token rows past the batch stay zero in every stage: the copies write only the batch's rows.
  for (int s = 0; s < C::kStages; ++s) {
    uint4* xs = reinterpret_cast<uint4*>(smem + s * C::kStage);
    for (int i = a.n_tokens * (kXRow / 16) + threadIdx.x; i < C::kXBytes / 16; i += kThreads)
      xs[i] = make_uint4(0u, 0u, 0u, 0u);
  }
  cluster_sync();  // every block's barriers exist before any copy lands or arrival comes

  const int tile0 = static_cast<int>(blockIdx.x) * kTiles;
  if (warp == kCompute) {
    // One lane (copy_lanes 1) or every lane of the warp (32) issues the copies: lane 0 announces
    // the stage's bytes, each lane issues its share of the records and token rows (a copy may
    // complete before the announcement: the phase still waits for that arrival).
    const int lanes = copy_lanes;
    if (lane < lanes) {
      const int last_tile = (a.n_out + 15) / 16 - 1;
      const uint16_t all = static_cast<uint16_t>((1u << n_blocks) - 1u);
      for (int c = 0; c < n_chunks; ++c) {
        const int s = c % C::kStages;
        if (c >= C::kStages) mbar_wait(empty + s, (c / C::kStages - 1) & 1);
        uint8_t* stage = smem + s * C::kStage;
        if (lane == 0)
          mbar_arrive_expect_tx(full + s, a.n_tokens * 2 * kChunk + kTiles * T::kBytes);
        for (int i = lane; i < kTiles; i += lanes) {
          const int64_t tile = min(tile0 + i, last_tile);  // a tile past the matrix: never stored
          bulk_copy(stage + C::kXBytes + i * T::kBytes, a.w + (tile * n_chunks + c) * T::kBytes,
                    T::kBytes, full + s);
        }
        for (int n = static_cast<int>(rank) + lane * static_cast<int>(n_blocks); n < a.n_tokens;
             n += lanes * static_cast<int>(n_blocks)) {
          bulk_copy_multicast(stage + n * kXRow,
                              a.xh + static_cast<int64_t>(n) * a.n_in + c * kChunk, 2 * kChunk,
                              full + s, all);
        }
      }
    }
    detail::let_dependents_start();
  } else {
    // Warp (p kHalves + h) kTiles + i: tile i, token half h, chunks c = p mod kSplit.
    const int i = warp % kTiles, h = warp / kTiles % kHalves, p = warp / kTeams;
    const int team = i * kHalves + h, g = lane >> 2, t = lane & 3;
    constexpr int kWT = C::kWarpTiles, kRegs = kWT * 4;
    const int tok0 = 8 * kWT * h;
    auto xchg_slot = [&](int r, int q) {  // warp q's partial of round r, this lane's registers
      return xchg + (((r & 1) * (kSplit - 1) + q - 1) * kTeams + team) * kRegs * 32 + lane;
    };
    float total[kWT][4] = {};
    const int n_rounds = (n_chunks + kSplit - 1) / kSplit;
    for (int r = 0; r < n_rounds; ++r) {
      const int c = r * kSplit + p;
      float acc[kWT][4] = {};  // the chunk partial p_c (matmul.cu), from +0
      if (c < n_chunks) {
        const int s = c % C::kStages;
        mbar_wait(full + s, (c / C::kStages) & 1);
        const uint8_t* stage = smem + s * C::kStage;
        LaneChunk<D> cur;
        cur.template load<false>(stage + C::kXBytes + i * T::kBytes, lane);
        // Token tok0 + g's elements 4t.. of each step.
        const uint8_t* xrow = stage + (tok0 + g) * kXRow + 8 * t;
        chunk_partial<D, kWT>(
            a, cur,
            [&](int n, int st) {
              return *reinterpret_cast<const uint2*>(xrow + 8 * n * kXRow + 32 * st);
            },
            lane, c * kChunk, acc, tok0);
        __syncwarp();
        if (lane < static_cast<int>(n_blocks)) mbar_arrive_remote(empty + s, lane);
        if (p > 0) {
          float* mine = xchg_slot(r, p);
#pragma unroll
          for (int n = 0; n < kWT; ++n) {
#pragma unroll
            for (int j = 0; j < 4; ++j) mine[(4 * n + j) * 32] = acc[n][j];
          }
        }
      }
      named_barrier_sync(1 + team, kSplit * 32);  // the team's partials of round r are written
      if (p == 0) {
#pragma unroll
        for (int q = 0; q < kSplit; ++q) {
          const int cq = r * kSplit + q;
          if (cq < n_chunks) {
            const float* theirs = q == 0 ? nullptr : xchg_slot(r, q);
#pragma unroll
            for (int n = 0; n < kWT; ++n) {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const float v = q == 0 ? acc[n][j] : theirs[(4 * n + j) * 32];
                total[n][j] = cq == 0 ? v : __fadd_rn(total[n][j], v);
              }
            }
          }
        }
      }
    }
    detail::let_dependents_start();  // only the writes are left
    if (p == 0) {
#pragma unroll
      for (int n = 0; n < kWT; ++n) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = (tile0 + i) * 16 + g + 8 * (j >> 1);
          const int tok = tok0 + 8 * n + 2 * t + (j & 1);
          if (row < a.n_out && tok < a.n_tokens)
            a.y[static_cast<int64_t>(tok) * a.ldy + row] = total[n][j] * a.xinv[tok];
        }
      }
    }
  }
  cluster_sync();  // no block leaves while another may still copy into it or arrive on it
#else
  __trap();  // launched only where cluster_decode_takes() found sm_90a code
#endif
}

// Blocks a cluster: MEMRA_DECODE_CLUSTER (1, 2, 4 or 8; the A/B of the multicast's reach) where
// set, else 2 for the long products (K > 4,096: down) of every dtype but Q4_K and 4 elsewhere
// (memra-kernel-bench at 32 tokens, clusters of 2 vs 4: down F16 51 vs 64 us, Q8_0 66 vs 80, Q6_K
// 66 vs 83, but Q4_K 60 vs 54; q/k/v and the wide products lose with 2, e.g. Q4_K q/k/v 24 vs 21).
// The cluster's size changes which block stages which token rows, never a row's arithmetic.
int cluster_blocks(DType d, int n_in) {
  static const int forced = [] {  // 0: not forced
    const int i = env_choice("MEMRA_DECODE_CLUSTER", {"1", "2", "4", "8"}, -1);
    return i < 0 ? 0 : 1 << i;
  }();
  if (forced > 0) return forced;
  return n_in > 4096 && d != DType::q4_k ? 2 : 4;
}

// MEMRA_DECODE_COPY_LANES=0: one lane of the copy warp issues every copy (the A/B).
int copy_lanes() {
  static const int n = env_switch("MEMRA_DECODE_COPY_LANES", true) ? 32 : 1;
  return n;
}

template <DType D, int kNT>
void launch(const MatmulArgs& a, cudaStream_t stream) {
  using C = ClusterCfg<D, kNT>;
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(cluster_decode_kernel<D, kNT>, C::kSmem, smem_set);
  const int n_cluster = cluster_blocks(D, a.n_in);
  const int tiles = (a.n_out + 15) / 16;
  const int blocks = ((tiles + kTiles - 1) / kTiles + n_cluster - 1) / n_cluster * n_cluster;
  detail::launch_clustered(cluster_decode_kernel<D, kNT>, dim3(blocks), dim3(kThreads), C::kSmem,
                           stream, dim3(static_cast<unsigned>(n_cluster)), a, copy_lanes());
}

}  // namespace

// Measured at 32 tokens on the Qwen3-8B shapes (memra-kernel-bench, cluster vs before; us,
// receipts/2026-12-02-kernel-bench-32{,-cluster2,-unclustered}-ab-dispatch-base.json):
//   Q4_K  q/k/v 21 vs 54, gate 39 vs 59 (wgmma), down 54 vs 83, output 345 vs 449 (wgmma)
//   Q6_K  q/k/v 32 vs 48, gate 61 vs 64 (wgmma), down 66 vs 70 (in clusters of 2), output 576
//         vs 518 (wgmma)
//   Q8_0  q/k/v 31 vs 55, gate 58 vs 55 (wgmma), down 66 vs 87 (2), output 548 vs 440 (wgmma)
//   F16   q/k/v 27 vs 46, gate 49 vs 39 (wgmma), down 51 vs 70 (2), output 452 vs 334 (wgmma)
// So Q4_K everywhere, the other dtypes where wgmma does not take the output. Measured again in the
// twenty-eighth round, since the folded wgmma kernels and the tiled decode kernel's token groups
// (receipts/2026-12-03-kernel-bench-32{,-no-cluster,-0.6b-cluster-{0,1}}.json, us at 32 tokens,
// cluster vs not): 8B Q4_K q/k/v 21.6 vs 33.4, down 53.7 vs 54.5, output 346 vs 301 (wgmma); the
// 0.6B's shapes (K 1,024 and 3,072), Q4_K q/k/v 10.3 vs 9.6, gate 10.3 vs 9.7, down 14.2 vs 10.0,
// Q6_K down 14.5 vs 10.0: a cluster of 4 splits K into 256-768-element slices, too little work
// a block to pay for the cluster's reduction. So now: K of 4,096 or more (a slice of 1,024 or
// more; MEMRA_CLUSTER_MIN_K=0|1024|2048|3072|4096 moves the bound), and wide outputs to wgmma for
// every dtype (MEMRA_CLUSTER_Q4K_WIDE=1: Q4_K's to the cluster kernel, the rule before). Decode
// tok/s, same runs: 0.6B c24 / c32 7,875 / 9,526 -> 8,738 / 10,568 (no K of 4,096 there), 8B
// 2,671 / 3,309 -> 2,703 / 3,351 (Q4_K's wide outputs on wgmma).
// (prefill_wgmma_available() finds the sm_90a code of this build on a device that runs it: this
// kernel's sm_90a code comes from the same compilation.)
bool cluster_decode_takes(DType d, int64_t n_out, int64_t n_in, int64_t n_tokens, bool wide_pays) {
  static const bool enabled = env_switch("MEMRA_CLUSTER_DECODE", true);
  static const bool every = env_switch("MEMRA_CLUSTER_EVERY", false);
  static const bool q4k_wide = env_switch("MEMRA_CLUSTER_Q4K_WIDE", false);
  static const int64_t min_k =
      int64_t{1024} * env_choice("MEMRA_CLUSTER_MIN_K", {"0", "1024", "2048", "3072", "4096"},
                                 static_cast<int>(kClusterMinK / 1024));
  if (!enabled || n_tokens <= kClusterMinTokens || n_tokens > kClusterMaxTokens || n_out <= 0 ||
      n_in <= 0 || n_in < min_k || !prefill_wgmma_available())
    return false;
  return every || (d == DType::q4_k && q4k_wide) || !wide_pays;
}

template <DType D>
void launch_decode_cluster(const MatmulArgs& a, cudaStream_t stream) {
  launch<D, kClusterMaxTokens / 8>(a, stream);
}

template void launch_decode_cluster<DType::q4_k>(const MatmulArgs&, cudaStream_t);
template void launch_decode_cluster<DType::q6_k>(const MatmulArgs&, cudaStream_t);
template void launch_decode_cluster<DType::q8_0>(const MatmulArgs&, cudaStream_t);
template void launch_decode_cluster<DType::f16>(const MatmulArgs&, cudaStream_t);
template void launch_decode_cluster<DType::bf16>(const MatmulArgs&, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
