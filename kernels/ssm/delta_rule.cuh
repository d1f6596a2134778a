// Private to kernels/ssm: the pieces of the gated delta rule's arithmetic that both of its kernels
// (delta_rule.cu, the chunk kernel for prefill, and the per-token kernel before it,
// delta_rule_token.cu, which decode steps still use) share. A state column's update and a token's
// scalars are written once, here, so the two kernels' bits cannot drift apart: they only schedule
// the same operations differently (see the comment at the top of delta_rule.cu for why the order is
// batch- and chunking-invariant).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernels.h"

namespace memra::kernels::delta_rule {

constexpr int kWarps = 4;  // warps per block, each on its own columns
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFull, v, offset);
  return v;
}

// Where a step's rows keep one (sequence's token, v head)'s inputs: qkv rows of `row` floats (q
// heads, k heads, v heads), the v head's k head.
struct Offsets {
  int64_t row, q, k, v;
  __device__ Offsets(const DeltaRuleShape& s, int hv)
      : row(2 * int64_t{s.n_k_heads} * s.k_dim + int64_t{s.n_v_heads} * s.v_dim),
        q(int64_t{hv % s.n_k_heads} * s.k_dim),
        k(int64_t{s.n_k_heads} * s.k_dim + q),
        v(2 * int64_t{s.n_k_heads} * s.k_dim + int64_t{hv} * s.v_dim) {}
};

// What a warp of either kernel owns (the grid: column groups x v heads x sequences): its first
// state column (warp_col0; the caller returns when it is past v_dim), then its v head, its
// sequence's tokens [begin, end), where their inputs sit, and its state matrix.
template <int kCols>
__device__ __forceinline__ int warp_col0() {
  return (blockIdx.x * kWarps + threadIdx.x / 32) * kCols;
}
struct WarpSlice {
  int hv;
  int64_t begin, end;
  Offsets off;
  float* Sg;
  __device__ WarpSlice(const int32_t* seq_begin, const int32_t* state_slots, float* state,
                       const DeltaRuleShape& shape)
      : hv(blockIdx.y),
        begin(seq_begin[blockIdx.z]),
        end(seq_begin[blockIdx.z + 1]),
        off(shape, hv),
        Sg(state + (static_cast<int64_t>(state_slots[blockIdx.z]) * shape.n_v_heads + hv) *
                       shape.k_dim * shape.v_dim) {}
};

// This lane's rows of one token's q and k (zeros past k_dim, and all zeros unless `valid`).
template <int kRows>
__device__ __forceinline__ void load_qk(float (&q)[kRows], float (&k)[kRows], const float* qkv,
                                        const Offsets& o, int64_t t, int k_dim, bool valid = true) {
  const int lane = threadIdx.x % 32;
  const float* base = qkv + t * o.row;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = r * 32 + lane;
    q[r] = valid && i < k_dim ? base[o.q + i] : 0.0f;
    k[r] = valid && i < k_dim ? base[o.k + i] : 0.0f;
  }
}

// The f32 sum of squares of the warp's kRows x 32 values: each lane's rows in order, then the xor
// tree (every lane ends with the same bits).
template <int kRows>
__device__ __forceinline__ float sum_squares(const float (&x)[kRows]) {
  float ss = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) ss = __fmaf_rn(x[r], x[r], ss);
  return warp_sum(ss);
}

// scale / l2 norm from the sum of squares, in double as the CPU reference computes it.
__device__ __forceinline__ float inv_norm(float ss, double scale) {
  return static_cast<float>(scale / sqrt(static_cast<double>(ss) + 1e-6));
}

// decay = exp(A softplus(a + dt_bias)) (torch's softplus threshold 20), in double.
__device__ __forceinline__ float decay_of(float a, double A_h, double dt_h) {
  const double x = static_cast<double>(a) + dt_h;
  return static_cast<float>(exp(A_h * (x > 20.0 ? x : log1p(exp(x)))));
}

// beta = sigmoid(b), in double.
__device__ __forceinline__ float beta_of(float b) {
  return static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(b))));
}

// A token's update of column c of the warp's S (this lane's kRows rows of it) is two halves, each
// ending in a sum over the warp: scale the column by decay and take this lane's part of
// (decay S)^T k; then, given that sum kv, delta = (v - kv) beta, S += k delta, and this lane's
// part of S^T q (the output).
template <int kRows, int kCols>
__device__ __forceinline__ float decay_dot_k(float (&S)[kRows][kCols], int c,
                                             const float (&k)[kRows], float decay) {
  float kv = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    S[r][c] = __fmul_rn(S[r][c], decay);
    kv = __fmaf_rn(S[r][c], k[r], kv);
  }
  return kv;
}

template <int kRows, int kCols>
__device__ __forceinline__ float update_dot_q(float (&S)[kRows][kCols], int c,
                                              const float (&q)[kRows], const float (&k)[kRows],
                                              float v, float kv, float beta) {
  const float delta = __fmul_rn(__fsub_rn(v, kv), beta);
  float acc = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    S[r][c] = __fmaf_rn(k[r], delta, S[r][c]);
    acc = __fmaf_rn(S[r][c], q[r], acc);
  }
  return acc;
}

// One token's update of the warp's kCols columns of S, q and k already normalized; o[c]: column
// c's output (every lane holds it). Columns are independent: a column's bits do not depend on
// kCols.
template <int kRows, int kCols>
__device__ __forceinline__ void update_columns(float (&S)[kRows][kCols], const float (&q)[kRows],
                                               const float (&k)[kRows], const float (&v)[kCols],
                                               float decay, float beta, float (&o)[kCols]) {
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const float kv = warp_sum(decay_dot_k(S, c, k, decay));
    o[c] = warp_sum(update_dot_q(S, c, q, k, v[c], kv, beta));
  }
}

// This lane's entries of the warp's columns of S (rows past k_dim, columns past v_dim read as 0
// and are never written): loads them, or with kStore stores them. A lane's kCols columns of a row
// are contiguous, so where the warp's columns are all inside v_dim they move as float4 / float2:
// each warp-wide access touches 32 rows (32 lines), and one decode step reads and writes the
// whole state once, so the access count is what it costs (the scalar form measured 519 us a
// layer for 64 sequences of Qwen3.5-9B, ~8x its bytes at copy bandwidth).
template <int kRows, int kCols, bool kStore>
__device__ __forceinline__ void state_io(float (&S)[kRows][kCols], float* Sg, int k_dim, int v_dim,
                                         int col0) {
  const int lane = threadIdx.x % 32;
  constexpr int kVec = kCols % 4 == 0 ? 4 : kCols % 2 == 0 ? 2 : 1;
  const bool aligned = reinterpret_cast<uintptr_t>(Sg) % (sizeof(float) * kVec) == 0;
  if (kVec > 1 && aligned && v_dim % kVec == 0 && col0 + kCols <= v_dim) {  // aligned rows too
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = r * 32 + lane;
      float* row = Sg + int64_t{i} * v_dim + col0;
#pragma unroll
      for (int c = 0; c < kCols; c += kVec) {
        if constexpr (kVec == 4) {
          if constexpr (kStore) {
            if (i < k_dim)
              *reinterpret_cast<float4*>(row + c) =
                  make_float4(S[r][c], S[r][c + 1], S[r][c + 2], S[r][c + 3]);
          } else {
            const float4 v = i < k_dim ? *reinterpret_cast<const float4*>(row + c)
                                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            S[r][c] = v.x;
            S[r][c + 1] = v.y;
            S[r][c + 2] = v.z;
            S[r][c + 3] = v.w;
          }
        } else if constexpr (kVec == 2) {
          if constexpr (kStore) {
            if (i < k_dim) *reinterpret_cast<float2*>(row + c) = make_float2(S[r][c], S[r][c + 1]);
          } else {
            const float2 v =
                i < k_dim ? *reinterpret_cast<const float2*>(row + c) : make_float2(0.0f, 0.0f);
            S[r][c] = v.x;
            S[r][c + 1] = v.y;
          }
        }
      }
    }
    return;
  }
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

// The per-token kernel (delta_rule_token.cu), the one decode steps run:
// 8 columns per warp, each warp computing every token's norms, decay and beta itself.
void launch_token(int rows, const StepDev& step, float* state, const float* qkv, const float* a,
                  const float* b, const float* A, const float* dt_bias, const DeltaRuleShape& shape,
                  float* out, cudaStream_t stream);

}  // namespace memra::kernels::delta_rule
