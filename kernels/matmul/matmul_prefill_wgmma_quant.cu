// The prefill matmul for tiled Q4_K / Q6_K / Q8_0 weights on Hopper (sm_90a): wgmma with A from
// registers, where each warp decodes its own m16 tile's A fragments from the staged record (the
// decode kernel's decoders, tiled.cuh) once for the block's 64 tokens, and the tensor cores read x
// from shared memory. The mma.sync kernel (matmul_prefill_tiled.cu) decodes each fragment for 32
// tokens and issues eight mma per step and warp; here a warpgroup's one wgmma.m64n64k16 covers a
// step of 64 rows x 64 tokens.
//
// Q4_K takes the folded order (fold.cuh): one wgmma chain over a chunk's 16 steps with the scaled
// quants in A, the mins' step on mma.sync, d and dmin once per chunk (fold_chunk_wgmma below).
// For Q6_K and Q8_0 the order is matmul.cu's canonical one, as in every matmul kernel: each scale
// group's mma chain from +0, p = fma(scale, s_g, p) in group order, chunks summed left to right.
// wgmma's k16 step
// gives mma.sync's bits (matmul_prefill_wgmma.cu); kernel-check compares this kernel with the
// ggml-layout mma.sync kernel bit for bit.
//
// Block: 128 weight rows (two warpgroups, warp w owns tile w) x 64 tokens, K a 256-element chunk
// per stage: the eight tile records and the x tile (16 steps x 2 KB: its 64 tokens' half of
// xp_offset's tiles) arrive by bulk copies from one thread, kAhead chunks ahead, on the stage's
// mbarrier. Group partials alternate between two register sets, so group j's wgmmas run while
// group j - 1's partial is scaled into p. For Q6_K and Q8_0 a group's first wgmma starts its chain
// with the scale-d predicate off instead of on registers zeroed after the previous use: writing
// registers that an in-flight wgmma owns made ptxas inject waits for it (warning C7517), and
// without the zeroing Q6_K/Q8_0 drop from 220/255 registers to 166/161 (8B gate at 512 tokens:
// Q6_K 427 -> 372 us, Q8_0 341 -> 321). (Q4_K, in the per-group order until 2026-12-01, stayed at
// the 255-register cap with its bias terms and spilled; folded it needs 168 and none.)
#include "kernels/launch.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/weight_frag.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBM = 128, kBN = 64, kThreads = 256, kStages = 3, kAhead = kStages - 1;
constexpr int kTiles = kBM / 16;
constexpr int kStepBytes = kBN * 16 * 2;  // one k16 step of the block's x: 2 KB
constexpr int kXStage = 16 * kStepBytes;  // a chunk: 32 KB
static_assert(kBN * 2 == kXpTokens, "a block's tokens are half of an xp tile");

template <DType D>
struct QuantCfg {
  using T = Tiled<D>;
  static constexpr int kRecStage = kTiles * T::kBytes;
  static constexpr int kStage = kRecStage + kXStage;
  static constexpr int kSmem = kStages * kStage + kStages * 8;  // + one mbarrier a stage
  static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");
  static_assert(T::kBytes % 16 == 0 && kRecStage % 128 == 0, "bulk copies of whole records");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Chunk c for the folded types (fold.cuh): s = one wgmma chain over the chunk's 16 steps, A = the
// scaled quants, decoded four steps at a time into alternating register sets (a set is rewritten
// only after the wgmmas that read it are done); then the mins' step on mma.sync (the same
// instruction as every other kernel's) and total += fma(d, s, nb * b). s: a scratch accumulator
// (a per-group set, unused by these types).
template <DType D>
__device__ __forceinline__ void fold_chunk_wgmma(const MatmulArgs& a, const uint8_t* rec,
                                                 const uint8_t* X, const uint4& head_g,
                                                 const uint4& head_g8, int c, int tok0, int lane,
                                                 float (&s)[8][4], float (&total)[8][4]) {
  using T = Tiled<D>;
  const int g = lane >> 2, t = lane & 3;
  const FoldRow fr_g = fold_row(head_g), fr_g8 = fold_row(head_g8);
  uint32_t af[2][4][4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const typename T::Quad quad = T::load(rec, u, lane);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      T::folded_frag(quad, v, fold_scales(fr_g, fr_g8, (4 * u + v) >> 1), af[u & 1][v]);
    }
    wgmma_fence();
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const uint64_t desc = b_desc(X + (4 * u + v) * kStepBytes);
      if (u == 0 && v == 0)
        wgmma_m64n64k16<false>(s, af[u & 1][v], desc);
      else
        wgmma_m64n64k16<true>(s, af[u & 1][v], desc);
    }
    wgmma_commit();
    if (u < 3) wgmma_wait<1>();  // set (u + 1) & 1's previous readers are done
  }
  uint2 bb[8];
  bias_b_tiles(a, tok0, c, g, t, bb);  // loads in flight while the chain finishes
  uint32_t ba[4];
  bias_a(fr_g, fr_g8, t, ba);
  wgmma_wait<0>();
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    fold_tile(s[n], ba, bb[n], fr_g, fr_g8);  // s[n] becomes p (the next chain overwrites it)
#pragma unroll
    for (int i = 0; i < 4; ++i) total[n][i] = c == 0 ? s[n][i] : __fadd_rn(total[n][i], s[n][i]);
  }
}
#endif

template <DType D>
__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_quant_kernel(const MatmulArgs a) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tiled<D>;
  using C = QuantCfg<D>;
  constexpr int kGroupSteps = T::kGroup / 16, kGroups = kChunk / T::kGroup;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int row0 = static_cast<int>(blockIdx.y) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
  const int n_chunks = a.n_in / kChunk;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * C::kStage);
  // Thread 0 fills stage c % kStages with chunk c: each tile's record (rows past the matrix repeat
  // the last tile) and, per k16 step, the 2 KB of the xp tile that hold this block's tokens.
  auto issue = [&](int c) {
    if (c >= n_chunks) return;
    uint8_t* stage = smem + (c % kStages) * C::kStage;
    uint64_t* bar = full + c % kStages;
    mbar_arrive_expect_tx(bar, C::kStage);
    const int last_tile = (a.n_out - 1) / 16;
#pragma unroll 1
    for (int m = 0; m < kTiles; ++m) {
      const int64_t tile = min(row0 / 16 + m, last_tile);
      bulk_copy(stage + m * T::kBytes, a.w + (tile * n_chunks + c) * T::kBytes, T::kBytes, bar);
    }
#pragma unroll 1
    for (int s = 0; s < kChunk / 16; ++s) {
      bulk_copy(stage + C::kRecStage + s * kStepBytes,
                a.xp + xp_offset(tok0, int64_t{c} * kChunk + 16 * s, a.n_in), kStepBytes, bar);
    }
  };
  if (tid == 0) mbar_init_stages(full, kStages);
  __syncthreads();
  if (tid == 0) {
    for (int c = 0; c < kAhead; ++c) issue(c);
  }

  // grp: two sets of group partials; p: the chunk partial; total: the running chunk sum. Index
  // [n8 tile][mma.sync C register] of this warp's rows 16 warp + g, + 8.
  float grp[2][8][4] = {}, p[8][4] = {}, total[8][4] = {};
  for (int c = 0; c < n_chunks; ++c) {
    const uint8_t* stage = smem + (c % kStages) * C::kStage;
    mbar_wait(full + c % kStages, (c / kStages) & 1);  // chunk c has landed
    __syncthreads();  // every warp is done with chunk c - 1, whose stage issue() refills
    if (tid == 0) issue(c + kAhead);
    const uint8_t* rec = stage + warp * T::kBytes;
    const uint8_t* X = stage + C::kRecStage;
    const typename T::Head head_g = T::head(rec, g), head_g8 = T::head(rec, g + 8);
    if constexpr (kFold<D>) {
      fold_chunk_wgmma<D>(a, rec, X, head_g, head_g8, c, tok0, lane, grp[0], total);
      continue;
    }
    static_assert(kFold<D> || !T::kBias, "a tiled type with mins takes the folded order");
    // p += group j's partial (set j % 2), scaled.
    auto apply = [&](int j, float(&s)[8][4]) {
      const float2 sc_g = T::scale(head_g, j), sc_g8 = T::scale(head_g8, j);
#pragma unroll
      for (int n = 0; n < 8; ++n) apply_group<false>(p[n], s[n], sc_g, sc_g8, {});
    };
    typename T::Quad quad;
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      uint32_t af[kGroupSteps][4];
#pragma unroll
      for (int v = 0; v < kGroupSteps; ++v) {
        const int step = j * kGroupSteps + v;
        if (step % 4 == 0) quad = T::load(rec, step / 4, lane);
        T::frag(quad, step % 4, af[v]);
      }
      wgmma_fence();
#pragma unroll
      for (int v = 0; v < kGroupSteps; ++v) {
        const uint64_t b = b_desc(X + (j * kGroupSteps + v) * kStepBytes);
        if (v == 0)
          wgmma_m64n64k16<false>(grp[j & 1], af[v], b);
        else
          wgmma_m64n64k16<true>(grp[j & 1], af[v], b);
      }
      wgmma_commit();
      if (j > 0) {
        wgmma_wait<1>();  // group j - 1 is done
        apply(j - 1, grp[(j - 1) & 1]);
      }
    }
    wgmma_wait<0>();
    apply(kGroups - 1, grp[(kGroups - 1) & 1]);
#pragma unroll
    for (int n = 0; n < 8; ++n) {  // the chunk ends: fold it in order
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        total[n][i] = c == 0 ? p[n][i] : __fadd_rn(total[n][i], p[n][i]);
        p[n][i] = 0.0f;
      }
    }
  }
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + warp * 16 + g + 8 * (i >> 1);
      const int tok = tok0 + 8 * n + 2 * t + (i & 1);
      if (row < a.n_out && tok < a.n_tokens)
        a.y[static_cast<int64_t>(tok) * a.ldy + row] = total[n][i] * a.xinv[tok];
    }
  }
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

}  // namespace

template <DType D>
void launch_prefill_wgmma_quant(const MatmulArgs& a, cudaStream_t stream) {
  using C = QuantCfg<D>;
  if (a.xp_rows) fail(ErrorCode::internal, "prefill_wgmma_quant: reads xp_offset's layout only");
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(prefill_wgmma_quant_kernel<D>, C::kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_tokens + kBN - 1) / kBN),
                  static_cast<unsigned>((a.n_out + kBM - 1) / kBM));
  detail::launch(prefill_wgmma_quant_kernel<D>, grid, kThreads, C::kSmem, stream, a);
}

template void launch_prefill_wgmma_quant<DType::q4_k>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_wgmma_quant<DType::q6_k>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_wgmma_quant<DType::q8_0>(const MatmulArgs&, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
