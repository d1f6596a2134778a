// The mixture-of-experts ops around the expert matmuls (ops.h): the softmax top-k router, the
// weighted sum of a token's expert outputs, and the shared expert's sigmoid gate. Each computes
// what the CPU reference does (backend/cpu/moe_cpu.cpp) in the same precision: the router in
// double, every product and sum of the combine rounded alone (no FMA contraction). The router's
// sum of exponentials runs as a fixed tree over the lanes (the CPU adds in expert order), so its
// last bits may differ from the CPU's; the ranking, ties and the k's sum are the CPU's.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

constexpr int kRouteWarps = 4;  // one token per warp

// Lane l holds experts l, l + 32, ... (kPerLane of them: n_expert <= 32 kPerLane): probabilities
// in double (NaN ranked as -1, as the CPU). The k winners are taken one at a time (largest
// probability, then lower index), their sum kept in that order by every lane, then written in
// increasing expert index with ballots. kPerLane is the smallest instance that holds n_expert, so
// a 128-expert router does a quarter of the 512-expert instance's work on one token's serial
// chain; the slots past n_expert add +0 to the sum and rank below all, so every instance gives
// the same bits.
template <int kPerLane>
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_kernel(const float* __restrict__ logits, int64_t n_tokens, int n_expert, int k,
                     bool normalize, const float* __restrict__ scale, int32_t* __restrict__ ids,
                     float* __restrict__ weights) {
  detail::wait_for_inputs();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + threadIdx.x / 32;
  if (t >= n_tokens) return;  // a whole warp
  const int lane = threadIdx.x % 32;
  const float* l = logits + t * n_expert;
  double p[kPerLane];
  // The largest logit (a NaN one is skipped here but makes the sum, so every probability, NaN:
  // the CPU's outcome too).
  float max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = 32 * i + lane;
    if (e < n_expert) max = fmaxf(max, l[e]);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, off));
  const double m = max;
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = 32 * i + lane;
    p[i] = e < n_expert ? exp(double{l[e]} - m) : 0.0;
    sum += p[i];
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const double q = p[i] / sum;
    p[i] = 32 * i + lane < n_expert ? (q != q ? -1.0 : q) : -2.0;  // padding ranks below all
  }
  static_assert(kPerLane <= 32, "chosen is one bit a slot");
  unsigned chosen = 0;  // bit i: this lane's expert 32 i + lane won (a register, not local memory)
  double top_sum = 0.0;
  for (int j = 0; j < k; ++j) {
    double best = -3.0;
    int best_e = 1 << 30;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (!(chosen >> i & 1u) && p[i] > best) {  // i ascending: the lower expert wins a tie
        best = p[i];
        best_e = 32 * i + lane;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const double ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    top_sum += best;  // the same value in every lane, in the CPU's (rank) order
    if (best_e % 32 == lane) chosen |= 1u << (best_e / 32);
  }
  int written = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const bool mine = chosen >> i & 1u;
    const unsigned won = __ballot_sync(0xffffffffu, mine);
    if (mine) {
      const int e = 32 * i + lane;
      const int j = written + __popc(won & ((1u << lane) - 1u));
      const double w = normalize ? p[i] / top_sum : p[i];
      ids[t * k + j] = e;
      weights[t * k + j] = static_cast<float>(scale ? w * double{scale[e]} : w);
    }
    written += __popc(won);
  }
}

// out[t][i] = w0 y0[i] + w1 y1[i] + ... in j order, each product and sum rounded alone.
__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ weights,
                                   int64_t n_tokens, int k, int64_t dim, float* __restrict__ out) {
  detail::wait_for_inputs();
  for (int64_t i = detail::global_thread(); i < n_tokens * dim; i += detail::grid_threads()) {
    const int64_t t = i / dim, c = i % dim;
    const float* w = weights + t * k;
    const float* yt = y + t * k * dim + c;
    float acc = __fmul_rn(w[0], yt[0]);
    for (int j = 1; j < k; ++j) acc = __fadd_rn(acc, __fmul_rn(w[j], yt[j * dim]));
    out[i] = acc;
  }
}

__global__ void sigmoid_scale_rows_kernel(float* y, const float* __restrict__ g, int64_t n_rows,
                                          int64_t dim) {
  detail::wait_for_inputs();
  for (int64_t i = detail::global_thread(); i < n_rows * dim; i += detail::grid_threads()) {
    const auto s = static_cast<float>(1.0 / (1.0 + exp(-double{g[i / dim]})));
    y[i] = __fmul_rn(y[i], s);
  }
}

}  // namespace

void moe_route(const float* logits, int64_t n_tokens, int n_expert, int k, bool normalize,
               const float* scale, int32_t* ids, float* weights, cudaStream_t stream) {
  detail::require_non_negative("moe_route", n_tokens, "token count");
  if (n_expert < 1 || n_expert > kMoeMaxExperts || k < 1 || k > n_expert)
    fail(ErrorCode::unsupported, "moe_route: {} experts per token of {} (CUDA routes up to {})", k,
         n_expert, kMoeMaxExperts);
  if (n_tokens == 0) return;
  const auto blocks = static_cast<unsigned>((n_tokens + kRouteWarps - 1) / kRouteWarps);
  static_assert(kMoeMaxExperts == 16 * 32, "the widest instance holds kMoeMaxExperts");
  auto kernel = n_expert <= 4 * 32   ? moe_route_kernel<4>
                : n_expert <= 8 * 32 ? moe_route_kernel<8>
                                     : moe_route_kernel<16>;
  detail::launch(kernel, blocks, kRouteWarps * 32, 0, stream, logits, n_tokens, n_expert, k,
                 normalize, scale, ids, weights);
}

void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                 float* out, cudaStream_t stream) {
  detail::require_non_negative("moe_combine", n_tokens, "token count");
  detail::require_non_negative("moe_combine", dim, "row length");
  if (k < 1) fail(ErrorCode::invalid_argument, "moe_combine: {} experts per token", k);
  if (n_tokens == 0 || dim == 0) return;
  detail::launch(moe_combine_kernel, detail::grid_for(n_tokens * dim), detail::kThreads, 0, stream,
                 y, weights, n_tokens, k, dim, out);
}

void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim,
                        cudaStream_t stream) {
  detail::require_non_negative("sigmoid_scale_rows", n_rows, "row count");
  detail::require_non_negative("sigmoid_scale_rows", dim, "row length");
  if (n_rows == 0 || dim == 0) return;
  detail::launch(sigmoid_scale_rows_kernel, detail::grid_for(n_rows * dim), detail::kThreads, 0,
                 stream, y, g, n_rows, dim);
}

}  // namespace memra::kernels
