// The gated delta rule, recurrent form: each warp owns kCols columns of one (sequence, v head)'s
// state matrix S [k_dim][v_dim] in registers for the whole step and walks the sequence's tokens in
// order. Lane l holds rows l, l + 32, ... (kRows of them), so a column's sums over the k_dim rows
// are a per-lane sum in row order then a 5-step xor tree: the same order for every column, token,
// batch and chunking (it depends on k_dim alone), and every lane ends with the same bits (each
// xor step adds the same two values on both lanes). A column's update needs only that column and
// the token's q, k, decay and beta, so warps never talk to each other: no shared memory, no
// barriers. Each warp computes q's and k's norms itself, with the same code, hence the same bits.
//
// Two kernels share that arithmetic (delta_rule.cuh) and give the same bits; they differ in where
// a token's scalars (q and k norms, decay, beta: none depends on S) are computed:
//  - token (delta_rule_token.cu): every warp computes them per token, on the token's critical
//    path, ahead of its 8 columns' update. Kept for decode steps (one token per sequence: there
//    is nothing to batch, and the grid already has a block per sequence and head).
//  - chunk (here): lane j computes token t0 + j's decay, beta and the double halves of its norms
//    for 32 tokens at once, at the chunk's first token, and each token takes them with a shuffle;
//    the norms' f32 sums of squares are gathered 32 tokens ahead, one token per iteration, off the
//    recurrence's dependency chain. What is left on a token's chain is its columns' update (two
//    reductions per column), so fewer columns per warp (more warps to hide the reductions'
//    latency) pay off: one prefill sequence of Qwen3.5-9B had 128 blocks of 4 warps (one warp per
//    SM scheduler) with 8 columns per warp; with 4 it has 256. Its columns' sums share their xor
//    trees' first steps (scatter_sum: the same additions, fewer shuffles).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string_view>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/ssm/delta_rule.cuh"

namespace memra::kernels {

namespace {

using namespace delta_rule;

constexpr int kChunk = 32;  // tokens per chunk of batched scalars: one per lane

// One token's inputs for this warp: its lanes' rows of q and k, the warp's columns of v, its
// position.
template <int kRows, int kCols>
struct TokenIn {
  float q[kRows], k[kRows], v[kCols];
  int32_t pos;
};

template <int kRows, int kCols>
__device__ __forceinline__ void load_token(TokenIn<kRows, kCols>& in, const float* qkv,
                                           const Offsets& o, int64_t t, int k_dim, int v_dim,
                                           int col0, const int32_t* positions, bool valid) {
  load_qk(in.q, in.k, qkv, o, t, k_dim, valid);
  const float* base = qkv + t * o.row;
#pragma unroll
  for (int c = 0; c < kCols; ++c) in.v[c] = valid && col0 + c < v_dim ? base[o.v + col0 + c] : 0.0f;
  in.pos = valid ? positions[t] : 1;
}

// q's and k's sums of squares of tokens [t0, min(t0 + 32, end)), token t0 + j's kept by lane j:
// the first chunk's, before the token loop (which gathers every later chunk's on the way), kGroup
// tokens' loads in flight at once.
template <int kRows>
__device__ __forceinline__ void gather_chunk(float& ss_q, float& ss_k, const float* qkv,
                                             const Offsets& o, int64_t t0, int64_t end, int k_dim) {
  constexpr int kGroup = kRows <= 4 ? 8 : 4;
  const int lane = threadIdx.x % 32;
  for (int j0 = 0; j0 < kChunk && t0 + j0 < end; j0 += kGroup) {
    float q[kGroup][kRows], k[kGroup][kRows];
#pragma unroll
    for (int u = 0; u < kGroup; ++u)
      load_qk(q[u], k[u], qkv, o, t0 + j0 + u, k_dim, t0 + j0 + u < end);
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const float sq = sum_squares(q[u]), sk = sum_squares(k[u]);
      if (lane == j0 + u) {
        ss_q = sq;
        ss_k = sk;
      }
    }
  }
}

// log2 of the columns per warp.
template <int kCols>
constexpr int kColBits = kCols == 1   ? 0
                         : kCols == 2 ? 1
                         : kCols == 4 ? 2
                                      : 3;

// The sums over the warp of v[c] for the kCols columns at once, by warp_sum's xor tree (offsets
// 16, 8, ..., 1) but halving the columns at each of the first kColBits steps: the lane whose bit
// of that step is 0 keeps the lower half, its partner the upper, each sends the other half and
// adds what it gets. Every addition is one of warp_sum's own (the same two values: IEEE addition
// commutes), so a column's sum has warp_sum's bits, for 2 kCols - 1 + 5 - kColBits shuffles
// instead of 5 kCols: the shuffle unit (one warp-wide shuffle per SM per cycle) is what the
// columns' reductions queue on. Returns column lane >> (5 - kColBits)'s sum.
template <int kCols>
__device__ __forceinline__ float scatter_sum(float (&v)[kCols]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = kCols, offset = 16; n > 1; n /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(kFull, send, offset);
    }
  }
  float sum = v[0];
#pragma unroll
  for (int offset = 16 >> kColBits<kCols>; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(kFull, sum, offset);
  return sum;
}

// update_columns (delta_rule.cuh) with the columns' sums taken by scatter_sum, (decay S)^T k's
// then handed to every lane by a shuffle per column. Returns column lane >> (5 - kColBits)'s
// output.
template <int kRows, int kCols>
__device__ __forceinline__ float update_columns_scattered(float (&S)[kRows][kCols],
                                                          const float (&q)[kRows],
                                                          const float (&k)[kRows],
                                                          const float (&v)[kCols], float decay,
                                                          float beta) {
  constexpr int kShift = 5 - kColBits<kCols>;
  float part[kCols], kv[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) part[c] = decay_dot_k(S, c, k, decay);
  const float mine = scatter_sum(part);
#pragma unroll
  for (int c = 0; c < kCols; ++c) kv[c] = kCols == 1 ? mine : __shfl_sync(kFull, mine, c << kShift);
#pragma unroll
  for (int c = 0; c < kCols; ++c) part[c] = update_dot_q(S, c, q, k, v[c], kv[c], beta);
  return scatter_sum(part);
}

template <int kRows, int kCols>
__global__ void __launch_bounds__(kWarps * 32)
    chunk_kernel(const int32_t* positions, const int32_t* seq_begin, const int32_t* state_slots,
                 float* state, const float* qkv, const float* a, const float* b, const float* A,
                 const float* dt_bias, DeltaRuleShape shape, float* out) {
  detail::wait_for_inputs();
  const int lane = threadIdx.x % 32;
  const int col0 = warp_col0<kCols>();
  const int k_dim = shape.k_dim, v_dim = shape.v_dim, nv = shape.n_v_heads;
  if (col0 >= v_dim) return;  // a whole warp: nothing below needs its lanes
  const WarpSlice w(seq_begin, state_slots, state, shape);
  const int hv = w.hv;
  const int64_t begin = w.begin, end = w.end;
  const Offsets& off = w.off;
  float* Sg = w.Sg;
  float S[kRows][kCols];
  state_io<kRows, kCols, false>(S, Sg, k_dim, v_dim, col0);
  const double q_scale = 1.0 / sqrt(static_cast<double>(k_dim));
  const double A_h = A[hv], dt_h = dt_bias[hv];
  // Lane j: token t0 + j's sums of squares (the chunk being gathered), raw gates (the next chunk
  // to start) and scalars (the current chunk); lanes past the sequence's end hold zeros' results.
  float ss_q = 0.0f, ss_k = 0.0f, q_inv = 0.0f, k_inv = 0.0f, decay = 0.0f, beta = 0.0f;
  gather_chunk<kRows>(ss_q, ss_k, qkv, off, begin, end, k_dim);
  const int64_t ab0 = (begin + lane) * nv + hv;
  float a_lane = begin + lane < end ? a[ab0] : 0.0f, b_lane = begin + lane < end ? b[ab0] : 0.0f;
  TokenIn<kRows, kCols> next;
  load_token(next, qkv, off, begin, k_dim, v_dim, col0, positions, begin < end);
  // q and k of the token 32 ahead, loaded an iteration before their sums (as `next`): their
  // first touch misses L1, and in-order issue would stall on them within the iteration.
  float ahead_q[kRows], ahead_k[kRows];
  load_qk(ahead_q, ahead_k, qkv, off, begin + kChunk, k_dim, begin + kChunk < end);
  for (int64_t t = begin; t < end; ++t) {
    const int j = static_cast<int>(t - begin) & (kChunk - 1);  // this token's lane
    if (j == 0) {  // the chunk's scalars, then the next chunk's gates
      q_inv = inv_norm(ss_q, q_scale);
      k_inv = inv_norm(ss_k, 1.0);
      decay = decay_of(a_lane, A_h, dt_h);
      beta = beta_of(b_lane);
      const int64_t ab = (t + kChunk + lane) * nv + hv;
      a_lane = t + kChunk + lane < end ? a[ab] : 0.0f;
      b_lane = t + kChunk + lane < end ? b[ab] : 0.0f;
    }
    const TokenIn<kRows, kCols> in = next;
    // The next token's loads are issued before this token's arithmetic, which hides their latency.
    // From here to the output the loop body is branch-free (predicated loads, the reset a
    // select): one basic block, so the compiler can interleave the gather's reductions with the
    // columns'.
    load_token(next, qkv, off, t + 1, k_dim, v_dim, col0, positions, t + 1 < end);
    {  // token t + 32's sums of squares, for the next chunk: independent of S, so off its chain
      const float sq = sum_squares(ahead_q), sk = sum_squares(ahead_k);
      if (lane == j) {
        ss_q = sq;
        ss_k = sk;
      }
      load_qk(ahead_q, ahead_k, qkv, off, t + kChunk + 1, k_dim, t + kChunk + 1 < end);
    }
    const bool fresh = in.pos == 0;  // a sequence's first token: its slot's old state is ignored
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c) S[r][c] = fresh ? 0.0f : S[r][c];
    const float qi = __shfl_sync(kFull, q_inv, j), ki = __shfl_sync(kFull, k_inv, j);
    float q[kRows], k[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      q[r] = __fmul_rn(in.q[r], qi);
      k[r] = __fmul_rn(in.k[r], ki);
    }
    const float o = update_columns_scattered(S, q, k, in.v, __shfl_sync(kFull, decay, j),
                                             __shfl_sync(kFull, beta, j));
    // Column c's output is on lanes c << kShift ... (c + 1) << kShift: the first one stores it.
    constexpr int kShift = 5 - kColBits<kCols>;
    const int c = lane >> kShift;
    if ((lane & ((1 << kShift) - 1)) == 0 && col0 + c < v_dim)
      out[t * nv * int64_t{v_dim} + int64_t{hv} * v_dim + col0 + c] = o;
  }
  state_io<kRows, kCols, true>(S, Sg, k_dim, v_dim, col0);
}

template <int kRows, int kCols>
void launch_chunk(const StepDev& step, float* state, const float* qkv, const float* a,
                  const float* b, const float* A, const float* dt_bias, const DeltaRuleShape& shape,
                  float* out, cudaStream_t stream) {
  const int cols_per_block = kWarps * kCols;
  const dim3 grid((shape.v_dim + cols_per_block - 1) / cols_per_block, shape.n_v_heads,
                  step.n_seqs);
  detail::launch(chunk_kernel<kRows, kCols>, grid, kWarps * 32, 0, stream, step.positions,
                 step.seq_begin, step.state_slots, state, qkv, a, b, A, dt_bias, shape, out);
}

template <int kCols>
void launch_cols(int rows, const StepDev& step, float* state, const float* qkv, const float* a,
                 const float* b, const float* A, const float* dt_bias, const DeltaRuleShape& shape,
                 float* out, cudaStream_t stream) {
  if (rows <= 1)
    launch_chunk<1, kCols>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 2)
    launch_chunk<2, kCols>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 4)
    launch_chunk<4, kCols>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else
    launch_chunk<8, kCols>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
}

// MEMRA_DELTA_RULE (token, chunk1, chunk2, chunk4, chunk8), read once: an A/B switch.
DeltaRuleKernel kernel_from_env() {
  static const DeltaRuleKernel kernel = [] {
    constexpr const char* kName = "MEMRA_DELTA_RULE";
    const char* v = std::getenv(kName);
    if (v == nullptr) return DeltaRuleKernel::auto_;
    const std::string_view text(v);
    if (text == "token") return DeltaRuleKernel::token;
    if (text == "chunk1") return DeltaRuleKernel::chunk1;
    if (text == "chunk2") return DeltaRuleKernel::chunk2;
    if (text == "chunk4") return DeltaRuleKernel::chunk4;
    if (text == "chunk8") return DeltaRuleKernel::chunk8;
    fail(ErrorCode::invalid_argument, "{}={}: token, chunk1, chunk2, chunk4 or chunk8", kName, v);
  }();
  return kernel;
}

}  // namespace

bool gated_delta_rule_supports(int k_dim) {
  return k_dim >= 1 && k_dim <= 256;
}

void gated_delta_rule(const StepDev& step, float* ssm_state, const float* qkv, const float* a,
                      const float* b, const float* A, const float* dt_bias,
                      const DeltaRuleShape& shape, float* out, cudaStream_t stream,
                      DeltaRuleKernel kernel) {
  if (!gated_delta_rule_supports(shape.k_dim))
    fail(ErrorCode::unsupported, "gated_delta_rule: no kernel for key heads of {} (1 to 256)",
         shape.k_dim);
  if (shape.v_dim < 1 || shape.n_k_heads < 1 || shape.n_v_heads < 1 ||
      shape.n_v_heads % shape.n_k_heads != 0 || shape.n_v_heads > 65535)
    fail(ErrorCode::invalid_argument, "gated_delta_rule: {} v heads of {}, {} k heads",
         shape.n_v_heads, shape.v_dim, shape.n_k_heads);
  if (step.n_tokens == 0) return;
  if (step.n_seqs <= 0 || step.n_seqs > 65535 || !step.seq_begin || !step.state_slots)
    fail(ErrorCode::invalid_argument, "gated_delta_rule: a step of {} sequences", step.n_seqs);
  if (kernel == DeltaRuleKernel::auto_) kernel = kernel_from_env();
  // Under 2 tokens per sequence on average (decode): the token kernel, whose grid already has a
  // block per sequence and head and which has no chunk to batch. Otherwise 4 columns per warp:
  // twice the warps of 8 to hide the columns' reductions, while each warp's gather of the sums of
  // squares (two reductions per token, as much as a column's) stays a fifth of its work.
  if (kernel == DeltaRuleKernel::auto_)
    kernel =
        step.n_tokens < 2 * int64_t{step.n_seqs} ? DeltaRuleKernel::token : DeltaRuleKernel::chunk4;
  // kRows = rows per lane: the smallest of 1, 2, 4, 8 that covers k_dim (Qwen3.5: 128 -> 4).
  const int rows = (shape.k_dim + 31) / 32;
  switch (kernel) {
    case DeltaRuleKernel::chunk1:
      return launch_cols<1>(rows, step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
    case DeltaRuleKernel::chunk2:
      return launch_cols<2>(rows, step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
    case DeltaRuleKernel::chunk4:
      return launch_cols<4>(rows, step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
    case DeltaRuleKernel::chunk8:
      return launch_cols<8>(rows, step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
    default:
      return launch_token(rows, step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
  }
}

}  // namespace memra::kernels
