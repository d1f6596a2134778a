// The gated delta rule, recurrent form: each warp owns kCols columns of one (sequence, v head)'s
// state matrix S [k_dim][v_dim] in registers for the whole step and walks the sequence's tokens in
// order. Lane l holds rows l, l + 32, ... (kRows of them), so a column's sums over the k_dim rows
// are a per-lane sum in row order then a 5-step xor tree: the same order for every column, token,
// batch and chunking (it depends on k_dim alone), and every lane ends with the same bits (each
// xor step adds the same two values on both lanes). A column's update needs only that column and
// the token's q, k, decay and beta, so warps never talk to each other: no shared memory, no
// barriers. Each warp recomputes q's and k's norms itself, with the same code, hence the same bits.
#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

constexpr int kWarps = 4;  // warps per block, each on its own columns
constexpr int kCols = 8;   // state columns per warp
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFull, v, offset);
  return v;
}

// One token's inputs for this warp: its position, its lanes' rows of q and k, the warp's columns of
// v, and the raw gate projections.
template <int kRows>
struct TokenIn {
  float q[kRows], k[kRows], v[kCols];
  float a, b;
  int32_t pos;
};

template <int kRows>
__device__ __forceinline__ void load_token(TokenIn<kRows>& in, const float* qkv, int64_t row,
                                           int64_t t, int64_t q_off, int64_t k_off, int64_t v_off,
                                           int k_dim, int v_dim, int col0, const float* a,
                                           const float* b, int64_t ab, const int32_t* positions) {
  const int lane = threadIdx.x % 32;
  const float* base = qkv + t * row;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = r * 32 + lane;
    in.q[r] = i < k_dim ? base[q_off + i] : 0.0f;
    in.k[r] = i < k_dim ? base[k_off + i] : 0.0f;
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) in.v[c] = col0 + c < v_dim ? base[v_off + col0 + c] : 0.0f;
  in.a = a[ab];
  in.b = b[ab];
  in.pos = positions[t];
}

// scale / l2 norm of the warp's kRows x 32 values (zeros past k_dim), from their f32 sum of
// squares in double as the CPU reference computes it: scale / sqrt(sum + 1e-6).
template <int kRows>
__device__ __forceinline__ float l2_inv(const float (&x)[kRows], double scale) {
  float ss = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) ss = __fmaf_rn(x[r], x[r], ss);
  ss = warp_sum(ss);
  return static_cast<float>(scale / sqrt(static_cast<double>(ss) + 1e-6));
}

// This lane's entries of the warp's columns of S (rows past k_dim, columns past v_dim read as 0
// and are never written): loads them, or with kStore stores them.
template <int kRows, bool kStore>
__device__ __forceinline__ void state_io(float (&S)[kRows][kCols], float* Sg, int k_dim, int v_dim,
                                         int col0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int i = r * 32 + lane, j = col0 + c;
      const bool inside = i < k_dim && j < v_dim;
      if constexpr (kStore) {
        if (inside) Sg[int64_t{i} * v_dim + j] = S[r][c];
      } else {
        S[r][c] = inside ? Sg[int64_t{i} * v_dim + j] : 0.0f;
      }
    }
}

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gated_delta_rule_kernel(const int32_t* positions, const int32_t* seq_begin,
                            const int32_t* state_slots, float* state, const float* qkv,
                            const float* a, const float* b, const float* A, const float* dt_bias,
                            DeltaRuleShape shape, float* out) {
  detail::wait_for_inputs();
  const int lane = threadIdx.x % 32;
  const int col0 = (blockIdx.x * kWarps + threadIdx.x / 32) * kCols;
  const int k_dim = shape.k_dim, v_dim = shape.v_dim, nk = shape.n_k_heads, nv = shape.n_v_heads;
  if (col0 >= v_dim) return;  // a whole warp: nothing below needs its lanes
  const int hv = blockIdx.y, hk = hv % nk;
  const int64_t s = blockIdx.z;
  const int64_t begin = seq_begin[s], end = seq_begin[s + 1];
  const int64_t row = 2 * int64_t{nk} * k_dim + int64_t{nv} * v_dim;
  const int64_t q_off = int64_t{hk} * k_dim, k_off = int64_t{nk} * k_dim + q_off;
  const int64_t v_off = 2 * int64_t{nk} * k_dim + int64_t{hv} * v_dim;
  float* Sg = state + (static_cast<int64_t>(state_slots[s]) * nv + hv) * k_dim * v_dim;
  float S[kRows][kCols];
  state_io<kRows, false>(S, Sg, k_dim, v_dim, col0);
  const double q_scale = 1.0 / sqrt(static_cast<double>(k_dim));
  const double A_h = A[hv], dt_h = dt_bias[hv];
  TokenIn<kRows> next;
  if (begin < end)
    load_token(next, qkv, row, begin, q_off, k_off, v_off, k_dim, v_dim, col0, a, b,
               begin * nv + hv, positions);
  for (int64_t t = begin; t < end; ++t) {
    const TokenIn<kRows> in = next;
    // The next token's loads are issued before this token's arithmetic, which hides their latency.
    if (t + 1 < end)
      load_token(next, qkv, row, t + 1, q_off, k_off, v_off, k_dim, v_dim, col0, a, b,
                 (t + 1) * nv + hv, positions);
    if (in.pos == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < kCols; ++c) S[r][c] = 0.0f;
    }
    const float q_inv = l2_inv(in.q, q_scale), k_inv = l2_inv(in.k, 1.0);
    float q[kRows], k[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      q[r] = __fmul_rn(in.q[r], q_inv);
      k[r] = __fmul_rn(in.k[r], k_inv);
    }
    // decay = exp(A softplus(a + dt_bias)) (torch's softplus threshold 20), beta = sigmoid(b).
    const double x = static_cast<double>(in.a) + dt_h;
    const float decay = static_cast<float>(exp(A_h * (x > 20.0 ? x : log1p(exp(x)))));
    const float beta = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(in.b))));
    float o[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float kv = 0.0f;  // (decay S)^T k for this column
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r][c] = __fmul_rn(S[r][c], decay);
        kv = __fmaf_rn(S[r][c], k[r], kv);
      }
      const float delta = __fmul_rn(__fsub_rn(in.v[c], warp_sum(kv)), beta);
      float acc = 0.0f;  // S^T q after S += k delta^T
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r][c] = __fmaf_rn(k[r], delta, S[r][c]);
        acc = __fmaf_rn(S[r][c], q[r], acc);
      }
      o[c] = warp_sum(acc);
    }
    float* ot = out + t * nv * int64_t{v_dim} + int64_t{hv} * v_dim;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (lane == c && col0 + c < v_dim) ot[col0 + c] = o[c];
  }
  state_io<kRows, true>(S, Sg, k_dim, v_dim, col0);
}

template <int kRows>
void launch_rows(const StepDev& step, float* state, const float* qkv, const float* a,
                 const float* b, const float* A, const float* dt_bias, const DeltaRuleShape& shape,
                 float* out, cudaStream_t stream) {
  const int cols_per_block = kWarps * kCols;
  const dim3 grid((shape.v_dim + cols_per_block - 1) / cols_per_block, shape.n_v_heads,
                  step.n_seqs);
  detail::launch(gated_delta_rule_kernel<kRows>, grid, kWarps * 32, 0, stream, step.positions,
                 step.seq_begin, step.state_slots, state, qkv, a, b, A, dt_bias, shape, out);
}

}  // namespace

bool gated_delta_rule_supports(int k_dim) {
  return k_dim >= 1 && k_dim <= 256;
}

void gated_delta_rule(const StepDev& step, float* ssm_state, const float* qkv, const float* a,
                      const float* b, const float* A, const float* dt_bias,
                      const DeltaRuleShape& shape, float* out, cudaStream_t stream) {
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
  // kRows = rows per lane: the smallest of 1, 2, 4, 8 that covers k_dim (Qwen3.5: 128 -> 4).
  const int rows = (shape.k_dim + 31) / 32;
  if (rows <= 1)
    launch_rows<1>(step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 2)
    launch_rows<2>(step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 4)
    launch_rows<4>(step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
  else
    launch_rows<8>(step, ssm_state, qkv, a, b, A, dt_bias, shape, out, stream);
}

}  // namespace memra::kernels
