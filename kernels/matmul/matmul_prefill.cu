// The prefill matmul (9+ tokens): a tensor-core tile kernel. A block computes 128 weight rows x
// 128 tokens; 8 warps each own 64 rows x 32 tokens. K advances in 64-element sub-stages: raw
// weight blocks and the bf16 x tile arrive by cp.async two sub-stages ahead, the block decodes the
// next sub-stage's weights to a bf16 tile (the same decoder as the decode kernel) while the
// tensor cores consume the current one through ldmatrix. Per element, the mma chain and the chunk
// sum are the decode kernel's exactly (matmul.cu).
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBM = 128, kBN = 128, kSub = 64, kThreads = 256;
constexpr int kAStride = kSub + 8;   // bf16 per decoded row: 144 B, ldmatrix rows hit 8 bank groups
constexpr int kXStride = kSub + 16;  // bf16 per x row: 160 B, the 8-byte B loads are conflict-free
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");

template <DType D>
struct PrefillCfg {
  using W = Weight<D>;
  // Raw stages hold whole quant blocks: a K-quant super-block, else one sub-stage.
  static constexpr int kRawK = W::kBlock > kSub ? W::kBlock : kSub;
  static constexpr int kSlot = raw_slot_bytes<D>(kRawK);
  static constexpr int kPieces = kSlot / 16;
  static constexpr int kRawBytes = kBM * kSlot;
  static constexpr int kABytes = kBM * kAStride * 2;
  static constexpr int kXBytes = kBN * kXStride * 2;
  // Two raw stages, two decoded tiles, three x tiles (one read, two in flight).
  static constexpr int kSmem = 2 * kRawBytes + 2 * kABytes + 3 * kXBytes;
};

template <DType D>
struct Prefill {
  using C = PrefillCfg<D>;
  using W = Weight<D>;
  const MatmulArgs& a;
  uint8_t* raw;   // [2][kBM][kSlot]
  uint16_t* abf;  // [2][kBM][kAStride]
  uint16_t* xs;   // [3][kBN][kXStride]
  int row0, tok0, tid, n_sub;

  __device__ int64_t raw_start(int rr, int rs) const {
    return static_cast<int64_t>(min(row0 + rr, a.n_out - 1)) * a.row_bytes +
           static_cast<int64_t>(rs * C::kRawK / W::kBlock) * W::kBytes;
  }

  // Commits one cp.async group for sub-stage q: its x tile and, when q opens a raw stage, the raw
  // weight blocks of that stage. Always commits, so group i is sub-stage i.
  __device__ void issue(int q) {
    if (q < n_sub) {
      const int k0 = q * kSub;
      if (k0 % C::kRawK == 0) {
        const int rs = k0 / C::kRawK;
        const int bytes = min(C::kRawK, a.n_in - k0) / W::kBlock * W::kBytes;
        uint8_t* dst = raw + (rs & 1) * C::kRawBytes;
#pragma unroll
        for (int i = 0; i < (kBM * C::kPieces + kThreads - 1) / kThreads; ++i) {
          const int idx = tid + kThreads * i;
          const int rr = idx / C::kPieces, p = idx % C::kPieces;
          if (rr < kBM) {
            const int64_t start = raw_start(rr, rs);
            const int lead = static_cast<int>(start & 15);
            if (p * 16 < lead + bytes) {
              cp_async16(dst + rr * C::kSlot + p * 16, a.w + start - lead + p * 16);
            }
          }
        }
      }
      const int nk = min(kSub, a.n_in - k0);
      uint16_t* xd = xs + (q % 3) * kBN * kXStride;
#pragma unroll
      for (int i = 0; i < kBN * (kSub / 8) / kThreads; ++i) {
        const int idx = tid + kThreads * i;
        const int n = idx / (kSub / 8), p = idx % (kSub / 8);
        if (p * 8 < nk) {
          const bool ok = tok0 + n < a.n_tokens;  // columns past the batch are zero
          const uint16_t* src =
              ok ? a.xb + static_cast<int64_t>(tok0 + n) * a.n_in + k0 + 8 * p : a.xb;
          cp_async16(xd + n * kXStride + 8 * p, src, ok ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  }

  // Decodes sub-stage q's weights into decoded tile q % 2: thread -> (row, k16 step, t) items.
  __device__ void decode(int q) {
    const int k0 = q * kSub, rs = k0 / C::kRawK;
    const int steps = min(kSub, a.n_in - k0) / 16;
    const int step0 = (k0 - rs * C::kRawK) / 16;
    const uint8_t* src = raw + (rs & 1) * C::kRawBytes;
    uint16_t* dst = abf + (q & 1) * kBM * kAStride;
    const int t = tid & 3;
#pragma unroll 2
    for (int i = 0; i < kBM * (kSub / 16) * 4 / kThreads; ++i) {
      const int s = i >> 1, rr = (tid >> 2) + (kThreads / 4) * (i & 1);
      if (s < steps) {
        const uint8_t* row = src + rr * C::kSlot + (raw_start(rr, rs) & 15);
        const uint2 v = weight_frag<D>(row, step0 + s, t);
        uint32_t* o = reinterpret_cast<uint32_t*>(dst + rr * kAStride + 16 * s + 2 * t);
        o[0] = v.x;
        o[4] = v.y;  // columns 2t + 8, 2t + 9
      }
    }
  }
};

template <DType D>
__global__ void __launch_bounds__(kThreads, 1) prefill_kernel(const MatmulArgs a) {
  using C = PrefillCfg<D>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;  // warp tile: rows 64 wm.., tokens 32 wn..
  Prefill<D> p{a,
               smem,
               reinterpret_cast<uint16_t*>(smem + 2 * C::kRawBytes),
               reinterpret_cast<uint16_t*>(smem + 2 * C::kRawBytes + 2 * C::kABytes),
               static_cast<int>(blockIdx.y) * kBM,
               static_cast<int>(blockIdx.x) * kBN,
               tid,
               (a.n_in + kSub - 1) / kSub};

  float acc[4][4][4] = {}, total[4][4][4] = {};
  p.issue(0);
  p.issue(1);
  cp_async_wait<1>();
  __syncthreads();
  p.decode(0);
  for (int q = 0; q < p.n_sub; ++q) {
    cp_async_wait<0>();  // sub-stage q + 1's raw blocks and x tile
    __syncthreads();     // also: everyone is done with q - 1's tiles, which q + 2 reuses
    p.issue(q + 2);
    if (q + 1 < p.n_sub) p.decode(q + 1);
    const uint16_t* A = p.abf + (q & 1) * kBM * kAStride + (wm * 64 + (lane & 15)) * kAStride;
    const uint16_t* X = p.xs + (q % 3) * kBN * kXStride + (wn * 32 + g) * kXStride + 4 * t;
    const int steps = min(kSub, a.n_in - q * kSub) / 16;
#pragma unroll
    for (int s = 0; s < kSub / 16; ++s) {
      if (s < steps) {
        uint32_t af[4][4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          ldmatrix_x4(af[m], A + 16 * m * kAStride + 16 * s + 8 * (lane >> 4));
        }
        uint2 bf[4];
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          bf[n] = *reinterpret_cast<const uint2*>(X + 8 * n * kXStride + 16 * s);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m) {
#pragma unroll
          for (int n = 0; n < 4; ++n) mma_bf16(acc[m][n], af[m], bf[n].x, bf[n].y);
        }
      }
    }
    if ((q & 3) == 3 || q == p.n_sub - 1) {  // a 256-element chunk ends: fold it in order
#pragma unroll
      for (int m = 0; m < 4; ++m) {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            total[m][n][i] = q < 4 ? acc[m][n][i] : __fadd_rn(total[m][n][i], acc[m][n][i]);
            acc[m][n][i] = 0.0f;
          }
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = p.row0 + wm * 64 + 16 * m + g + 8 * (i >> 1);
        const int tok = p.tok0 + wn * 32 + 8 * n + 2 * t + (i & 1);
        if (row < a.n_out && tok < a.n_tokens) a.y[tok * a.ldy + row] = total[m][n][i];
      }
    }
  }
}

}  // namespace

template <DType D>
void launch_prefill(const MatmulArgs& a, cudaStream_t stream) {
  using C = PrefillCfg<D>;
  static_assert(C::kSmem <= kMaxSmem, "shared memory over the sm_80 limit");
  // Errors here surface at the caller's next launch check, as for the launch itself.
  (void)cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::kSmem);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + kBN - 1) / kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  prefill_kernel<D><<<grid, kThreads, C::kSmem, stream>>>(a);
}

#define MEMRA_INSTANTIATE(D) template void launch_prefill<D>(const MatmulArgs&, cudaStream_t);
MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_INSTANTIATE)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
