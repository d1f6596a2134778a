// The prefill matmul for tiled F16/BF16 weights on Hopper (sm_90a): wgmma instead of mma.sync.
// A warpgroup computes 64 weight rows x 128 tokens per k16 step with one wgmma.m64n128k16: its
// four warps hand in their m16 tiles' A fragments from registers (one 16-byte shared load per
// step from the staged tiled record, as in matmul_prefill_tiled.cu) and the tensor cores read the
// x tile straight from shared memory. The block (two compute warpgroups, 128 rows x 128 tokens)
// walks K in 64-element sub-stages through kStages buffers, warp-specialized: a third warpgroup
// (one lane of it) issues each sub-stage's bulk copies (cp.async.bulk, the copy engine: eight
// 2 KB record quarters and one 16 KB x tile) as soon as the buffer is free, completing on the
// buffer's "full" mbarrier; each compute warp arrives on the buffer's "empty" mbarrier once its
// wgmma group has finished reading it. No block barrier couples the two compute warpgroups, and
// no compute warp stops to issue copies.
// Measured on the way (Nsight Compute, 8B qkv at 512 tokens): per-thread 16-byte cp.async copies
// left the SMs pulling ~17 B/clock from L2 and the warps stalled on them (0.16 instructions
// issued per scheduler cycle, tensor pipes ~20% busy); bulk copies issued by one thread of a
// compute warp, with a block barrier a sub-stage, reached 47% tensor-pipe activity at 26% of L2
// throughput (so not bound by L2); the copy warpgroup and the two barriers a buffer 57% (81.7 ->
// 68.4 us; docs/PERFORMANCE.md eleventh round).
//
// Bit-identity with mma.sync. wgmma's k16 step takes the same physical operands per output
// element as mma.sync m16n8k16 (A rows from the same registers, B columns by physical k), and on
// the H200 gives the same f32 bits from the same accumulator: measured over 10 million outputs of
// 16-step chains with operand magnitudes spread over 2^15 (docs/PERFORMANCE.md). So every
// element follows matmul.cu's canonical order exactly as the mma.sync kernels do: a chunk's
// partial is a chain of 16 steps from registers zeroed beforehand (+0), chunks fold left to right.
// kernel-check compares this kernel with the ggml-layout mma.sync kernel bit for bit.
//
// x layout. The mma kernels' A fragments hold logical k 4t..4t+3 where the PTX layout puts
// physical k 2t, 2t + 1 and 2t + 8, 2t + 9 (weight_frag.cuh's permutation); mma.sync kernels
// feed B the same way from natural-order x with one 8-byte load. wgmma reads B by physical k, so
// this kernel reads x_to_f16_kernel's second copy (args.xp), written in physical k order (in each
// 16-element step, physical 0..7 hold logical 0, 1, 4, 5, 8, 9, 12, 13 and 8..15 the rest) and
// already in the shared-memory tile layout (xp_offset in matmul_launch.cuh): K-major without
// swizzle, 8-token x 8-k core matrices of 128 bytes, [step 4][token group 16][k half 2][token 8]
// [k 8] per 128-token x 64-k tile, tiles contiguous, so a sub-stage's x is one 16 KB copy. Or
// (kRows, x.xp_rows) x's rows form (matmul_launch.cuh: x_rows_offset), a sub-stage's x one tensor
// copy of a 64-k x 128-token box (wgmma.cuh: b_desc_rows).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/env.h"
#include "kernels/cuda_status.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/scratch_layout.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail {
namespace {

// kCompute threads compute (two warpgroups); the copy warpgroup gives back registers (setmaxnreg)
// to them: 288 threads would put three warps on one scheduler's 16K registers and cap every warp
// at 168 (spilling the 64 + 64 accumulators); 384 threads with 40 + 2 x 232 a scheduler fit.
constexpr int kBM = 128, kBN = 128, kSub = 64, kCompute = 256, kThreads = kCompute + 128;
constexpr int kStages = 6;
constexpr int kTiles = kBM / 16;
constexpr int kQuarter = TiledHalf::kBytes / 4;  // a sub-stage of one record: 2048 B
constexpr int kRecStage = kTiles * kQuarter;     // 16 KB
constexpr int kXStage = kBN * kSub * 2;          // 16 KB
constexpr int kStageBytes = kRecStage + kXStage;
constexpr int kSmem = kStages * kStageBytes + 2 * kStages * 8;  // + two mbarriers a stage
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");
static_assert(kBN == kXpTokens && kSub == kXpK, "the x tile is xp_offset's tile");

// The kernel's pieces exist only in its sm_90a code (other passes compile an empty kernel).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int kCopyRegs = 40, kComputeRegs = 232;

// Sub-stage q of the block at (row0, tok0) into a stage buffer, completing on its barrier (one
// thread issues it): tile m's quarter q % 4 of chunk q / 4 is q * 2048 bytes into the tile's
// records (a tile's chunks are contiguous); rows past the matrix repeat the last tile.
template <bool kRows>
__device__ __forceinline__ void fill_stage(const MatmulArgs& a, const CUtensorMap* xmap,
                                           uint8_t* stage, uint64_t* bar, int q, int row0,
                                           int tok0) {
  mbar_arrive_expect_tx(bar, kStageBytes);
  const int last_tile = (a.n_out - 1) / 16, n_chunks = a.n_in / kChunk;
#pragma unroll
  for (int m = 0; m < kTiles; ++m) {
    const int64_t tile = min(row0 / 16 + m, last_tile);
    bulk_copy(stage + m * kQuarter,
              a.w + tile * n_chunks * TiledHalf::kBytes + int64_t{q} * kQuarter, kQuarter, bar);
  }
  if constexpr (kRows)
    tensor_copy_2d(stage + kRecStage, xmap, q * kSub, tok0, bar);
  else
    bulk_copy(stage + kRecStage, a.xp + xp_offset(tok0, q * kSub, a.n_in), kXStage, bar);
}

// The chunk's end: total (the running chunk sum) takes the chunk partial acc in order, acc restarts
// from +0.
__device__ __forceinline__ void fold_chunk(float (&total)[64], float (&acc)[64], bool first) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    total[i] = first ? acc[i] : __fadd_rn(total[i], acc[i]);
    acc[i] = 0.0f;
  }
}

// This warp's A fragments of a sub-stage's four k16 steps: one 16-byte shared load each.
__device__ __forceinline__ void load_a(const uint8_t* stage, int warp, int lane,
                                       uint32_t (&af)[4][4]) {
  const uint8_t* R = stage + warp * kQuarter + 16 * lane;
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint4 v = ld_u128(R + 512 * s);
    af[s][0] = v.x;
    af[s][1] = v.y;
    af[s][2] = v.z;
    af[s][3] = v.w;
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kPersistent false: block (x, y) computes tokens [128 x, + 128) of the 128-row block of outs
// that y names, one tile a block. kPersistent true: one block an SM walks tiles blockIdx.x,
// + gridDim.x, ... in the same order (tile t: token tile t % n_x of row block t / n_x), its copy
// lane running on into the next tile's sub-stages while the compute warps fold and store this
// one, so a tile's first stages and its block's start no longer stand alone on the SM. The stage
// ring and its barriers' phases run on across the block's tiles (sub-stage index Q counts them
// all). Each tile's arithmetic is the same either way, so are the bits. kRows: x is x.xp's rows
// form, read through xmap (x_rows_map; a zeroed map otherwise).
template <bool kPersistent, bool kRows>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const MatmulArgs x, const BlockOuts outs,
                         const __grid_constant__ CUtensorMap xmap) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem_xp[];
  uint8_t* const smem = kRows ? rows_smem() : smem_xp;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int n_x = (x.n_tokens + kBN - 1) / kBN;
  const int n_tiles = kPersistent ? n_x * outs.block_begin[outs.n] : 1;
  const int first = kPersistent ? static_cast<int>(blockIdx.x) : 0;
  const int step = kPersistent ? static_cast<int>(gridDim.x) : 1;
  // Tile t's output (a), first row and first token.
  const auto tile = [&](int t, MatmulArgs& a, int& row0, int& tok0) {
    const int bx = kPersistent ? t % n_x : static_cast<int>(blockIdx.x);
    const int by = kPersistent ? t / n_x : static_cast<int>(blockIdx.y);
    a = x;
    const int o = take_output(outs, outs.block_begin, by, a);
    row0 = (by - outs.block_begin[o]) * kBM;
    tok0 = bx * kBN;
  };
  MatmulArgs a;  // the tile's output, first row and first token (the block's first tile here)
  int row0, tok0;
  tile(first, a, row0, tok0);
  const int n_sub = x.n_in / kSub;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* const empty = full + kStages;
  if (tid == 0) {
    mbar_init_stages(full, kStages);
    mbar_init_stages(empty, kStages, kCompute / 32);
  }
  __syncthreads();
  if (warp >= kCompute / 32) {  // the copy warpgroup: its first lane issues the copies
    setmaxnreg_dec<kCopyRegs>();
    // (Shared by the first warp's lanes, as the Q4_K kernel's, these copies measured 5% slower on
    // the H200: 9 copies a sub-stage are few enough for one lane.)
    if (warp == kCompute / 32 && lane == 0) {
      int Q = 0;  // the block's sub-stages so far, over its tiles
      for (int t = first; t < n_tiles; t += step, Q += n_sub) {
        copy_stages<kStages>(
            n_sub, smem, kStageBytes, full, empty,
            [&](int q, uint8_t* stage, uint64_t* bar) {
              fill_stage<kRows>(a, &xmap, stage, bar, q, row0, tok0);
            },
            Q);
        if (t + step < n_tiles) tile(t + step, a, row0, tok0);
      }
    }
    return;
  }
  setmaxnreg_inc<kComputeRegs>();
  // Each compute warp says it is done with sub-stage Q's buffer once its wgmma group has finished
  // reading it (wait_group), and its A fragments were read before that group was issued.
  auto release = [&](int Q) {
    if (lane == 0) mbar_arrive(empty + Q % kStages);
  };
  // acc: the chunk partial p_c (warpgroup warp / 4's rows 16 (warp % 4).., all 128 tokens: n8
  // tile j in acc[4j .. 4j + 3], mma.sync's C layout); total: the running chunk sum. acc is +0
  // after every fold, and a tile's first fold sets total, so both start each tile as they should.
  float acc[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = total[i] = 0.0f;
  int Q0 = 0;  // the block's sub-stages before this tile
  for (int t = first; t < n_tiles; t += step, Q0 += n_sub) {
    // A chunk's four sub-stages are unrolled, so the fold after them is the only place that reads
    // acc and the compiler can keep the wgmma groups of consecutive sub-stages in flight.
    for (int c = 0; c < n_sub / 4; ++c) {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int Q = Q0 + 4 * c + u;
        const uint8_t* stage = smem + (Q % kStages) * kStageBytes;
        mbar_wait(full + Q % kStages, (Q / kStages) & 1);  // sub-stage Q has landed
        uint32_t af[4][4];
        load_a(stage, warp, lane, af);
        const uint8_t* X = stage + kRecStage;
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < 4; ++s) wgmma_m64n128k16(acc, af[s], x_step_desc<kRows, kBN>(X, s));
        wgmma_commit();
        if (u > 0) {
          wgmma_wait<1>();  // sub-stage Q - 1 is done reading
          release(Q - 1);
        }
      }
      wgmma_wait<0>();  // the chunk ends: fold it in order, restart from +0
      release(Q0 + 4 * c + 3);
      fold_chunk(total, acc, c == 0);
    }
    store_tile<kBN>(a, total, row0, tok0, warp, lane);
    if (t + step < n_tiles) tile(t + step, a, row0, tok0);
  }
#else
  __trap();  // launched only where prefill_wgmma_available() found this kernel's sm_90a code
#endif
}

// The persistent grid (prefill_wgmma_kernel<true>) where a launch has more tiles than SMs: on by
// default, MEMRA_WGMMA_PERSISTENT=0 for the A/B (the same bits). Measured on the H200 (thirty-fifth
// round, PERFORMANCE.md): 8B shapes at 512 tokens qkv 87.1 -> 85.6 us, gate 120.7 -> 118.9, the
// output matrix (36 waves) 1,418.8 -> 1,297.9; 8B BF16 pp512 21,340 -> 21,523 tok/s, pp2048
// 21,029 -> 21,154. (The Q4_K and Q6_K kernels' persistent forms measured no faster and were not
// kept.)
bool persistent_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_PERSISTENT", true);
  return enabled;
}

}  // namespace

// Kept per device after the first query: split_pays asks it for every Q4_K, Q6_K and Q8_0 output
// of a 33-64-token step, several times a launch (uses_wgmma), on the host's path of eager steps.
int device_sms() {
  constexpr int kKnownDevices = 64;
  static std::atomic<int> known[kKnownDevices] = {};
  int device = 0, n = 0;
  detail::check_cuda(cudaGetDevice(&device), "prefill_wgmma", "cudaGetDevice");
  const bool kept = device >= 0 && device < kKnownDevices;
  if (kept && (n = known[device].load(std::memory_order_relaxed)) > 0) return n;
  detail::check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device),
                     "prefill_wgmma", "cudaDeviceGetAttribute");
  if (kept) known[device].store(n, std::memory_order_relaxed);
  return n;
}

// MEMRA_SPLIT_RULE: `waves` (the default) wherever the doubled grid takes fewer than twice the
// waves (the 128-row grid's last wave at most half full: the 8B's gate/up at 64 tokens, 192
// blocks, 2 waves, against 3 of half the chain); `narrow` only while it fits one wave. Measured
// in the forty-ninth round (H200, 8B Q4_K_M at 40 / 64 sequences: 3,660 / 5,622 tok/s against
// 3,574 / 5,533).
bool split_pays(int64_t row_blocks) {
  static const bool waves = env_choice("MEMRA_SPLIT_RULE", {"narrow", "waves"}, 1) == 1;
  return split_pays_on(row_blocks, device_sms(), waves);
}

// MEMRA_SPLIT_HALVES: 1 (split_halves_on's rule, the default since the fifty-first round: H100, 8B
// Q4_K_M c64 5,604 -> 6,117 tok/s, c40 3,811 -> 3,980, Q8_0 c64 6,416 -> 6,720, 0.6B c64 14,255
// -> 15,997; the Q4_K down product at 64 tokens 56.2 -> 48.0 us), 0 (the A/B), all (every split
// launch: a diagnostic; q/k/v's at 64 tokens, two waves of 32-token blocks, 25.5 -> 35.5 us: a
// 32-token chunk takes about as long as a 64-token one).
bool split_halves_take(int64_t split_blocks, int64_t n_tokens) {
  static const int mode = env_choice("MEMRA_SPLIT_HALVES", {"0", "1", "all"}, 1);
  return mode == 2 || (mode == 1 && split_halves_on(split_blocks, n_tokens, device_sms()));
}

// MEMRA_SPLIT_SMALL: q8_0 (the default since the fifty-third round: Q8_0's outputs of K 4,096 or
// more, split_small_q8_0), 0, 1 (every split form), or scaled (the scaled kernel's outputs: Q6_K
// and Q8_0, any K). Measured in the fifty-first round (H100, with the halves): =1 8B Q4_K_M c20
// 2,382 -> 2,298 tok/s, c32 3,538 -> 3,457; at 32 tokens the scaled kernel gains (Q8_0 q/k/v 32.6
// -> 23.6 us, Q6_K 34.6 -> 24.8, Q8_0 down 59.1 -> 52.9), the pipelined Q4_K one loses (q/k/v
// 23.4 -> 25.1, down 53.7 -> 55.2) to the cluster kernel. In the fifty-third (H100,
// `gpu_check.sh small`, tok/s, means of two alternated rounds), against 0: =scaled 8B Q8_0 c20
// 2,311 -> 2,685, c32 3,332 -> 4,093, but 8B Q4_K_M (its Q6_K v and half its downs) c20 2,577 ->
// 2,463, c32 3,783 -> 3,704; Q8_0's alone (every K) 8B Q8_0 c20 +17.8%, c32 +23.6%, 8B Q4_K_M
// unchanged (no Q8_0 output), but the 0.6B Q8_0 (K 1,024-3,072, where the tiled decode kernel
// serves them, not the cluster kernel) c20 7,759 -> 7,059, c32 11,271 -> 10,364; hence K 4,096 or
// more. (17-32 tokens: above kWgmmaMinTokens, at most the token halves' 32.)
bool split_small_takes(int64_t n_tokens, DType wtype, int64_t n_in) {
  static const int mode = env_choice("MEMRA_SPLIT_SMALL", {"0", "1", "scaled", "q8_0"}, 3);
  const bool takes = mode == 1 || (mode == 2 && (wtype == DType::q6_k || wtype == DType::q8_0)) ||
                     (mode == 3 && split_small_q8_0(wtype, n_in));
  return takes && n_tokens > kWgmmaMinTokens && n_tokens <= 32;
}

bool prefill_wgmma_available() {
  static std::atomic<uint64_t> checked{0}, available{0};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (!(checked.load(std::memory_order_acquire) & bit)) {
    // The code the runtime would load for this device: sm_90a only where the build has it and the
    // device is a Hopper; an sm_80 build or device gets the mma.sync kernel.
    cudaFuncAttributes attr{};
    const bool ok =
        cudaFuncGetAttributes(&attr, prefill_wgmma_kernel<false, false>) == cudaSuccess &&
        attr.binaryVersion == 90;
    if (!ok) (void)cudaGetLastError();
    if (ok) available.fetch_or(bit, std::memory_order_release);
    checked.fetch_or(bit, std::memory_order_release);
  }
  return (available.load(std::memory_order_acquire) & bit) != 0;
}

void launch_prefill_wgmma(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  if (outs.n < 1) fail(ErrorCode::internal, "prefill_wgmma: no outputs");
  const int64_t n_tiles =
      (x.n_tokens + kBN - 1) / kBN * static_cast<int64_t>(outs.block_begin[outs.n]);
  const CUtensorMap xmap = x_rows_map(x, kBN);
  if (x.xp_rows) {  // the rows form has the persistent kernel only, its grid at most a tile an SM
    if (n_tiles > INT32_MAX) fail(ErrorCode::internal, "prefill_wgmma: {} tiles", n_tiles);
    static std::atomic<uint64_t> smem_set{0};
    allow_smem_once(prefill_wgmma_kernel<true, true>, kSmem, smem_set);
    const auto grid = static_cast<unsigned>(std::min<int64_t>(device_sms(), n_tiles));
    detail::launch(prefill_wgmma_kernel<true, true>, dim3(grid), kThreads, kSmem, stream, x, outs,
                   xmap);
    return;
  }
  if (persistent_enabled()) {
    const int sms = device_sms();
    if (n_tiles > sms && n_tiles <= INT32_MAX) {
      static std::atomic<uint64_t> smem_set{0};
      allow_smem_once(prefill_wgmma_kernel<true, false>, kSmem, smem_set);
      detail::launch(prefill_wgmma_kernel<true, false>, dim3(static_cast<unsigned>(sms)), kThreads,
                     kSmem, stream, x, outs, xmap);
      return;
    }
  }
  launch_block_outs<prefill_wgmma_kernel<false, false>, kBN>(x, outs, kThreads, kSmem, stream,
                                                             xmap);
}

void launch_prefill_wgmma(const MatmulArgs& a, cudaStream_t stream) {
  launch_prefill_wgmma(a, BlockOuts::of(a), stream);
}

}  // namespace memra::kernels::matmul_detail
