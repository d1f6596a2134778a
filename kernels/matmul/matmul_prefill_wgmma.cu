// The prefill matmul for tiled F16/BF16 weights on Hopper (sm_90a): wgmma instead of mma.sync.
// A warpgroup computes 64 weight rows x 128 tokens per k16 step with one wgmma.m64n128k16: its
// four warps hand in their m16 tiles' A fragments from registers (one 16-byte shared load per
// step from the staged tiled record, as in matmul_prefill_tiled.cu) and the tensor cores read the
// x tile straight from shared memory. The block (two warpgroups, 128 rows x 128 tokens) keeps the
// tiled kernel's pipeline shape: a sub-stage's quarter records and x tile per cp.async group,
// three sub-stages ahead, one barrier per sub-stage; the tensor cores keep running across the
// barrier (a sub-stage's wgmma group is waited for only two sub-stages later, or at a chunk's end
// where its partial is folded). Each thread's copy addresses are worked out once (Copier): the
// first version recomputed them per copy and spent most of its issue slots there (Nsight Compute:
// ~400 instructions a warp per sub-stage, 0.37 issued per scheduler cycle, tensor pipes mostly
// idle).
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
// this kernel reads x written in physical order (x_to_f16_kernel's permuted copy, args.xp): in
// each 16-element step, physical 0..7 hold logical 0, 1, 4, 5, 8, 9, 12, 13 and 8..15 the rest.
// In shared memory x is K-major without swizzle, in 8-token x 8-k core matrices of 128 bytes:
// [step 4][token group 16][k half 2][token 8][k 8].
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/tiled.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBM = 128, kBN = 128, kSub = 64, kThreads = 256;
// Stage buffers, and how many sub-stages ahead the copies run: one fewer than the buffers less
// one, because the wgmma group of the previous sub-stage may still read its stage across the
// barrier.
constexpr int kStages = 5, kAhead = kStages - 2;
constexpr int kTiles = kBM / 16;
constexpr int kQuarter = TiledHalf::kBytes / 4;  // a sub-stage of one record: 2048 B
constexpr int kRecStage = kTiles * kQuarter;     // 16 KB
constexpr int kXStage = kBN * kSub * 2;          // 16 KB
constexpr int kSmem = kStages * (kRecStage + kXStage);
constexpr int kCore = 128;                       // bytes of an 8 x 8 core matrix
constexpr int kStepBytes = kBN / 8 * 2 * kCore;  // one k16 step of the x tile: 4 KB
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");

// Shared-memory matrix descriptor (PTX ISA, wgmma): start address, leading-dimension byte offset
// (between the two k halves of a step: adjacent core matrices), stride byte offset (between token
// groups), no swizzle; each field in 16-byte units.
__device__ __forceinline__ uint64_t b_desc(const void* p) {
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3ffffu) >> 4) | (uint64_t{kCore >> 4} << 16) |
         (uint64_t{(2 * kCore) >> 4} << 32);
}

// d += A * B for one k16 step: A the warpgroup's 64 rows from registers (each warp its m16 tile's
// mma A fragment), B 128 tokens x 16 k from shared memory (b_desc). The scale-d predicate is true:
// d accumulates (a chain starts from registers zeroed beforehand, as mma.sync's from +0).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4],
                                                 uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N of this warpgroup's committed wgmma groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's completed cp.async writes visible to the tensor cores' (async proxy) reads.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A thread's share of every sub-stage's copies, with the addresses worked out once: sub-stage q
// of tile record r starts q * 2048 bytes into the tile's chunk records (a tile's chunks are
// contiguous), and of x row n, q * 64 elements in.
struct Copier {
  static constexpr int kRecPieces = kTiles * kQuarter / 16 / kThreads;  // 4
  static constexpr int kXPieces = kBN * (kSub / 8) / kThreads;          // 4
  const uint8_t* rec_src;                                               // piece 0's tile
  int rec_delta[kRecPieces];  // piece i's tile record start - piece 0's (a clamped tile repeats)
  const uint16_t* x_src;
  int rec_dst, x_dst;  // byte offsets inside a stage for piece 0 (piece i: + i * 4096)
  int x_bytes;         // 16, or 0 for a token past the batch (zero fill)

  __device__ Copier(const MatmulArgs& a, int row0, int tok0, int tid) {
    // Records: thread tid copies 16 bytes p = tid % 128 of quarter tile (tid / 128) + 2i.
    const int p = tid & 127, last_tile = (a.n_out - 1) / 16, n_chunks = a.n_in / kChunk;
    const int tile0 = min(row0 / 16 + (tid >> 7), last_tile);
    rec_src = a.w + static_cast<int64_t>(tile0) * n_chunks * TiledHalf::kBytes + 16 * p;
#pragma unroll
    for (int i = 0; i < kRecPieces; ++i) {  // at most 6 tiles of n_in * 32 bytes: fits an int
      const int tile = min(row0 / 16 + (tid >> 7) + 2 * i, last_tile);
      rec_delta[i] = (tile - tile0) * n_chunks * TiledHalf::kBytes;
    }
    rec_dst = (tid >> 7) * kQuarter + 16 * p;
    // x: thread pairs copy a token's two k halves of step i: 32 contiguous bytes of its row, and a
    // warp fills four whole core-matrix pairs (512 contiguous bytes of shared memory).
    const int h = tid & 1, n = (tid >> 1) & (kBN - 1);
    const bool ok = tok0 + n < a.n_tokens;
    x_src = ok ? a.xp + static_cast<int64_t>(tok0 + n) * a.n_in + 8 * h : a.xp;
    x_bytes = ok ? 16 : 0;
    x_dst = ((n >> 3) * 2 + h) * kCore + (n & 7) * 16;
  }

  // Sub-stage q's cp.async group into stage buffers (recs, xs). Always commits, so group i is
  // sub-stage i.
  __device__ void issue(int q, int n_sub, uint8_t* recs, uint8_t* xs) const {
    if (q < n_sub) {
#pragma unroll
      for (int i = 0; i < kRecPieces; ++i)
        cp_async16(recs + rec_dst + i * 2 * kQuarter,
                   rec_src + rec_delta[i] + int64_t{q} * kQuarter);
      const uint16_t* src = x_bytes ? x_src + q * kSub : x_src;
#pragma unroll
      for (int i = 0; i < kXPieces; ++i)
        cp_async16(xs + x_dst + i * kStepBytes, x_bytes ? src + 16 * i : src, x_bytes);
    }
    cp_async_commit();
  }
};

__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_kernel(const MatmulArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int row0 = static_cast<int>(blockIdx.y) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
  const int n_sub = a.n_in / kSub;
  uint8_t* const recs = smem;                      // [kStages][kRecStage]
  uint8_t* const xs = smem + kStages * kRecStage;  // [kStages][kXStage]
  const Copier copier(a, row0, tok0, tid);
  auto issue = [&](int q) {
    copier.issue(q, n_sub, recs + (q % kStages) * kRecStage, xs + (q % kStages) * kXStage);
  };

  // acc: the chunk partial p_c (warpgroup warp / 4's rows 16 (warp % 4).., all 128 tokens: n8
  // tile j in acc[4j .. 4j + 3], mma.sync's C layout); total: the running chunk sum.
  float acc[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = total[i] = 0.0f;
#pragma unroll
  for (int q = 0; q < kAhead; ++q) issue(q);
  // A chunk's four sub-stages are unrolled, so the fold after them is the only place that reads
  // acc and the compiler can keep the wgmma groups of consecutive sub-stages in flight.
  for (int c = 0; c < n_sub / 4; ++c) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int q = 4 * c + u;
      cp_async_wait<kAhead - 1>();  // sub-stage q has landed (this thread's copies)
      fence_proxy_async();
      wgmma_wait<1>();  // this warpgroup's sub-stage q - 2 is done reading (q - 1 may still run)
      __syncthreads();  // copies visible; every warpgroup is done with the stage issue() refills
      issue(q + kAhead);
      const uint8_t* R = recs + (q % kStages) * kRecStage + warp * kQuarter + 16 * lane;
      uint32_t af[4][4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint4 v = ld_u128(R + 512 * s);
        af[s][0] = v.x;
        af[s][1] = v.y;
        af[s][2] = v.z;
        af[s][3] = v.w;
      }
      const uint8_t* X = xs + (q % kStages) * kXStage;
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) wgmma_m64n128k16(acc, af[s], b_desc(X + s * kStepBytes));
      wgmma_commit();
    }
    wgmma_wait<0>();  // the chunk ends: fold it in order, restart from +0
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      total[i] = c == 0 ? acc[i] : __fadd_rn(total[i], acc[i]);
      acc[i] = 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + warp * 16 + g + 8 * (i >> 1);
      const int tok = tok0 + 8 * j + 2 * t + (i & 1);
      if (row < a.n_out && tok < a.n_tokens)
        a.y[static_cast<int64_t>(tok) * a.ldy + row] = total[4 * j + i] * a.xinv[tok];
    }
  }
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

void launch_prefill_wgmma(const MatmulArgs& a, cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(prefill_wgmma_kernel, kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + kBN - 1) / kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  prefill_wgmma_kernel<<<grid, kThreads, kSmem, stream>>>(a);
}

}  // namespace memra::kernels::matmul_detail
