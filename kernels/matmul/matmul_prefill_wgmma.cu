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
#include "core/env.h"
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

// Diagnostic only: the same step with A read by the tensor cores from shared memory (descriptor
// like b_desc's over 64 rows), which this kernel's record layout cannot feed correctly.
__device__ __forceinline__ void wgmma_ss_diag(float (&d)[64], uint64_t adesc, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(adesc), "l"(b));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Diagnostics under measurement (wrong outputs, timing only; kernel-check never sets them): bit 1
// copies the first kStages sub-stages only and computes on them without waiting (the compute
// side's own rate); bit 2 issues each step with A from shared memory instead of registers.
// Bit 4 leaves out the chunk ends' drain and fold (one chain over all of K).
// Bits 8 and 16 let 2 or 3 wgmma groups a warpgroup stay in flight instead of 1 (stages released
// later); these give the same bits.
constexpr int kNoData = 1, kSmemA = 2, kNoFold = 4, kDepth2 = 8, kDepth3 = 16;

template <int kDiag>
__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_kernel(const MatmulArgs a) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int row0 = static_cast<int>(blockIdx.y) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
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
          (kDiag & kNoData) ? min(n_sub, kStages) : n_sub, smem, kStageBytes, full, empty,
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
      if (!(kDiag & kNoData) || q < kStages)
        mbar_wait(full + q % kStages, (q / kStages) & 1);  // sub-stage q has landed
      uint32_t af[4][4];
      load_a(stage, warp, lane, af);
      const uint8_t* X = stage + kRecStage;
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        if constexpr ((kDiag & kSmemA) != 0)
          wgmma_ss_diag(acc, b_desc(stage + (warp / 4) * 8192 + s * 2048),
                        b_desc(X + s * kStepBytes));
        else
          wgmma_m64n128k16(acc, af[s], b_desc(X + s * kStepBytes));
      }
      wgmma_commit();
      constexpr int kDepth = (kDiag & kDepth3) ? 3 : (kDiag & kDepth2) ? 2 : 1;
      if constexpr (kDepth == 1) {
        if (u > 0 || ((kDiag & kNoFold) != 0 && q > 0)) {
          wgmma_wait<1>();  // sub-stage q - 1 is done reading
          release(q - 1);
        }
      } else {
        if (u >= kDepth) {
          wgmma_wait<kDepth>();
          release(q - kDepth);
        }
      }
    }
    if constexpr ((kDiag & kNoFold) == 0) {
      constexpr int kDepth = (kDiag & kDepth3) ? 3 : (kDiag & kDepth2) ? 2 : 1;
      wgmma_wait<0>();  // the chunk ends: fold it in order, restart from +0
#pragma unroll
      for (int r = 4 - kDepth; r < 4; ++r) release(4 * c + r);
      fold_chunk(total, acc, c == 0);
    }
  }
  if constexpr ((kDiag & kNoFold) != 0) {
    wgmma_wait<0>();
    fold_chunk(total, acc, true);
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
    const bool ok = cudaFuncGetAttributes(&attr, prefill_wgmma_kernel<0>) == cudaSuccess &&
                    attr.binaryVersion == 90;
    if (!ok) (void)cudaGetLastError();
    if (ok) available.fetch_or(bit, std::memory_order_release);
    checked.fetch_or(bit, std::memory_order_release);
  }
  return (available.load(std::memory_order_acquire) & bit) != 0;
}

template <int kDiag>
void launch_diag(const MatmulArgs& a, cudaStream_t stream) {
  constexpr auto kernel = prefill_wgmma_kernel<kDiag>;
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(kernel, kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + kBN - 1) / kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  detail::launch(kernel, grid, kThreads, kSmem, stream, a);
}

void launch_prefill_wgmma(const MatmulArgs& a, cudaStream_t stream) {
  static const int diag =
      env_choice("MEMRA_WGMMA_DIAG",
                 {"off", "no-data", "smem-a", "no-data-smem-a", "no-fold", "no-data-no-fold",
                  "depth2", "depth3", "no-data-depth2", "no-data-depth3"},
                 0);
  switch (diag) {
    case 1:
      return launch_diag<kNoData>(a, stream);
    case 2:
      return launch_diag<kSmemA>(a, stream);
    case 3:
      return launch_diag<kNoData | kSmemA>(a, stream);
    case 4:
      return launch_diag<kNoFold>(a, stream);
    case 5:
      return launch_diag<kNoData | kNoFold>(a, stream);
    case 6:
      return launch_diag<kDepth2>(a, stream);
    case 7:
      return launch_diag<kDepth3>(a, stream);
    case 8:
      return launch_diag<kNoData | kDepth2>(a, stream);
    case 9:
      return launch_diag<kNoData | kDepth3>(a, stream);
    default:
      return launch_diag<0>(a, stream);
  }
}

}  // namespace memra::kernels::matmul_detail
