// The gated delta rule's per-token kernel: the only one until the chunk kernel (delta_rule.cu)
// took prefill; decode steps (one token per sequence, nothing to batch) still run it, and it is
// the A/B baseline (MEMRA_DELTA_RULE=token) and kernel-check's bit-for-bit reference for the
// chunk kernel. Each warp owns 8 columns and, per token, computes the
// token's q and k norms, decay and beta itself before its columns' update: those double-precision
// chains and two reductions sit on every token's critical path, with one warp per scheduler
// (Qwen3.5-9B, one sequence: 128 blocks of 4 warps) to hide them.
#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "kernels/ssm/delta_rule.cuh"

namespace memra::kernels::delta_rule {

namespace {

constexpr int kCols = 8;

template <int kRows>
struct TokenIn {
  float q[kRows], k[kRows], v[kCols];
  float a, b;
  int32_t pos;
};

template <int kRows>
__device__ __forceinline__ void load_token(TokenIn<kRows>& in, const float* qkv, const Offsets& o,
                                           int64_t t, int k_dim, int v_dim, int col0,
                                           const float* a, const float* b, int64_t ab,
                                           const int32_t* positions) {
  load_qk(in.q, in.k, qkv, o, t, k_dim);
  const float* base = qkv + t * o.row;
#pragma unroll
  for (int c = 0; c < kCols; ++c) in.v[c] = col0 + c < v_dim ? base[o.v + col0 + c] : 0.0f;
  in.a = a[ab];
  in.b = b[ab];
  in.pos = positions[t];
}

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    token_kernel(const int32_t* positions, const int32_t* seq_begin, const int32_t* state_slots,
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
  TokenIn<kRows> next;
  if (begin < end)
    load_token(next, qkv, off, begin, k_dim, v_dim, col0, a, b, begin * nv + hv, positions);
  for (int64_t t = begin; t < end; ++t) {
    const TokenIn<kRows> in = next;
    if (t + 1 < end)
      load_token(next, qkv, off, t + 1, k_dim, v_dim, col0, a, b, (t + 1) * nv + hv, positions);
    if (in.pos == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < kCols; ++c) S[r][c] = 0.0f;
    }
    const float q_inv = inv_norm(sum_squares(in.q), q_scale);
    const float k_inv = inv_norm(sum_squares(in.k), 1.0);
    float q[kRows], k[kRows], o[kCols];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      q[r] = __fmul_rn(in.q[r], q_inv);
      k[r] = __fmul_rn(in.k[r], k_inv);
    }
    update_columns(S, q, k, in.v, decay_of(in.a, A_h, dt_h), beta_of(in.b), o);
    float* ot = out + t * nv * int64_t{v_dim} + int64_t{hv} * v_dim;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (lane == c && col0 + c < v_dim) ot[col0 + c] = o[c];
  }
  state_io<kRows, kCols, true>(S, Sg, k_dim, v_dim, col0);
}

template <int kRows>
void launch(const StepDev& step, float* state, const float* qkv, const float* a, const float* b,
            const float* A, const float* dt_bias, const DeltaRuleShape& shape, float* out,
            cudaStream_t stream) {
  const int cols_per_block = kWarps * kCols;
  const dim3 grid((shape.v_dim + cols_per_block - 1) / cols_per_block, shape.n_v_heads,
                  step.n_seqs);
  detail::launch(token_kernel<kRows>, grid, kWarps * 32, 0, stream, step.positions, step.seq_begin,
                 step.state_slots, state, qkv, a, b, A, dt_bias, shape, out);
}

}  // namespace

void launch_token(int rows, const StepDev& step, float* state, const float* qkv, const float* a,
                  const float* b, const float* A, const float* dt_bias, const DeltaRuleShape& shape,
                  float* out, cudaStream_t stream) {
  if (rows <= 1)
    launch<1>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 2)
    launch<2>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else if (rows <= 4)
    launch<4>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
  else
    launch<8>(step, state, qkv, a, b, A, dt_bias, shape, out, stream);
}

}  // namespace memra::kernels::delta_rule
