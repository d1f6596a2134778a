// matmul (kernels.h): y = W x for ggml weight types, batch-invariant by construction.
//
// Design. Each token row of x is scaled by a power of two that brings its largest |x| into
// [2^14, 2^15) and rounded to f16 (RNE) into scratch: 11 significant bits for every element down
// to 2^-28 of the row's largest, with no overflow whatever the activations' range. Weights are
// decoded by a pure function of their block bytes (weight_frag.cuh): quantized types as their
// exact integer quants, with each group's f32 scale and bias applied after the group's mma
// chain; F16/BF16 as f16 values. The products run on mma.sync m16n8k16 f16 with f32
// accumulation.
// - Swap AB: weights are the mma A operand (M = output rows), tokens the B operand (N = 8 per
//   mma), so a 1-token decode still fills whole 16-row weight tiles and streams each weight byte
//   once, while prefill tiles the same instruction over 128 x 64 blocks.
// - The canonical order, the only one any configuration uses: K is cut into 256-element chunks
//   (the last may be shorter). Chunk c's partial p_c: for F16/BF16, an mma chain over its k16
//   steps in increasing order from +0; for quantized types, p starts at +0 and for each scale
//   group g of the chunk in order, s_g = an mma chain over the group's k16 steps from +0, then
//   p = fma(scale_g, s_g, p) and, for types with a bias, p = fma(bias_g, xsum_g, p); for Q4_K and
//   Q5_K, the folded order instead (fold.cuh): one chain over the chunk with each group's integer
//   scale in the A operand, one more k16 step for the mins, p = fma(d, s, -32 dmin * b). Then
//   y = (((p_0 + p_1) + p_2) + ...) in f32, times the row's power of two. The chunk and group
//   sizes are constants of the dtype, so the order depends on K alone. A plain chain over all of
//   K would make every output wait on K/16 dependent mmas; fixed chunks let the decode kernel
//   spread one row tile's K over 8 warps and add their partials in chunk order, while the
//   prefill kernel keeps a running sum in registers and folds each chunk as it ends. No split
//   depends on the batch, the tile shape or the device.
// - Invariance: an mma output element depends only on its A row, its B column and its
//   accumulator; A rows are the decoded weights of that output row, B columns the f16 x of that
//   token (zero columns for absent tokens, which touch no other column), and a token's scale and
//   group sums are functions of its own row. Both kernels compute every p_c with the same
//   instruction sequence on the same operands and fold in the same order, so y[t][o] is
//   bit-identical for any n_tokens, chunking of prefill, or batch mates.
// - F32 weights, and F16 / BF16 weights whose K is no multiple of 16 (tiny test fixtures: an
//   8-wide per-layer input, a 24-wide shared expert), take a separate exact path: f32 FFMA over
//   a lane-strided partition of K and a fixed xor-shuffle tree, the same arithmetic for any
//   n_tokens (matmul_exact_kernel). A matrix takes one path or the other by its dtype and K alone.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/env.h"
#include "core/error.h"
#include "kernels/elementwise/norm_row.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/matmul_wgmma_fold64.h"
#include "kernels/matmul/mma_util.cuh"
#include "kernels/matmul/prepare_x.cuh"
#include "kernels/matmul/scratch_layout.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/row_max.h"

namespace memra::kernels {
namespace {

using detail::aligned16;
using matmul_detail::kDecodeTokens;
using matmul_detail::kWgmmaMinTokens;
using matmul_detail::launch_x_to_f16;
using matmul_detail::launch_xp_groups;
using matmul_detail::MatmulArgs;
using matmul_detail::ScratchLayout;
using matmul_detail::x_rows_enabled;
using matmul_detail::xp_groups_enabled;

// Whether tiled weights of n_out rows take the wgmma kernels (sm_90a) for n_tokens rather than the
// decode kernels. Above 64 tokens always. At 17-64 tokens a wgmma block still walks all of K for
// its 128 rows (~75-80 us at K = 4096, whatever the token count), so it pays only with enough row
// blocks to fill the GPU, while the decode kernel's time grows with the tokens (it decodes each
// weight fragment per 8-token tile). Measured per matrix on the H200 (docs/PERFORMANCE.md, fifth
// round): at 64 tokens wgmma wins from 48 row blocks (8B gate Q4_K 198 -> 82 us; down, 32 blocks,
// 198 -> 224 loses), at 32 tokens from 96 (never at kWgmmaMinTokens or fewer, scratch_layout.cuh).
// Every kernel gives the same bits, so this is speed only.
static_assert(kPreparedRows <= kWgmmaMinTokens, "prepared rows never need x's wgmma form");
// MEMRA_WGMMA_DECODE_ALL=1: at 33-64 tokens every tiled output takes wgmma (the A/B of the row
// blocks' threshold).
bool wgmma_decode_all() {
  static const bool all = env_switch("MEMRA_WGMMA_DECODE_ALL", false);
  return all;
}
bool wgmma_pays(int64_t n_out, int64_t n_tokens) {
  const int64_t row_blocks = (n_out + 127) / 128;
  return n_tokens > kDecodeTokens || (n_tokens > 32 && (row_blocks >= 48 || wgmma_decode_all())) ||
         (n_tokens > kWgmmaMinTokens && row_blocks >= 96);
}

// The exact path: F32 weights (any n_in), and F16 / BF16 weights whose n_in is no multiple of 16
// (the tensor cores' k step; only tiny test fixtures have such matrices). One warp per output
// row and block y per kExactTokens tokens; lane l sums w[i] * x[i] for i = l, l + 32, ... in
// order with FFMA on f32 values (F16 and BF16 widen to f32 exactly, x is used as is), then a
// fixed xor tree (every lane ends with the same bits). Each token has its own accumulator, so
// the per-element order never depends on n_tokens or on which tokens share a block: every token
// count of such a matrix runs this arithmetic (a one-token block only loads more ahead).
// Why the shape (MoE routers are F32: Gemma 4 26B-A4B's 128 x 2816, memra-kernel-bench --moe):
// the tokens once looped inside the 16 blocks of the rows, 186 us at 64 tokens; block y now owns
// 4 of them. A lane's next kBatch weights and x values are loaded before its chain uses any: at
// one token the loads, 8 at a time, were 11 dependent round trips to memory (12.5 us), now 3.
constexpr int kExactWarps = 8;
constexpr int kExactTokens = 4;
bool exact_path(DType wtype, int64_t n_in) {
  return wtype == DType::f32 || ((wtype == DType::f16 || wtype == DType::bf16) && n_in % 16 != 0);
}

template <DType D>
__device__ __forceinline__ float weight_f32(const void* w, int64_t i) {
  if constexpr (D == DType::f32) {
    return __ldg(static_cast<const float*>(w) + i);
  } else if constexpr (D == DType::f16) {
    return __half2float(__ushort_as_half(__ldg(static_cast<const unsigned short*>(w) + i)));
  } else {
    static_assert(D == DType::bf16, "F32, F16 or BF16 weights");
    return __uint_as_float(static_cast<uint32_t>(__ldg(static_cast<const unsigned short*>(w) + i))
                           << 16);
  }
}

// kTokens: 1 (a block of one token: a decode step) or kExactTokens (up to that many a block).
template <DType D, int kTokens>
__global__ void matmul_exact_kernel(const void* __restrict__ w, int n_in, int n_out,
                                    const float* __restrict__ x, int n_tokens,
                                    float* __restrict__ y, int64_t ldy) {
  detail::wait_for_inputs();
  // Registers: kBatch weights and kBatch x kTokens x values in flight.
  constexpr int kBatch = kTokens == 1 ? 32 : 8;
  const int lane = threadIdx.x & 31;
  const int o = blockIdx.x * kExactWarps + (threadIdx.x >> 5);
  if (o >= n_out) return;
  const int t0 = static_cast<int>(blockIdx.y) * kTokens;
  const int nt = min(kTokens, n_tokens - t0);
  const int64_t row = static_cast<int64_t>(o) * n_in;  // the row's first element
  const float* xt = x + static_cast<int64_t>(t0) * n_in;
  float acc[kTokens] = {};
  // i0 steps the same for every lane (the __syncwarp below needs the whole warp): lane l takes
  // i = i0 + 32 b + l, so its elements still come in the order l, l + 32, ...
  for (int i0 = 0; i0 < n_in; i0 += 32 * kBatch) {
    // Every load of the batch first, unpredicated (addresses clamped into the row and the block's
    // tokens), so that they are all in flight before the chain needs one.
    float wv[kBatch], xv[kBatch][kTokens];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = min(i0 + 32 * b + lane, n_in - 1);
      wv[b] = weight_f32<D>(w, row + i);
#pragma unroll
      for (int j = 0; j < kTokens; ++j)
        xv[b][j] = __ldg(xt + static_cast<int64_t>(min(j, nt - 1)) * n_in + i);
    }
    __syncwarp();  // keeps the scheduler from sinking the loads back to their uses
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (i0 + 32 * b + lane < n_in) {  // past n_in nothing is added: any kBatch, the same chain
#pragma unroll
        for (int j = 0; j < kTokens; ++j) {
          if (j < nt) acc[j] = fmaf(wv[b], xv[b][j], acc[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kTokens; ++j) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      acc[j] = __fadd_rn(acc[j], __shfl_xor_sync(0xffffffffu, acc[j], off));
    }
    if (lane == 0 && j < nt) y[(t0 + j) * ldy + o] = acc[j];
  }
}

template <DType D>
void launch_exact(const MatmulOut& o, int n_in, const float* x, int n_tokens, cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>((o.n_out + kExactWarps - 1) / kExactWarps),
                    static_cast<unsigned>((n_tokens + kExactTokens - 1) / kExactTokens));
  if (blocks.y > 65535)
    fail(ErrorCode::invalid_argument, "matmul: {} tokens over the exact path (at most {})",
         n_tokens, 65535 * kExactTokens);
  auto kernel = n_tokens == 1 ? matmul_exact_kernel<D, 1> : matmul_exact_kernel<D, kExactTokens>;
  detail::launch(kernel, blocks, kExactWarps * 32, 0, stream, o.w, n_in, static_cast<int>(o.n_out),
                 x, n_tokens, o.y, o.ldy);
}

__global__ void bf16_beyond_f16_kernel(const uint16_t* __restrict__ w, int64_t n,
                                       unsigned long long* count) {
  detail::wait_for_inputs();
  unsigned long long mine = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // |v| > 65504 (the largest finite f16): bf16 magnitudes from 0x4780 (65536) up, inf included.
    mine += (w[i] & 0x7fffu) >= 0x4780u && (w[i] & 0x7fffu) <= 0x7f80u;
  }
  for (int off = 16; off > 0; off >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, off);
  if ((threadIdx.x & 31) == 0 && mine) atomicAdd(count, mine);
}

template <DType D>
void run_mma(const MatmulArgs& args, WeightLayout layout, cudaStream_t stream) {
  if constexpr (matmul_detail::kHasTiled<D>) {
    if (layout == WeightLayout::tiled) {
      if (args.xp != nullptr) {  // uses_wgmma said so
        if constexpr (D == DType::f16 || D == DType::bf16) {
          matmul_detail::launch_prefill_wgmma(args, stream);
        } else if (D == DType::q4_k && args.n_tokens > kDecodeTokens &&
                   matmul_detail::prefill_wgmma_fold_enabled()) {
          matmul_detail::launch_prefill_wgmma_fold(args, stream);
        } else if (D == DType::q4_k && args.n_tokens <= kDecodeTokens &&
                   matmul_detail::wgmma_fold64_enabled()) {
          matmul_detail::launch_wgmma_fold64(args, stream);
        } else if constexpr (D == DType::q6_k || D == DType::q8_0) {
          if (args.n_tokens > kDecodeTokens ? matmul_detail::prefill_wgmma_scaled_enabled()
                                            : matmul_detail::scaled_decode_enabled())
            matmul_detail::launch_prefill_wgmma_scaled<D>(args, stream);
          else
            matmul_detail::launch_prefill_wgmma_quant<D>(args, stream);
        } else {
          matmul_detail::launch_prefill_wgmma_quant<D>(args, stream);
        }
      } else if (matmul_detail::cluster_decode_takes(D, args.n_out, args.n_in, args.n_tokens,
                                                     wgmma_pays(args.n_out, args.n_tokens))) {
        matmul_detail::launch_decode_cluster<D>(args, stream);
      } else if (args.n_tokens <= kDecodeTokens) {
        matmul_detail::launch_decode_tiled<D>(args, stream);
      } else {
        matmul_detail::launch_prefill_tiled<D>(args, stream);
      }
      return;
    }
  }
  if (args.n_tokens <= kDecodeTokens) {
    matmul_detail::launch_decode<D>(args, stream);
  } else {
    matmul_detail::launch_prefill<D>(args, stream);
  }
}

// At 33-64 tokens the pipelined Q4_K kernel (matmul_wgmma_fold64.cu) also takes the narrow
// outputs with K up to 4,096, whatever their row blocks: a block's time is its chunks' (~2.5 us
// each, measured), so 8B's q/k/v in one launch took 39 us and o ~40, against 47 us for each alone
// on the tiled decode kernel; the down projection's 48 chunks stay there (106 vs 119 us), unless
// the split form takes it (unless MEMRA_FOLD64_SPLIT=0: half the chain a block, twice the blocks).
// At 17-32 tokens only under MEMRA_SPLIT_SMALL=1 (split_small_takes), and only where the split
// form takes the output.
bool fold64_takes(const MatmulOut& o, int64_t n_in, int64_t n_tokens) {
  if (o.wtype != DType::q4_k || n_tokens > kDecodeTokens || !matmul_detail::wgmma_fold64_enabled())
    return false;
  const bool split = matmul_detail::fold64_split_takes((o.n_out + 127) / 128);
  if (n_tokens > 32) return n_in <= 4096 || split;
  return split && matmul_detail::split_small_takes(n_tokens, o.wtype, n_in);
}

// Unless MEMRA_SCALED_DECODE=0: the narrow Q6_K and Q8_0 outputs at 33-64 tokens (any K) on the
// scaled wgmma kernel's split form, as fold64_takes gives Q4_K's to the pipelined kernel (the 8B
// Q4_K_M's Q6_K v and, in half its layers, down, which run on the tiled decode kernel at ~100 us a
// layer).
// (At 17-32 tokens Q8_0's of K 4,096 or more by default, split_small_q8_0; every K and Q6_K's
// too under MEMRA_SPLIT_SMALL=1 or =scaled.)
bool scaled_split_takes(const MatmulOut& o, int64_t n_in, int64_t n_tokens) {
  return (o.wtype == DType::q6_k || o.wtype == DType::q8_0) &&
         (n_tokens > 32 || matmul_detail::split_small_takes(n_tokens, o.wtype, n_in)) &&
         n_tokens <= kDecodeTokens && matmul_detail::scaled_decode_enabled() &&
         matmul_detail::split_pays((o.n_out + 127) / 128);
}

// Whether this output's product runs on a wgmma kernel (tiled weights on an sm_90a build and
// device), which reads x in physical k order: where it pays and the cluster decode kernel does not
// take the output (cluster_decode_takes: at 17-32 tokens it leaves wide outputs to wgmma unless
// MEMRA_CLUSTER_Q4K_WIDE=1 gives it Q4_K's), or the pipelined Q4_K kernel takes it
// (fold64_takes), or the scaled kernel's split form (scaled_split_takes).
bool uses_wgmma(const MatmulOut& o, int64_t n_in, int64_t n_tokens) {
  const bool pays = wgmma_pays(o.n_out, n_tokens) || fold64_takes(o, n_in, n_tokens) ||
                    scaled_split_takes(o, n_in, n_tokens);
  return o.layout == WeightLayout::tiled && o.n_out > 0 && pays &&
         !matmul_detail::cluster_decode_takes(o.wtype, o.n_out, n_in, n_tokens, pays) &&
         matmul_detail::prefill_wgmma_available();
}

// Calls f(std::integral_constant<DType, D>{}) for the one D among Ds equal to the runtime d: a
// runtime dtype becomes a template argument.
template <DType... Ds, typename F>
void with_dtype(DType d, F&& f) {
  ((d == Ds ? f(std::integral_constant<DType, Ds>{}) : void()), ...);
}

// Puts the outputs of each dtype of Ds that `takes` accepts into launches of up to kMultiOuts
// outputs (`run(std::integral_constant<DType, D>, outs)`, outs an Outs: MultiOut for the
// 16-row-tile kernels, BlockOuts for the 128-row-block ones); grouped[i] marks the outputs
// launched. Groups of fewer than min_outputs are left to the caller's one-launch-per-output loop.
template <typename Outs, DType... Ds, typename Takes, typename Run>
void launch_groups(const MatmulOut* outs, int n_outs, int min_outputs, bool* grouped, Takes takes,
                   Run run) {
  for (DType d : {Ds...}) {
    int n_taken = 0;
    for (int i = 0; i < n_outs; ++i) n_taken += !grouped[i] && outs[i].wtype == d && takes(outs[i]);
    if (n_taken < min_outputs) continue;
    Outs m;
    auto flush = [&] {
      if (m.n > 0) with_dtype<Ds...>(d, [&](auto D) { run(D, m); });
      m = {};
    };
    for (int i = 0; i < n_outs; ++i) {
      const MatmulOut& o = outs[i];
      if (grouped[i] || o.wtype != d || !takes(o)) continue;
      m.add(o.w, o.y, o.n_out, o.ldy);
      grouped[i] = true;
      if (m.n == matmul_detail::kMultiOuts) flush();
    }
    flush();
  }
}

// One-token outputs over tiled Q4_K, Q6_K and Q8_0: one launch per dtype (and per kMultiOuts
// outputs) of the one-token kernel (matmul_decode_single.cu).
void launch_single_groups(const MatmulOut* outs, int n_outs, const MatmulArgs& x, bool* grouped,
                          cudaStream_t stream) {
  const auto tiled = [](const MatmulOut& o) {
    return o.layout == WeightLayout::tiled && o.n_out > 0;
  };
  launch_groups<matmul_detail::MultiOut, DType::q4_k, DType::q6_k, DType::q8_0>(
      outs, n_outs, 1, grouped, tiled, [&](auto D, const matmul_detail::MultiOut& m) {
        matmul_detail::launch_decode_single<D.value>(x, m, stream);
      });
}

// Two or more tiled outputs of one dtype at 1-16 tokens that the tiled decode kernel would run one
// launch each (F16/BF16 at any of those token counts, K-quants past one token): one launch per
// dtype (and per kMultiOuts outputs).
void launch_tiled_decode_groups(const MatmulOut* outs, int n_outs, int64_t n_in,
                                const MatmulArgs& x, bool* grouped, cudaStream_t stream) {
  const auto takes = [&](const MatmulOut& o) {
    return o.layout == WeightLayout::tiled && o.n_out > 0 && !exact_path(o.wtype, n_in) &&
           !uses_wgmma(o, n_in, x.n_tokens);
  };
  launch_groups<matmul_detail::MultiOut, DType::q4_k, DType::q6_k, DType::q8_0, DType::f16,
                DType::bf16>(outs, n_outs, 2, grouped, takes,
                             [&](auto D, const matmul_detail::MultiOut& m) {
                               matmul_detail::launch_decode_tiled_multi<D.value>(x, m, stream);
                             });
}

// A call's shared launches, the first on the caller's stream and the later ones on the side
// stream where the caller hands one (SideStream): forked once x is prepared (the side stream waits
// for nothing else), joined back before the call returns, so that what follows on the caller's
// stream waits for every product. Same kernels on the same operands either way: the same bits.
// During a graph recording the fork and the join become the graph's branch and its merge.
class SideFork {
 public:
  SideFork(const SideStream* side, cudaStream_t stream) : side_(side), stream_(stream) {}
  SideFork(const SideFork&) = delete;
  SideFork& operator=(const SideFork&) = delete;
  bool has_side() const { return side_ != nullptr; }
  // The stream of the call's next shared launch. The fork is marked before the first one, so that
  // the side stream waits for x's preparation only, not for the products on the caller's stream.
  cudaStream_t next() {
    if (!side_) return stream_;
    if (launches_++ == 0) {
      ok(cudaEventRecord(side_->fork, stream_), "cudaEventRecord");
      return stream_;
    }
    if (!forked_) {
      ok(cudaStreamWaitEvent(side_->stream, side_->fork, 0), "cudaStreamWaitEvent");
      forked_ = true;
    }
    return side_->stream;
  }
  // The caller's stream goes on once the side stream's products are written.
  void join() {
    if (!forked_) return;
    ok(cudaEventRecord(side_->join, side_->stream), "cudaEventRecord");
    ok(cudaStreamWaitEvent(stream_, side_->join, 0), "cudaStreamWaitEvent");
    forked_ = false;
  }

 private:
  static void ok(cudaError_t st, const char* what) {
    if (st != cudaSuccess)
      fail(ErrorCode::internal, "matmul: {} on the side stream: {}", what, cudaGetErrorString(st));
  }
  const SideStream* side_;
  cudaStream_t stream_;
  int launches_ = 0;
  bool forked_ = false;
};

// Whether a step of at most kDecodeTokens tokens uses the side stream it is handed too (prefill
// steps always do): unset or MEMRA_DECODE_SIDE_STREAM=1, the default since the fifty-second
// round; 0, one stream (the A/B). At 33-64 tokens a Q4_K_M layer's Q6_K v (32 blocks of the scaled
// kernel's halves) then runs beside q and k's 80 split blocks instead of after them (the 8B's 18
// such layers). Predicted ~3% at 64 sequences; measured on the H100 (docs/PERFORMANCE.md): 8B
// Q4_K_M c64 6,454 -> 6,740 tok/s (+4.4%), c40 +3.4%, the 0.6B's c64 +3.3%.
bool decode_side_enabled() {
  static const bool enabled = env_switch("MEMRA_DECODE_SIDE_STREAM", true);
  return enabled;
}

// Whether a step of 17-32 tokens runs its per-output launches after the call's first on the side
// stream too (under decode_side_enabled): MEMRA_DECODE_SIDE_SMALL unset or 1, the default since
// the fifty-fourth round; 0, one stream (`gpu_check.sh sidesmall` is its A/B). Why: at 17-32 tokens
// no kernel shares launches between outputs (the cluster decode kernel, and the tiled one below
// its K, take one output a launch), so a layer's q, k and v run one after another, and k and v
// alone fill a quarter of the SMs (the 8B's 1,024 rows: 32 blocks of the cluster kernel). The H100
// step profile at 20 sequences (docs/PERFORMANCE.md, fifty-third round) has the cluster kernel at
// 21.3 us a launch, four a layer. With it q runs on the step's stream and k then v beside it.
// Predicted up to +10% at 20 sequences; measured on the H100 (docs/PERFORMANCE.md, fifty-fourth
// round): 8B Q4_K_M c20 2,538 -> 2,735 tok/s (+7.8%), c32 +9.9%, 0.6B Q4_K_M +2.6-5.4%, 8B Q8_0
// (its products on the scaled kernel's split form) flat. Same kernels on the same operands: the
// same bits.
bool decode_side_small_enabled() {
  static const bool enabled = env_switch("MEMRA_DECODE_SIDE_SMALL", true);
  return enabled;
}

// The tiled Q4_K outputs that take wgmma at 17-64 tokens (x.xp set): one launch of the pipelined
// kernel per kMultiOuts of them (matmul_wgmma_fold64.h), so that narrow ones run side by side.
void launch_fold64_groups(const MatmulOut* outs, int n_outs, int64_t n_in, const MatmulArgs& x,
                          bool* grouped, SideFork& fork) {
  const auto takes = [&](const MatmulOut& o) { return uses_wgmma(o, n_in, x.n_tokens); };
  launch_groups<matmul_detail::BlockOuts, DType::q4_k>(
      outs, n_outs, 1, grouped, takes, [&](auto, const matmul_detail::BlockOuts& m) {
        matmul_detail::launch_wgmma_fold64(x, m, fork.next());
      });
}

// Unless MEMRA_SCALED_DECODE=0: the tiled Q6_K and Q8_0 outputs that take wgmma at 17-64 tokens
// share launches of the scaled kernel the same way, per dtype (a Q8_0 model's q/k/v: 48 row blocks
// in one launch, its split form, instead of three launches of 32, 8 and 8).
void launch_scaled_decode_groups(const MatmulOut* outs, int n_outs, int64_t n_in,
                                 const MatmulArgs& x, bool* grouped, SideFork& fork) {
  const auto takes = [&](const MatmulOut& o) { return uses_wgmma(o, n_in, x.n_tokens); };
  launch_groups<matmul_detail::BlockOuts, DType::q6_k, DType::q8_0>(
      outs, n_outs, 1, grouped, takes, [&](auto D, const matmul_detail::BlockOuts& m) {
        matmul_detail::launch_prefill_wgmma_scaled<D.value>(x, m, fork.next());
      });
}

// The tiled outputs of a prefill step (over 64 tokens) that take the F16/BF16 wgmma kernel, the
// Q4_K warp-specialized one or the Q6_K / Q8_0 scaled one: two or more of one dtype share a
// launch (BlockOuts). A layer's k and v (1,024 rows of the 8B: 8 row blocks) alone fill a quarter
// of the H200 for the time of a full wave; with q in the same launch the three take two waves
// instead of three. With a side stream every such output is launched here, and launches after the
// first run on the side stream, beside it.
void launch_prefill_groups(const MatmulOut* outs, int n_outs, int64_t n_in, const MatmulArgs& x,
                           bool* grouped, SideFork& fork) {
  const auto takes = [&](const MatmulOut& o) {
    if (exact_path(o.wtype, n_in) || !uses_wgmma(o, n_in, x.n_tokens)) return false;
    if (o.wtype == DType::f16 || o.wtype == DType::bf16) return true;
    return o.wtype == DType::q4_k ? matmul_detail::prefill_wgmma_fold_enabled()
                                  : matmul_detail::prefill_wgmma_scaled_enabled();
  };
  launch_groups<matmul_detail::BlockOuts, DType::f16, DType::bf16, DType::q4_k, DType::q6_k,
                DType::q8_0>(outs, n_outs, fork.has_side() ? 1 : 2, grouped, takes,
                             [&](auto D, const matmul_detail::BlockOuts& b) {
                               cudaStream_t s = fork.next();
                               if constexpr (D.value == DType::f16 || D.value == DType::bf16)
                                 matmul_detail::launch_prefill_wgmma(x, b, s);
                               else if constexpr (D.value == DType::q4_k)
                                 matmul_detail::launch_prefill_wgmma_fold(x, b, s);
                               else
                                 matmul_detail::launch_prefill_wgmma_scaled<D.value>(x, b, s);
                             });
}

}  // namespace

bool matmul_supports(DType wtype) {
  switch (wtype) {
    case DType::f32:
#define MEMRA_CASE(D) case D:
      MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_CASE)
#undef MEMRA_CASE
      return true;
    default:
      return false;
  }
}

size_t matmul_scratch_bytes(int64_t n_tokens, int64_t n_in) {
  if (n_tokens <= 0 || n_in <= 0) return 0;
  return static_cast<size_t>(ScratchLayout(n_tokens, n_in).total(n_tokens));
}

bool part_max_read(int64_t n_rows, int64_t n_cols) {
  // (One token always takes the grouped decode launches, tiled_decode_groups_take.)
  return n_rows == 1 && matmul_detail::single_decode_enabled() &&
         part_max_count(n_cols) <= kMaxParts;
}

namespace {

// Refuses what the kernels cannot run, by name.
void check_matmul(DType wtype, int64_t n_in, int64_t n_out, int64_t n_tokens, int64_t ldy,
                  WeightLayout layout) {
  if (!matmul_supports(wtype)) {
    fail(ErrorCode::unsupported, "matmul: no CUDA kernel for weight type {}", dtype_name(wtype));
  }
  if (layout == WeightLayout::tiled && !matmul_tiled_supports(wtype, n_in)) {
    fail(ErrorCode::invalid_argument, "matmul: no tiled layout for {} with n_in {}",
         dtype_name(wtype), n_in);
  }
  // The tensor-core kernels step K by 16; the exact path (F32, and F16 / BF16 with other n_in)
  // takes any n_in. Every quantized block size is a multiple of 16.
  const int64_t block = dtype_traits(wtype).block_size;
  if (n_in <= 0 || n_in % block != 0 || (!exact_path(wtype, n_in) && n_in % 16 != 0) ||
      n_in > (int64_t{1} << 30)) {
    fail(ErrorCode::invalid_argument,
         "matmul: n_in {} must be a positive multiple of the {} block size {} (and of 16 for "
         "the tensor-core kernels)",
         n_in, dtype_name(wtype), block);
  }
  // 65535 row tiles of 128 in the prefill grid's y dimension.
  if (n_out < 0 || n_out > 65535 * 128 || n_tokens < 0 || n_tokens > (int64_t{1} << 30)) {
    fail(ErrorCode::invalid_argument, "matmul: unsupported sizes n_out {} n_tokens {}", n_out,
         n_tokens);
  }
  if (ldy < n_out) fail(ErrorCode::invalid_argument, "matmul: ldy {} < n_out {}", ldy, n_out);
}

// Whether a wgmma output of a step of at most kDecodeTokens tokens runs on a kernel that reads x's
// rows form there (run_mma, launch_fold64_groups, launch_scaled_decode_groups): Q4_K on the
// pipelined kernel, Q6_K and Q8_0 on the scaled one (unless MEMRA_X_ROWS_DECODE=0, prepare_x.cu).
bool reads_rows_in_decode(const MatmulOut& o) {
  return (o.wtype == DType::q4_k && matmul_detail::wgmma_fold64_enabled()) ||
         ((o.wtype == DType::q6_k || o.wtype == DType::q8_0) &&
          matmul_detail::scaled_decode_enabled());
}

// What the caller hands matmul_shared_x_impl besides x: nothing, x's prepared rows
// (rms_norm_for_matmul), its rows' largest |x|, x's rows form or one row's partial maxima
// (kernels/row_max.h).
enum class XGiven { none, prepared, row_max, rows, part_max };

// Whether every output of a one-token call runs on a kernel that can read x raw (one_token_x.cuh),
// so that nothing reads x's prepared form: tiled Q4_K, Q6_K and Q8_0 on the one-token kernel
// (launch_single_groups takes them all, at most max_grouped outputs), and an F16 or BF16 output on
// the tiled decode kernel's own launch (the only one of its dtype: two would share a grouped
// launch, which reads the prepared form).
bool raw_x_takes(const MatmulOut* outs, int n_outs, int64_t n_in, int max_grouped) {
  if (n_outs > max_grouped) return false;
  int f16 = 0, bf16 = 0;
  for (int i = 0; i < n_outs; ++i) {
    const MatmulOut& o = outs[i];
    if (o.n_out == 0) continue;
    const bool single = o.wtype == DType::q4_k || o.wtype == DType::q6_k || o.wtype == DType::q8_0;
    const bool tiled16 = o.wtype == DType::f16 || o.wtype == DType::bf16;
    f16 += o.wtype == DType::f16;
    bf16 += o.wtype == DType::bf16;
    if (o.layout != WeightLayout::tiled || !(single || tiled16) || exact_path(o.wtype, n_in) ||
        uses_wgmma(o, n_in, 1))
      return false;
  }
  return f16 <= 1 && bf16 <= 1;
}

// n_parts: the partial maxima handed over (XGiven::part_max).
void matmul_shared_x_impl(const MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                          int64_t n_tokens, void* scratch, cudaStream_t stream, XGiven given,
                          const SideStream* side, int n_parts = 0) {
  const bool x_prepared = given == XGiven::prepared;
  bool any_mma = false, any_wgmma = false;  // which x layouts the outputs read
  bool every_wgmma_reads_rows = true;       // at most kDecodeTokens: reads_rows_in_decode
  for (int i = 0; i < n_outs; ++i) {
    const MatmulOut& o = outs[i];
    check_matmul(o.wtype, n_in, o.n_out, n_tokens, o.ldy, o.layout);
    // 16-byte pieces: cp.async of weight blocks, float4 reads of x, uint4 writes of scratch (the
    // exact path reads w and x element by element and uses no scratch).
    const bool exact = exact_path(o.wtype, n_in);
    if (!exact && (!aligned16(o.w) || !aligned16(x) || !aligned16(scratch))) {
      fail(ErrorCode::invalid_argument, "matmul: w, x and scratch must be 16-byte aligned");
    }
    if (!exact && o.n_out > 0) {
      const bool wgmma = uses_wgmma(o, n_in, n_tokens);
      (wgmma ? any_wgmma : any_mma) = true;
      if (wgmma && !reads_rows_in_decode(o)) every_wgmma_reads_rows = false;
    }
  }
  if (n_tokens == 0) return;
  constexpr int kMaxGrouped = 16;  // outputs of a call that shared launches may take
  const int in = static_cast<int>(n_in), tokens = static_cast<int>(n_tokens);
  const ScratchLayout layout(n_tokens, n_in);
  const auto [xh, xp, xsum, xinv] = layout.parts(scratch);
  // One token's x read raw by the one-token kernel from the partial maxima handed over (else x is
  // prepared below as for an x handed nothing: the same bits).
  const bool x_raw = given == XGiven::part_max && part_max_read(n_tokens, n_in) && n_parts >= 1 &&
                     n_parts <= part_max_capacity(n_in) &&
                     raw_x_takes(outs, n_outs, n_in, kMaxGrouped);
  if (x_prepared && (any_wgmma || n_tokens > kPreparedRows))
    fail(ErrorCode::internal, "matmul: x prepared for {} tokens, which need its wgmma form",
         n_tokens);
  // x's rows form: written by the kernel before (rms_norm_x_rows), or from the producer's maxima
  // in one launch by token groups, else a row a block.
  const bool xp_rows = any_wgmma && !any_mma && !x_prepared && x_rows_enabled(n_tokens) &&
                       (n_tokens > kDecodeTokens || every_wgmma_reads_rows);
  if (xp_rows && given == XGiven::rows) {
    // nothing to prepare
  } else if (xp_rows && given == XGiven::row_max) {
    launch_xp_groups(tokens, in, stream, x, xp, xsum, static_cast<int>(layout.xsum_stride), xinv,
                     layout.xmax(scratch, n_tokens), true, true);
  } else if (xp_rows) {
    launch_x_to_f16(n_tokens, in, stream, x, nullptr, xp, xsum,
                    static_cast<int>(layout.xsum_stride), xinv, nullptr, true);
  } else if (any_wgmma && !any_mma && !x_prepared && xp_groups_enabled()) {
    launch_xp_groups(tokens, in, stream, x, xp, xsum, static_cast<int>(layout.xsum_stride), xinv,
                     layout.xmax(scratch, n_tokens), given == XGiven::row_max, false);
  } else if ((any_mma || any_wgmma) && !x_prepared && !x_raw) {  // x converted once for all
    launch_x_to_f16(n_tokens, in, stream, x, any_mma ? xh : nullptr, any_wgmma ? xp : nullptr, xsum,
                    static_cast<int>(layout.xsum_stride), xinv, nullptr);
  }
  bool grouped[kMaxGrouped] = {};
  MatmulArgs x_args;  // the shared x of the grouped launches, in both layouts
  x_args.xh = xh;
  x_args.xp = xp;
  x_args.xsum = xsum;
  x_args.xsum_stride = static_cast<int>(layout.xsum_stride);
  x_args.xinv = xinv;
  x_args.n_in = in;
  x_args.n_tokens = tokens;
  x_args.xp_rows = xp_rows;
  if (x_raw) {
    x_args.x_raw = x;
    x_args.x_parts = layout.part_max(scratch);
    x_args.n_parts = n_parts;
    x_args.x_raw_early = matmul_detail::raw_x_early_enabled();
  }
  if (matmul_detail::tiled_decode_groups_take(n_tokens) && n_outs <= kMaxGrouped) {
    if (n_tokens == 1 && matmul_detail::single_decode_enabled())
      launch_single_groups(outs, n_outs, x_args, grouped, stream);
    if (matmul_detail::grouped_decode_enabled())
      launch_tiled_decode_groups(outs, n_outs, n_in, x_args, grouped, stream);
  }
  // The shared wgmma launches: with a side stream, those after the first run beside it.
  SideFork fork(n_tokens > kDecodeTokens || decode_side_enabled() ? side : nullptr, stream);
  if (any_wgmma && n_tokens <= kDecodeTokens && n_outs <= kMaxGrouped &&
      matmul_detail::wgmma_fold64_enabled())
    launch_fold64_groups(outs, n_outs, n_in, x_args, grouped, fork);
  if (any_wgmma && n_tokens <= kDecodeTokens && n_outs <= kMaxGrouped &&
      matmul_detail::scaled_decode_enabled())
    launch_scaled_decode_groups(outs, n_outs, n_in, x_args, grouped, fork);
  if (any_wgmma && n_tokens > kDecodeTokens && n_outs <= kMaxGrouped &&
      matmul_detail::prefill_groups_enabled())
    launch_prefill_groups(outs, n_outs, n_in, x_args, grouped, fork);
  // The per-output launches below beside each other too (decode_side_small_enabled): then the
  // join waits until they are all issued.
  const bool side_each = fork.has_side() && decode_side_small_enabled() &&
                         n_tokens > matmul_detail::kClusterMinTokens &&
                         n_tokens <= matmul_detail::kClusterMaxTokens;
  if (!side_each) fork.join();
  for (int i = 0; i < n_outs; ++i) {
    const MatmulOut& o = outs[i];
    if (o.n_out == 0 || (i < kMaxGrouped && grouped[i])) continue;
    const int out = static_cast<int>(o.n_out);
    if (exact_path(o.wtype, n_in)) {
      if (o.wtype == DType::f32) launch_exact<DType::f32>(o, in, x, tokens, stream);
      if (o.wtype == DType::f16) launch_exact<DType::f16>(o, in, x, tokens, stream);
      if (o.wtype == DType::bf16) launch_exact<DType::bf16>(o, in, x, tokens, stream);
      continue;
    }
    MatmulArgs args;
    args.w = static_cast<const uint8_t*>(o.w);
    args.row_bytes = n_in / dtype_traits(o.wtype).block_size * dtype_traits(o.wtype).type_size;
    args.n_in = in;
    args.n_out = out;
    args.xh = xh;
    args.xp = uses_wgmma(o, n_in, n_tokens) ? xp : nullptr;
    args.xp_rows = xp_rows && args.xp != nullptr;
    args.xsum = xsum;
    args.xsum_stride = static_cast<int>(layout.xsum_stride);
    args.xinv = xinv;
    args.x_raw = x_args.x_raw;  // (run_mma: only the tiled decode kernel takes it, at one token)
    args.x_parts = x_args.x_parts;
    args.n_parts = x_args.n_parts;
    args.x_raw_early = x_args.x_raw_early;
    args.n_tokens = tokens;
    args.y = o.y;
    args.ldy = o.ldy;
    const cudaStream_t on = side_each ? fork.next() : stream;
    switch (o.wtype) {  // the one place a runtime dtype becomes a template parameter
#define MEMRA_CASE(D)               \
  case D:                           \
    run_mma<D>(args, o.layout, on); \
    break;
      MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_CASE)
#undef MEMRA_CASE
      default:
        fail(ErrorCode::internal, "matmul: dtype {} passed the support check", dtype_name(o.wtype));
    }
  }
  fork.join();
}

}  // namespace

void matmul_shared_x(const MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                     int64_t n_tokens, void* scratch, cudaStream_t stream, bool x_prepared,
                     const SideStream* side) {
  matmul_shared_x_impl(outs, n_outs, n_in, x, n_tokens, scratch, stream,
                       x_prepared ? XGiven::prepared : XGiven::none, side);
}

void matmul_shared_x_handed(Handed handed, const MatmulOut* outs, int n_outs, int64_t n_in,
                            const float* x, int64_t n_tokens, void* scratch, cudaStream_t stream,
                            const SideStream* side, int n_parts) {
  const XGiven given = handed == Handed::rows      ? XGiven::rows
                       : handed == Handed::row_max ? XGiven::row_max
                                                   : XGiven::part_max;
  if (given == XGiven::part_max && n_parts == 0) n_parts = static_cast<int>(part_max_count(n_in));
  matmul_shared_x_impl(outs, n_outs, n_in, x, n_tokens, scratch, stream, given, side, n_parts);
}

namespace matmul_detail {

bool prefill_groups_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_PREFILL_GROUPS", true);
  return enabled;
}

}  // namespace matmul_detail

void matmul(DType wtype, const void* w, int64_t n_in, int64_t n_out, const float* x,
            int64_t n_tokens, float* y, int64_t ldy, void* scratch, cudaStream_t stream,
            WeightLayout layout) {
  const MatmulOut out{wtype, w, n_out, y, ldy, layout};
  matmul_shared_x(&out, 1, n_in, x, n_tokens, scratch, stream);
}

void bf16_count_beyond_f16(const void* w, int64_t n, unsigned long long* count,
                           cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  detail::launch(bf16_beyond_f16_kernel, static_cast<unsigned>(blocks), 256, 0, stream,
                 static_cast<const uint16_t*>(w), n, count);
}

}  // namespace memra::kernels
