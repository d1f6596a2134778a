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
// [k 8] per 128-token x 64-k tile, tiles contiguous, so a sub-stage's x is one 16 KB copy.
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"
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
constexpr int kStepBytes = kBN * 16 * 2;  // one k16 step of the x tile: 4 KB

// Sub-stage q of the block at (row0, tok0) into a stage buffer, completing on its barrier (one
// thread issues it): tile m's quarter q % 4 of chunk q / 4 is q * 2048 bytes into the tile's
// records (a tile's chunks are contiguous); rows past the matrix repeat the last tile.
__device__ __forceinline__ void fill_stage(const MatmulArgs& a, uint8_t* stage, uint64_t* bar,
                                           int q, int row0, int tok0) {
  mbar_arrive_expect_tx(bar, kStageBytes);
  const int last_tile = (a.n_out - 1) / 16, n_chunks = a.n_in / kChunk;
#pragma unroll
  for (int m = 0; m < kTiles; ++m) {
    const int64_t tile = min(row0 / 16 + m, last_tile);
    bulk_copy(stage + m * kQuarter,
              a.w + tile * n_chunks * TiledHalf::kBytes + int64_t{q} * kQuarter, kQuarter, bar);
  }
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

// Block (x, y): tokens [128 x, + 128) of the 128-row block of outs that y names.
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const MatmulArgs x, const BlockOuts outs) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int by = static_cast<int>(blockIdx.y);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.block_begin, by, a);
  const int row0 = (by - outs.block_begin[o]) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
  const int n_sub = a.n_in / kSub;
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
      copy_stages<kStages>(
          n_sub, smem, kStageBytes, full, empty,
          [&](int q, uint8_t* stage, uint64_t* bar) { fill_stage(a, stage, bar, q, row0, tok0); });
    }
    return;
  }
  setmaxnreg_inc<kComputeRegs>();
  // Each compute warp says it is done with sub-stage q's buffer once its wgmma group has finished
  // reading it (wait_group), and its A fragments were read before that group was issued.
  auto release = [&](int q) {
    if (lane == 0) mbar_arrive(empty + q % kStages);
  };
  // acc: the chunk partial p_c (warpgroup warp / 4's rows 16 (warp % 4).., all 128 tokens: n8
  // tile j in acc[4j .. 4j + 3], mma.sync's C layout); total: the running chunk sum.
  float acc[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = total[i] = 0.0f;
  // A chunk's four sub-stages are unrolled, so the fold after them is the only place that reads
  // acc and the compiler can keep the wgmma groups of consecutive sub-stages in flight.
  for (int c = 0; c < n_sub / 4; ++c) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int q = 4 * c + u;
      const uint8_t* stage = smem + (q % kStages) * kStageBytes;
      mbar_wait(full + q % kStages, (q / kStages) & 1);  // sub-stage q has landed
      uint32_t af[4][4];
      load_a(stage, warp, lane, af);
      const uint8_t* X = stage + kRecStage;
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) wgmma_m64n128k16(acc, af[s], b_desc(X + s * kStepBytes));
      wgmma_commit();
      if (u > 0) {
        wgmma_wait<1>();  // sub-stage q - 1 is done reading
        release(q - 1);
      }
    }
    wgmma_wait<0>();  // the chunk ends: fold it in order, restart from +0
    release(4 * c + 3);
    fold_chunk(total, acc, c == 0);
  }
  store_tile<kBN>(a, total, row0, tok0, warp, lane);
#else
  __trap();  // launched only where prefill_wgmma_available() found this kernel's sm_90a code
#endif
}

}  // namespace

bool prefill_wgmma_available() {
  static std::atomic<uint64_t> checked{0}, available{0};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (!(checked.load(std::memory_order_acquire) & bit)) {
    // The code the runtime would load for this device: sm_90a only where the build has it and the
    // device is a Hopper; an sm_80 build or device gets the mma.sync kernel.
    cudaFuncAttributes attr{};
    const bool ok = cudaFuncGetAttributes(&attr, prefill_wgmma_kernel) == cudaSuccess &&
                    attr.binaryVersion == 90;
    if (!ok) (void)cudaGetLastError();
    if (ok) available.fetch_or(bit, std::memory_order_release);
    checked.fetch_or(bit, std::memory_order_release);
  }
  return (available.load(std::memory_order_acquire) & bit) != 0;
}

void launch_prefill_wgmma(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  if (outs.n < 1) fail(ErrorCode::internal, "prefill_wgmma: no outputs");
  launch_block_outs<prefill_wgmma_kernel, kBN>(x, outs, kThreads, kSmem, stream);
}

void launch_prefill_wgmma(const MatmulArgs& a, cudaStream_t stream) {
  launch_prefill_wgmma(a, BlockOuts::of(a), stream);
}

}  // namespace memra::kernels::matmul_detail
