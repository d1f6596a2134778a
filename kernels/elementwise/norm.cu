// RMS norm and the fused residual-add + RMS norm: one block of a fixed 256 threads per row
// (norm_row.cuh), so a row's result is the same in any batch.
#include "kernels/common.cuh"
#include "kernels/elementwise/norm_row.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

using detail::kNormThreads;
using detail::kNormWarps;

__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(float* x, const float* d, const float* w, int64_t dim, float eps, float* y) {
  detail::wait_for_inputs();
  __shared__ float warp_sums[kNormWarps];
  (void)detail::norm_row(x, d, w, dim, eps, y, blockIdx.x, warp_sums);
}

void check_norm_args(const char* kernel, int64_t n_rows, int64_t dim) {
  detail::require_non_negative(kernel, n_rows, "row count");
  if (dim <= 0) fail(ErrorCode::invalid_argument, "{}: dim {} is not positive", kernel, dim);
  if (n_rows > 0x7fffffff)
    fail(ErrorCode::invalid_argument, "{}: {} rows exceed one launch", kernel, n_rows);
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps, float* y,
              cudaStream_t stream) {
  check_norm_args("rms_norm", n_rows, dim);
  if (n_rows == 0) return;
  // x is only read when d is null; the kernel takes float* to share the fused variant's code.
  detail::launch(rms_norm_kernel, static_cast<unsigned>(n_rows), kNormThreads, 0, stream,
                 const_cast<float*>(x), nullptr, w, dim, eps, y);
}

void add_rms_norm(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim, float eps,
                  float* y, cudaStream_t stream) {
  check_norm_args("add_rms_norm", n_rows, dim);
  if (n_rows == 0) return;
  if (d == nullptr) fail(ErrorCode::invalid_argument, "add_rms_norm: residual d is null");
  detail::launch(rms_norm_kernel, static_cast<unsigned>(n_rows), kNormThreads, 0, stream, x, d, w,
                 dim, eps, y);
}

}  // namespace memra::kernels
