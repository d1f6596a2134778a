// The prefill matmul (65+ tokens): a tensor-core tile kernel. A block computes 128 weight rows x
// kBN tokens with 8 warps: 128 tokens (warps of 64 rows x 32 tokens) for F16/BF16, whose only
// accumulators are the chunk partial and the running sum; 64 tokens (warps of 32 x 32) for
// quantized types, which also hold a scale group's partial. K advances in 64-element sub-stages:
// raw weight blocks and the f16 x tile arrive by cp.async two sub-stages ahead, the block decodes
// the next sub-stage's weights to an f16 tile and its groups' scales to a small table (the same
// decoders as the decode kernel) while the tensor cores consume the current one through
// ldmatrix. Per element, the mma chains, the group steps and the chunk sum are the decode
// kernel's exactly (matmul.cu). Tiled weights have their own kernel (matmul_prefill_tiled.cu).
#include "kernels/launch.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBM = 128, kSub = 64, kThreads = 256;
constexpr int kAStride = kSub + 8;   // f16 per decoded row: 144 B, ldmatrix rows hit 8 bank groups
constexpr int kXStride = kSub + 16;  // f16 per x row: 160 B, the 8-byte B loads are conflict-free
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");

template <DType D>
struct PrefillCfg {
  using W = Weight<D>;
  static constexpr int kBN = W::kScaled ? 64 : 128;  // tokens per block
  static constexpr int kM = W::kScaled ? 2 : 4;      // m16 tiles per warp
  static constexpr int kWarpsN = kBN / 32;           // warps across the tokens
  // Raw stages hold whole quant blocks: a K-quant super-block, else one sub-stage.
  static constexpr int kRawK = W::kBlock > kSub ? W::kBlock : kSub;
  static constexpr int kSlot = raw_slot_bytes<D>(kRawK);
  static constexpr int kPieces = kSlot / 16;
  static constexpr int kRawBytes = kBM * kSlot;
  static constexpr int kABytes = kBM * kAStride * 2;
  static constexpr int kXBytes = kBN * kXStride * 2;
  // Scale groups per sub-stage (none for F16/BF16, whose table is unused).
  static constexpr int kGroups = W::kScaled ? kSub / W::kGroup : 1;
  static constexpr int kScaleBytes = kBM * kGroups * 8;
  // Two raw stages, two decoded tiles and scale tables, three x tiles (one read, two in flight).
  static constexpr int kSmem = 2 * kRawBytes + 2 * kABytes + 2 * kScaleBytes + 3 * kXBytes;
};

template <DType D>
struct Prefill {
  using C = PrefillCfg<D>;
  using W = Weight<D>;
  const MatmulArgs& a;
  uint8_t* raw;  // [2][kBM][kSlot]
  uint16_t* ah;  // [2][kBM][kAStride]
  float2* sc;    // [2][kBM][kGroups]
  uint16_t* xs;  // [3][kBN][kXStride]
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
      constexpr int kBN = C::kBN;
      uint16_t* xd = xs + (q % 3) * kBN * kXStride;
#pragma unroll
      for (int i = 0; i < kBN * (kSub / 8) / kThreads; ++i) {
        const int idx = tid + kThreads * i;
        const int n = idx / (kSub / 8), p = idx % (kSub / 8);
        if (p * 8 < nk) {
          const bool ok = tok0 + n < a.n_tokens;  // columns past the batch are zero
          const uint16_t* src =
              ok ? a.xh + static_cast<int64_t>(tok0 + n) * a.n_in + k0 + 8 * p : a.xh;
          cp_async16(xd + n * kXStride + 8 * p, src, ok ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  }

  // Decodes sub-stage q's weights into tile q % 2 (thread -> (row, k16 step, t) items) and its
  // groups' {scale, bias} into table q % 2.
  __device__ void decode(int q) {
    const int k0 = q * kSub, rs = k0 / C::kRawK;
    const int steps = min(kSub, a.n_in - k0) / 16;
    const int step0 = (k0 - rs * C::kRawK) / 16;
    const uint8_t* src = raw + (rs & 1) * C::kRawBytes;
    uint16_t* dst = ah + (q & 1) * kBM * kAStride;
    const int t = tid & 3;
#pragma unroll 2
    for (int i = 0; i < kBM * (kSub / 16) * 4 / kThreads; ++i) {
      const int s = i >> 1, rr = (tid >> 2) + (kThreads / 4) * (i & 1);
      if (s < steps) {
        const uint8_t* row = src + rr * C::kSlot + (raw_start(rr, rs) & 15);
        uint2 v = weight_frag<D>(row, step0 + s, t);
        if constexpr (kFold<D>) v = fold_half(v, fold_scale(fold_row(row), (step0 + s) >> 1));
        uint32_t* o = reinterpret_cast<uint32_t*>(dst + rr * kAStride + 16 * s + 2 * t);
        o[0] = v.x;
        o[4] = v.y;  // columns 2t + 8, 2t + 9
      }
    }
    if constexpr (W::kScaled && !kFold<D>) {  // the folded types scale A itself (fold.cuh)
      constexpr int kGroupSteps = W::kGroup / 16;
      float2* table = sc + (q & 1) * kBM * C::kGroups;
      for (int i = tid; i < kBM * C::kGroups; i += kThreads) {
        const int rr = i / C::kGroups, j = i % C::kGroups;
        if (j * kGroupSteps < steps) {
          const uint8_t* row = src + rr * C::kSlot + (raw_start(rr, rs) & 15);
          table[i] = weight_scale<D>(row, step0 + j * kGroupSteps);
        }
      }
    }
  }
};

// acc[m][n] += k16 step s of the current tiles: A rows from ldmatrix, B columns 8n.. of the warp.
template <int kM>
__device__ __forceinline__ void mma_tiles(float (&acc)[kM][4][4], const uint16_t* A,
                                          const uint16_t* X, int s, int lane) {
  uint32_t af[kM][4];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    ldmatrix_x4(af[m], A + 16 * m * kAStride + 16 * s + 8 * (lane >> 4));
  }
  uint2 bf[4];
#pragma unroll
  for (int n = 0; n < 4; ++n)
    bf[n] = *reinterpret_cast<const uint2*>(X + 8 * n * kXStride + 16 * s);
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int n = 0; n < 4; ++n) mma_f16(acc[m][n], af[m], bf[n].x, bf[n].y);
  }
}

// The folded types' chunk end (fold.cuh): acc holds s of chunk c for the warp's rows r0.. and
// tokens 32 wn..; the mins' step and p = fma(d, s, nb * b) replace it by the chunk partial. The
// chunk's raw blocks are still in their stage (the next issue into it comes after this chunk).
template <DType D, int kM>
__device__ __forceinline__ void fold_tiles(const Prefill<D>& p, float (&acc)[kM][4][4], int c,
                                           int r0, int wn, int lane) {
  using C = PrefillCfg<D>;
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* src = p.raw + (c & 1) * C::kRawBytes;
  uint2 bb[4];
  bias_b_tiles(p.a, p.tok0 + wn * 32, c, g, t, bb);
  FoldRow fr[kM][2];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = r0 + 16 * m + 8 * h + g;
      fr[m][h] = fold_row(src + rr * C::kSlot + (p.raw_start(rr, c) & 15));
    }
  }
  fold_tiles(acc, fr, bb, t);
}

template <DType D>
__global__ void __launch_bounds__(kThreads, 1) prefill_kernel(const MatmulArgs a) {
  detail::wait_for_inputs();
  using C = PrefillCfg<D>;
  using W = Weight<D>;
  constexpr int kM = C::kM, kBN = C::kBN, kRowsW = 16 * kM;
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // Warp tile: rows kRowsW wm.., tokens 32 wn...
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  Prefill<D> p{
      a,
      smem,
      reinterpret_cast<uint16_t*>(smem + 2 * C::kRawBytes),
      reinterpret_cast<float2*>(smem + 2 * C::kRawBytes + 2 * C::kABytes),
      reinterpret_cast<uint16_t*>(smem + 2 * C::kRawBytes + 2 * C::kABytes + 2 * C::kScaleBytes),
      static_cast<int>(blockIdx.y) * kBM,
      static_cast<int>(blockIdx.x) * kBN,
      tid,
      (a.n_in + kSub - 1) / kSub};

  // acc: the chunk partial p_c; total: the running chunk sum (matmul.cu).
  float acc[kM][4][4] = {}, total[kM][4][4] = {};
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
    const uint16_t* A = p.ah + (q & 1) * kBM * kAStride + (wm * kRowsW + (lane & 15)) * kAStride;
    const uint16_t* X = p.xs + (q % 3) * kBN * kXStride + (wn * 32 + g) * kXStride + 4 * t;
    const int steps = min(kSub, a.n_in - q * kSub) / 16;
    if constexpr (!W::kScaled || kFold<D>) {
#pragma unroll
      for (int s = 0; s < kSub / 16; ++s) {
        if (s < steps) mma_tiles<kM>(acc, A, X, s, lane);
      }
      if constexpr (kFold<D>) {
        if ((q & 3) == 3) fold_tiles(p, acc, q >> 2, wm * kRowsW, wn, lane);
      }
    } else {
      constexpr int kGroupSteps = W::kGroup / 16;
      const float2* table = p.sc + (q & 1) * kBM * C::kGroups;
#pragma unroll
      for (int j = 0; j < C::kGroups; ++j) {
        if (j * kGroupSteps < steps) {  // groups never straddle K's end
          float grp[kM][4][4] = {};
#pragma unroll
          for (int u = 0; u < kGroupSteps; ++u) mma_tiles<kM>(grp, A, X, j * kGroupSteps + u, lane);
          float2 xs[4] = {};  // group sums of each n tile's tokens 2t, 2t + 1
          if constexpr (W::kBias) {
            const int group = (q * kSub) / 32 + j;
#pragma unroll
            for (int n = 0; n < 4; ++n) {
              const int tok = p.tok0 + wn * 32 + 8 * n + 2 * t;
              xs[n].x = tok < a.n_tokens ? __ldg(a.xsum + tok * a.xsum_stride + group) : 0.0f;
              xs[n].y =
                  tok + 1 < a.n_tokens ? __ldg(a.xsum + (tok + 1) * a.xsum_stride + group) : 0.0f;
            }
          }
#pragma unroll
          for (int m = 0; m < kM; ++m) {
            const int rr = wm * kRowsW + 16 * m + g;
            const float2 sc_g = table[rr * C::kGroups + j];
            const float2 sc_g8 = table[(rr + 8) * C::kGroups + j];
#pragma unroll
            for (int n = 0; n < 4; ++n)
              apply_group<W::kBias>(acc[m][n], grp[m][n], sc_g, sc_g8, xs[n]);
          }
        }
      }
    }
    if ((q & 3) == 3 || q == p.n_sub - 1) {  // a 256-element chunk ends: fold it in order
#pragma unroll
      for (int m = 0; m < kM; ++m) {
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
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = p.row0 + wm * kRowsW + 16 * m + g + 8 * (i >> 1);
        const int tok = p.tok0 + wn * 32 + 8 * n + 2 * t + (i & 1);
        if (row < a.n_out && tok < a.n_tokens)
          a.y[tok * a.ldy + row] = total[m][n][i] * a.xinv[tok];
      }
    }
  }
}

}  // namespace

template <DType D>
void launch_prefill(const MatmulArgs& a, cudaStream_t stream) {
  using C = PrefillCfg<D>;
  static_assert(C::kSmem <= kMaxSmem, "shared memory over the sm_80 limit");
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(prefill_kernel<D>, C::kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + C::kBN - 1) / C::kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  detail::launch(prefill_kernel<D>, grid, kThreads, C::kSmem, stream, a);
}

#define MEMRA_INSTANTIATE(D) template void launch_prefill<D>(const MatmulArgs&, cudaStream_t);
MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_INSTANTIATE)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
