// The wgmma matmul for tiled Q4_K weights at 17-64 tokens on Hopper (sm_90a): the quantized wgmma
// kernel's block (matmul_prefill_wgmma_quant.cu: 128 rows x 64 tokens, each warp decoding its m16
// tile's A fragments into registers, x from shared memory) with the chunks pipelined. That kernel
// drains its wgmma chain at every chunk's end, then loads the mins' sums from global memory and
// folds, while the tensor cores idle; measured at 64 tokens it takes ~3.6 us a 256-element chunk
// where its wgmmas need ~0.5 (docs/PERFORMANCE.md, nineteenth round). Here:
//  - two accumulator sets alternate between chunks: chunk c's fold runs after chunk c + 1's first
//    four wgmmas are issued, so the tensor cores work through it;
//  - the mins' B fragments (fold.cuh's bias_b) are loaded a chunk ahead, converted once and staged
//    in shared memory for every warp, as the warp-specialized Q4_K kernel does;
//  - the eight warps share a stage's bulk copies, a lane a copy (copy_chunk_part; warp 0's lanes
//    issued all 12-24 before the fifty-first round, and its warpgroup's first wgmma waited on
//    them);
//  - four stages, two chunks ahead (a stage is refilled once every warp is past the chunk two
//    before it, whose wgmmas and fold are then complete).
// The arithmetic is fold_chunk_wgmma's, operand for operand: one wgmma chain over a chunk's 16
// steps on the scaled quants, the mins' step on mma.sync, p = fma(d, s, nb * b), chunks summed left
// to right. So the bits are every Q4_K kernel's; kernel-check compares them with the ggml-layout
// kernels. MEMRA_WGMMA_FOLD64=0 runs the quantized wgmma kernel instead (the A/B). Unless
// MEMRA_FOLD64_SPLIT=0 the narrow launches take the split form instead
// (matmul_wgmma_fold64_split.cu: 64-row blocks whose warpgroups take the chunks in turn), whose
// chunk is this form's, from the pieces they share (wgmma_fold64.cuh).
#include <type_traits>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_wgmma_fold64.h"
#include "kernels/matmul/wgmma_fold64.cuh"

namespace memra::kernels::matmul_detail {
namespace {

using fold64::chunk_chain;
using fold64::chunk_end;
using fold64::copy_chunk;
using fold64::copy_chunk_part;
using fold64::kBN;
using fold64::kXsPerChunk;
using fold64::T;
constexpr int kBM = 128, kThreads = 256, kStages = 4, kAhead = 2;
constexpr int kTiles = kBM / 16;
using S = fold64::Stage<kTiles>;
constexpr int kStage = S::kBytes;
constexpr int kXsBytes = 2 * kXsPerChunk * 16;                    // two chunks' mins' fragments
constexpr int kSmem = kStages * kStage + kXsBytes + kStages * 8;  // + one mbarrier a stage
static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");
static_assert(kAhead + 2 <= kStages, "a refilled stage's chunk is two chunks back");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Warp 0 fills stage c % kStages with chunk c (copy_chunk), none past the last chunk: the first
// kAhead chunks (the loop's chunks share the copies: copy_chunk_part).
template <bool kRows>
__device__ __forceinline__ void fill_stage(const MatmulArgs& a, const CUtensorMap* xmap,
                                           uint8_t* smem, uint64_t* full, int c, int row0, int tok0,
                                           int lane) {
  if (c >= a.n_in / kChunk) return;
  copy_chunk<kTiles, kRows>(a, xmap, smem + (c % kStages) * kStage, full + c % kStages, c, row0,
                            tok0, lane);
}

// Chunk c's end for this warp's tile (stage: chunk c's, for the rows' headers; xs: its staged mins'
// fragments), added to the running sum in chunk order.
__device__ __forceinline__ void fold_end(const uint8_t* stage, const uint4* xs, int c, int warp,
                                         int lane, const float (&s)[8][4], float (&total)[8][4]) {
  const int g = lane >> 2;
  const uint8_t* rec = stage + warp * T::kBytes;
  const FoldRow r_g = fold_row(T::head(rec, g)), r_g8 = fold_row(T::head(rec, g + 8));
  chunk_end(r_g, r_g8, xs, lane, s, [&](int n, const float(&p)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) total[n][i] = c == 0 ? p[i] : __fadd_rn(total[n][i], p[i]);
  });
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Block (x, y): tokens [64 x, + 64) of the 128-row block of outs that y names. kRows: x is x.xp's
// rows form, read through xmap (x_rows_map; a zeroed map otherwise).
template <bool kRows>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_fold64_kernel(const MatmulArgs x, const BlockOuts outs,
                        const __grid_constant__ CUtensorMap xmap) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem_xp[];
  uint8_t* const smem = kRows ? rows_smem() : smem_xp;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2;
  const int by = static_cast<int>(blockIdx.y);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.block_begin, by, a);
  const int row0 = (by - outs.block_begin[o]) * kBM, tok0 = static_cast<int>(blockIdx.x) * kBN;
  const int n_chunks = a.n_in / kChunk;
  uint4* const xs = reinterpret_cast<uint4*>(smem + kStages * kStage);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * kStage + kXsBytes);
  // Threads below kXsPerChunk own token tid / 2's sums 4 (tid % 2) .. + 3 of each chunk: loaded a
  // chunk before they are staged (the address clamped into the batch; the value is not used past
  // it).
  const bool x_owner = tid < kXsPerChunk;
  const int x_tok = tok0 + (tid >> 1);
  const float* x_src =
      a.xsum + static_cast<int64_t>(min(x_tok, a.n_tokens - 1)) * a.xsum_stride + 4 * (tid & 1);
  float4 xv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (x_owner) xv = __ldg(reinterpret_cast<const float4*>(x_src));
  if (tid == 0) mbar_init_stages(full, kStages);
  __syncthreads();
  if (warp == 0) {
    for (int c = 0; c < kAhead; ++c) fill_stage<kRows>(a, &xmap, smem, full, c, row0, tok0, lane);
  }

  // s0, s1: the chains of even and odd chunks (n8 tile j, mma.sync's C layout); total: the running
  // chunk sum; af: two sets of A fragments, set u % 2 for a chunk's group u (four wgmmas), so a
  // set is rewritten only after the group before last has completed (chunk_chain).
  float s0[8][4] = {}, s1[8][4] = {}, total[8][4] = {};
  uint32_t af[2][4][4];
  // Chunk c into cur; prev holds chunk c - 1's chain, folded once it has completed.
  auto run_chunk = [&](auto fold_prev, int c, float(&cur)[8][4], float(&prev)[8][4]) {
    const uint8_t* stage = smem + (c % kStages) * kStage;
    mbar_wait(full + c % kStages, (c / kStages) & 1);  // chunk c has landed
    // Chunk c + kAhead's stage held chunk c - 2, whose phase is complete: armed before the block
    // meets, filled after it by all eight warps (copy_chunk_part).
    const int ahead = c + kAhead;
    if (tid == 0 && ahead < n_chunks) fold64::arm_stage<kTiles>(full + ahead % kStages);
    // Every warp is past chunk c - 1's first group, so chunk c - 2 is complete everywhere (its
    // stage is free) and so is its fold (its sums' buffer, c % 2, is free).
    __syncthreads();
    if (ahead < n_chunks)
      copy_chunk_part<kTiles, kRows, kBN, kThreads / 32>(
          a, &xmap, smem + (ahead % kStages) * kStage, full + ahead % kStages, ahead, row0, tok0,
          warp, lane);
    const uint8_t* rec = stage + warp * T::kBytes;
    const FoldRow fr_g = fold_row(T::head(rec, g)), fr_g8 = fold_row(T::head(rec, g + 8));
    chunk_chain<kRows>(rec, stage + S::kRecBytes, fr_g, fr_g8, lane, af, cur, [&] {
      // While the first group runs: chunk c's mins' fragments, staged for its fold in the next
      // chunk (after that chunk's barrier); not before the chain, where the owners' warps would
      // hold their warpgroup's first wgmma.
      if (x_owner) {
        xs[(c & 1) * kXsPerChunk + tid] =
            x_tok < a.n_tokens ? bias_b_both(xv) : make_uint4(0u, 0u, 0u, 0u);
        if (c + 1 < n_chunks) xv = __ldg(reinterpret_cast<const float4*>(x_src + 8 * (c + 1)));
      }
      if constexpr (decltype(fold_prev)::value) {  // chunk c - 1, complete: fold it meanwhile
        fold_end(smem + ((c - 1) % kStages) * kStage, xs + ((c - 1) & 1) * kXsPerChunk, c - 1, warp,
                 lane, prev, total);
      }
    });
  };
  // Chunk 0 has nothing before it to fold; the loop's body is the same for every chunk after it.
  // (Pairs, then an odd last chunk: a pair cut short inside the loop leaves two paths into its
  // end, whose register moves read the sets while a wgmma runs, and ptxas serializes them all.)
  run_chunk(std::false_type{}, 0, s0, s1);
  int c = 1;
  for (; c + 1 < n_chunks; c += 2) {
    run_chunk(std::true_type{}, c, s1, s0);
    run_chunk(std::true_type{}, c + 1, s0, s1);
  }
  if (c < n_chunks) run_chunk(std::true_type{}, c, s1, s0);
  wgmma_wait<0>();
  __syncthreads();  // the last chunk's staged sums are published
  const int last = n_chunks - 1;
  const uint8_t* last_stage = smem + (last % kStages) * kStage;
  const uint4* last_xs = xs + (last & 1) * kXsPerChunk;
  if (last & 1)  // (a branch, not a reference to either: the sets stay in registers)
    fold_end(last_stage, last_xs, last, warp, lane, s1, total);
  else
    fold_end(last_stage, last_xs, last, warp, lane, s0, total);
  store_tile<kBN>(a, reinterpret_cast<const float(&)[kBN / 2]>(total), row0, tok0, warp, lane);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

}  // namespace

// On by default; MEMRA_WGMMA_FOLD64=0 sends these steps to the quantized wgmma kernel (the same
// bits).
bool wgmma_fold64_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_FOLD64", true);
  return enabled;
}

void launch_wgmma_fold64(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  if (x.n_in % kChunk != 0 || outs.n < 1 || (x.xp_rows && x.n_tokens > kBN))
    fail(ErrorCode::internal,
         "wgmma_fold64: K {} (whole 256-element chunks), {} outputs, x's rows form at {} tokens "
         "(at most {})",
         x.n_in, outs.n, x.n_tokens, kBN);
  if (x.n_tokens <= kBN && fold64_split_takes(outs.block_begin[outs.n])) {
    launch_wgmma_fold64_split(x, outs, stream);
    return;
  }
  const CUtensorMap xmap = x_rows_map(x, kBN);
  if (x.xp_rows)
    launch_block_outs<wgmma_fold64_kernel<true>, kBN>(x, outs, kThreads, kSmem, stream, xmap);
  else
    launch_block_outs<wgmma_fold64_kernel<false>, kBN>(x, outs, kThreads, kSmem, stream, xmap);
}

void launch_wgmma_fold64(const MatmulArgs& args, cudaStream_t stream) {
  launch_wgmma_fold64(args, BlockOuts::of(args), stream);
}

}  // namespace memra::kernels::matmul_detail
