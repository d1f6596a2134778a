// The prefill matmul over tiled weights (tiled.cuh), 65+ tokens. A tiled record already holds each
// lane's mma A fragments in register order, so every warp reads (F16/BF16: one 16-byte shared
// load per m16 tile and k16 step) or decodes (quantized: one 16-byte load per tile and four steps,
// then the decode kernel's shifts and masks) its own fragments straight from the staged records.
// There is no decoded-weight tile, so no decode pass between the copies and the tensor cores and
// one barrier per 64-element sub-stage, with the copies kStages - 1 sub-stages ahead.
//
// Block: 128 weight rows (eight m16 tiles) x kBN tokens, 8 warps.
// - F16/BF16: 128 tokens, warps of 64 rows x 32 tokens. Each sub-stage's quarter of the eight
//   records (2 KB each) rides in the same cp.async group as the sub-stage's x tile, kStages deep.
// - Quantized: 64 tokens, warps of 32 rows x 32 tokens (their accumulators: the chunk partial,
//   the group partial and the running sum). Whole records arrive a chunk at a time, two chunks
//   deep: chunk c + 1's with sub-stage 4c + 3's group, so its {scale, bias} table is built right
//   after that group lands, while chunk c's last sub-stage computes.
// Per element the order is matmul.cu's canonical one: mma chains over a group's (F16/BF16: the
// chunk's) k16 steps from +0, groups folded with fma in order, chunks summed left to right.
#include "kernels/launch.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBM = 128, kSub = 64, kThreads = 256, kStages = 4;
constexpr int kTiles = kBM / 16;
constexpr int kXStride = kSub + 16;  // f16 per x row: 160 B, the 8-byte B loads are conflict-free
static_assert(kChunk == 4 * kSub, "a chunk is four sub-stages");

template <DType D>
struct TiledPrefillCfg {
  using T = Tiled<D>;
  static constexpr bool kScaled = T::kScaled;
  static constexpr int kBN = kScaled ? 64 : 128;   // tokens per block
  static constexpr int kWarpsM = kScaled ? 4 : 2;  // warps across the rows
  static constexpr int kWarpsN = 8 / kWarpsM;      // warps across the tokens
  static constexpr int kM = kTiles / kWarpsM;      // m16 tiles per warp
  static constexpr int kN = kBN / 8 / kWarpsN;     // n8 tiles per warp
  static_assert(kN * 8 == 32, "warps cover 32 tokens");
  // Weight stages: quantized, the block's eight whole records of a chunk; F16/BF16, a sub-stage's
  // quarter of each (tiled.cuh: steps 4u .. 4u + 3 are bytes 2048u .. 2048u + 2047).
  static constexpr int kRecStage = kScaled ? kTiles * T::kBytes : kTiles * T::kBytes / 4;
  static constexpr int kRecStages = kScaled ? 2 : kStages;
  static constexpr int kXBytes = kBN * kXStride * 2;
  // The chunk's {scale, bias} per row and group; an odd row stride in float2 spreads the eight
  // rows a warp reads at once over different banks.
  static constexpr int kGroups = kScaled ? kChunk / T::kGroup : 0;
  static constexpr int kTableStride = kGroups + 1;
  static constexpr int kTableBytes = kScaled ? kBM * kTableStride * 8 : 0;
  static constexpr int kSmem = kRecStages * kRecStage + kStages * kXBytes + 2 * kTableBytes;
};

template <DType D>
struct TiledPrefill {
  using C = TiledPrefillCfg<D>;
  using T = Tiled<D>;
  const MatmulArgs& a;
  uint8_t* recs;   // [kRecStages][kRecStage]
  uint16_t* xs;    // [kStages][kBN][kXStride]
  float2* tables;  // [2][kBM][kTableStride]
  int row0, tok0, tid, n_sub, n_chunks;

  // Commits sub-stage q's cp.async group: its x tile, its record quarters (F16/BF16) or, when q
  // ends a chunk, the next chunk's records (chunk 0's ride with sub-stage 0). Always commits, so
  // group i is sub-stage i.
  __device__ void issue(int q) {
    if (q < n_sub) {
      if constexpr (C::kScaled) {
        if (q == 0) issue_records(0);
        if ((q & 3) == 3 && q / 4 + 1 < n_chunks) issue_records(q / 4 + 1);
      } else {
        issue_quarters(q);
      }
      issue_x(q);
    }
    cp_async_commit();
  }

  __device__ int64_t tile_of(int m) const { return min(row0 / 16 + m, (a.n_out - 1) / 16); }

  __device__ void issue_records(int c) {
    constexpr int kPieces = T::kBytes / 16;
    static_assert(T::kBytes % 16 == 0, "records are whole 16-byte pieces");
    uint8_t* dst = recs + (c & 1) * C::kRecStage;
#pragma unroll
    for (int i = 0; i < (kTiles * kPieces + kThreads - 1) / kThreads; ++i) {
      const int idx = tid + kThreads * i;
      if (idx < kTiles * kPieces) {
        const int m = idx / kPieces, p = idx % kPieces;
        cp_async16(dst + m * T::kBytes + 16 * p,
                   a.w + (tile_of(m) * n_chunks + c) * T::kBytes + 16 * p);
      }
    }
  }

  __device__ void issue_quarters(int q) {
    constexpr int kQuarter = T::kBytes / 4, kPieces = kQuarter / 16;
    static_assert(kTiles * kPieces % kThreads == 0, "quarters split evenly over the threads");
    const int c = q / 4;
    const int64_t part = (q & 3) * kQuarter;
    uint8_t* dst = recs + (q % kStages) * C::kRecStage;
#pragma unroll
    for (int i = 0; i < kTiles * kPieces / kThreads; ++i) {
      const int idx = tid + kThreads * i;
      const int m = idx / kPieces, p = idx % kPieces;
      cp_async16(dst + m * kQuarter + 16 * p,
                 a.w + (tile_of(m) * n_chunks + c) * T::kBytes + part + 16 * p);
    }
  }

  __device__ void issue_x(int q) {
    constexpr int kBN = C::kBN, kPieces = kSub / 8;
    static_assert(kBN * kPieces % kThreads == 0, "x pieces split evenly over the threads");
    const int k0 = q * kSub;
    uint16_t* xd = xs + (q % kStages) * kBN * kXStride;
#pragma unroll
    for (int i = 0; i < kBN * kPieces / kThreads; ++i) {
      const int idx = tid + kThreads * i;
      const int n = idx / kPieces, p = idx % kPieces;
      const bool ok = tok0 + n < a.n_tokens;  // columns past the batch are zero
      const uint16_t* src = ok ? a.xh + static_cast<int64_t>(tok0 + n) * a.n_in + k0 + 8 * p : a.xh;
      cp_async16(xd + n * kXStride + 8 * p, src, ok ? 16 : 0);
    }
  }

  // Chunk c's {scale, bias} for every row and group (quantized types), from its landed records:
  // two threads a row, each loading the row's header once.
  __device__ void build_table(int c) {
    if constexpr (C::kScaled && !kFold<D>) {  // the folded types scale A itself (fold.cuh)
      constexpr int kHalf = C::kGroups / 2;
      const uint8_t* src = recs + (c & 1) * C::kRecStage;
      float2* table = tables + (c & 1) * kBM * C::kTableStride;
      for (int i = tid; i < 2 * kBM; i += kThreads) {
        const int rr = i >> 1, j0 = (i & 1) * kHalf;
        const typename T::Head h = T::head(src + (rr >> 4) * T::kBytes, rr & 15);
#pragma unroll
        for (int j = 0; j < kHalf; ++j) table[rr * C::kTableStride + j0 + j] = T::scale(h, j0 + j);
      }
    }
  }
};

template <int kM, int kN>
__device__ __forceinline__ void mma_block(float (&acc)[kM][kN][4], const uint32_t (&af)[kM][4],
                                          const uint16_t* X, int step) {
  uint2 bf[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n)
    bf[n] = *reinterpret_cast<const uint2*>(X + 8 * n * kXStride + 16 * step);
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int n = 0; n < kN; ++n) mma_f16(acc[m][n], af[m], bf[n].x, bf[n].y);
  }
}

template <DType D>
__global__ void __launch_bounds__(kThreads, 1) prefill_tiled_kernel(const MatmulArgs a) {
  detail::wait_for_inputs();
  using C = TiledPrefillCfg<D>;
  using T = Tiled<D>;
  constexpr int kM = C::kM, kN = C::kN, kBN = C::kBN;
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;  // rows 16 kM wm.., tokens 32 wn..
  TiledPrefill<D> p{
      a,
      smem,
      reinterpret_cast<uint16_t*>(smem + C::kRecStages * C::kRecStage),
      reinterpret_cast<float2*>(smem + C::kRecStages * C::kRecStage + kStages * C::kXBytes),
      static_cast<int>(blockIdx.y) * kBM,
      static_cast<int>(blockIdx.x) * kBN,
      tid,
      a.n_in / kSub,
      a.n_in / kChunk};

  // acc: the chunk partial p_c; total: the running chunk sum (matmul.cu).
  float acc[kM][kN][4] = {}, total[kM][kN][4] = {};
#pragma unroll
  for (int q = 0; q < kStages - 1; ++q) p.issue(q);
  if constexpr (C::kScaled) {
    cp_async_wait<kStages - 2>();  // sub-stage 0: chunk 0's records
    __syncthreads();
    p.build_table(0);
  }
  for (int q = 0; q < p.n_sub; ++q) {
    cp_async_wait<kStages - 2>();  // sub-stage q has landed (this thread's copies)
    __syncthreads();  // everyone's copies are visible and everyone is done with sub-stage q - 1
    p.issue(q + kStages - 1);
    const int c = q >> 2, u = q & 3;
    const uint16_t* X = p.xs + (q % kStages) * kBN * kXStride + (wn * 32 + g) * kXStride + 4 * t;
    if constexpr (!C::kScaled) {
      const uint8_t* R = p.recs + (q % kStages) * C::kRecStage + wm * kM * 2048 + 16 * lane;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        uint32_t af[kM][4];
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          const uint4 v = ld_u128(R + m * 2048 + 512 * s);
          af[m][0] = v.x;
          af[m][1] = v.y;
          af[m][2] = v.z;
          af[m][3] = v.w;
        }
        mma_block<kM, kN>(acc, af, X, s);
      }
    } else if constexpr (kFold<D>) {  // fold.cuh: one chain over the chunk, then the mins
      const uint8_t* R = p.recs + (c & 1) * C::kRecStage + wm * kM * T::kBytes;
      typename T::Quad quad[kM];
      FoldRow fr[kM][2];
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        quad[m] = T::load(R + m * T::kBytes, u, lane);
        fr[m][0] = fold_row(T::head(R + m * T::kBytes, g));
        fr[m][1] = fold_row(T::head(R + m * T::kBytes, g + 8));
      }
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        uint32_t af[kM][4];
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          T::folded_frag(quad[m], v, fold_scales(fr[m][0], fr[m][1], (4 * u + v) >> 1), af[m]);
        }
        mma_block<kM, kN>(acc, af, X, v);
      }
      if (u == 3) {
        uint2 bb[kN];
        bias_b_tiles(a, p.tok0 + wn * 32, c, g, t, bb);
        fold_tiles(acc, fr, bb, t);
      }
    } else {
      // Chunk c + 1's records came with this sub-stage's group: its table goes to the other slot
      // while this chunk's last sub-stage computes; the next barrier publishes it.
      if (u == 3 && c + 1 < p.n_chunks) p.build_table(c + 1);
      constexpr int kGroupSteps = T::kGroup / 16, kSubGroups = 4 / kGroupSteps;
      const uint8_t* R = p.recs + (c & 1) * C::kRecStage + wm * kM * T::kBytes;
      typename T::Quad quad[kM];
#pragma unroll
      for (int m = 0; m < kM; ++m) quad[m] = T::load(R + m * T::kBytes, u, lane);
      const float2* table =
          p.tables + (c & 1) * kBM * C::kTableStride + (wm * kM * 16 + g) * C::kTableStride;
#pragma unroll
      for (int jj = 0; jj < kSubGroups; ++jj) {
        float grp[kM][kN][4] = {};
#pragma unroll
        for (int v = 0; v < kGroupSteps; ++v) {
          uint32_t af[kM][4];
#pragma unroll
          for (int m = 0; m < kM; ++m) T::frag(quad[m], jj * kGroupSteps + v, af[m]);
          mma_block<kM, kN>(grp, af, X, jj * kGroupSteps + v);
        }
        static_assert(!T::kBias,
                      "the tiled type with mins (Q4_K) takes the folded order (fold.cuh)");
        const int j = u * kSubGroups + jj;  // the group within the chunk
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          const float2 sc_g = table[16 * m * C::kTableStride + j];
          const float2 sc_g8 = table[(16 * m + 8) * C::kTableStride + j];
#pragma unroll
          for (int n = 0; n < kN; ++n) apply_group<false>(acc[m][n], grp[m][n], sc_g, sc_g8, {});
        }
      }
    }
    if (u == 3) {  // a 256-element chunk ends: fold it in order
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int n = 0; n < kN; ++n) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            total[m][n][i] = c == 0 ? acc[m][n][i] : __fadd_rn(total[m][n][i], acc[m][n][i]);
            acc[m][n][i] = 0.0f;
          }
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = p.row0 + (wm * kM + m) * 16 + g + 8 * (i >> 1);
        const int tok = p.tok0 + wn * 32 + 8 * n + 2 * t + (i & 1);
        if (row < a.n_out && tok < a.n_tokens)
          a.y[static_cast<int64_t>(tok) * a.ldy + row] = total[m][n][i] * a.xinv[tok];
      }
    }
  }
}

}  // namespace

template <DType D>
void launch_prefill_tiled(const MatmulArgs& a, cudaStream_t stream) {
  using C = TiledPrefillCfg<D>;
  static_assert(C::kSmem <= kMaxSmem, "shared memory over the sm_80 limit");
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(prefill_tiled_kernel<D>, C::kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + C::kBN - 1) / C::kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  detail::launch(prefill_tiled_kernel<D>, grid, kThreads, C::kSmem, stream, a);
}

template void launch_prefill_tiled<DType::q4_k>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_tiled<DType::q6_k>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_tiled<DType::q8_0>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_tiled<DType::f16>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_tiled<DType::bf16>(const MatmulArgs&, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
