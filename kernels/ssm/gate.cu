// The gated outputs of Qwen3.5's layers: the delta-net's gated RMS norm (rows of one value head,
// 128 wide there, so one warp per row) and the full-attention output gate y *= sigmoid(gate).
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kThreads;

constexpr int kRowsPerBlock = 8;  // one warp per row

// Lane l adds the squares of elements l, l + 32, ... in that order, then a xor tree (every lane
// gets the same bits): the order depends on dim alone. Each lane rereads and writes only its own
// elements, so y may alias x.
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    rms_norm_gated_kernel(const float* x, const float* w, const float* z, int64_t n_rows,
                          int64_t dim, float eps, float* y) {
  detail::wait_for_inputs();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= n_rows) return;  // a whole warp
  const int lane = threadIdx.x % 32;
  const float* xr = x + r * dim;
  const float* zr = z + r * dim;
  float* yr = y + r * dim;
  float ss = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) ss = __fmaf_rn(xr[i], xr[i], ss);
  for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
  // As rms_norm: sum / dim, + eps, sqrt, reciprocal, each IEEE-rounded.
  const float inv =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps)));
  for (int64_t i = lane; i < dim; i += 32) {
    const float g = zr[i] / (1.0f + expf(-zr[i]));  // silu(z)
    yr[i] = __fmul_rn(__fmul_rn(__fmul_rn(xr[i], inv), w[i]), g);
  }
}

__global__ void sigmoid_mul_kernel(float* y, const float* gate, int64_t n) {
  detail::wait_for_inputs();
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    y[i] = y[i] / (1.0f + expf(-gate[i]));
}

}  // namespace

void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                    float eps, float* y, cudaStream_t stream) {
  detail::require_non_negative("rms_norm_gated", n_rows, "row count");
  if (dim <= 0) fail(ErrorCode::invalid_argument, "rms_norm_gated: dim {} is not positive", dim);
  const int64_t blocks = (n_rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7fffffff)
    fail(ErrorCode::invalid_argument, "rms_norm_gated: {} rows exceed one launch", n_rows);
  if (n_rows == 0) return;
  detail::launch(rms_norm_gated_kernel, static_cast<unsigned>(blocks), kRowsPerBlock * 32, 0,
                 stream, x, w, z, n_rows, dim, eps, y);
}

void sigmoid_mul(float* y, const float* gate, int64_t n, cudaStream_t stream) {
  detail::require_non_negative("sigmoid_mul", n, "size");
  if (n == 0) return;
  detail::launch(sigmoid_mul_kernel, grid_for(n), kThreads, 0, stream, y, gate, n);
}

}  // namespace memra::kernels
