// argmax_rows: the greedy token of each logit row on the device, so a plain greedy step copies 4
// bytes per row to the host instead of the row. One block per row; the winner is the largest
// value with the smallest index among equals (a total order on (value, index) pairs), so the
// result does not depend on how threads split the row, and equals the CPU sampler's
// std::max_element (first maximum; NaN never wins unless it is the row's first value).
#include <climits>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

constexpr int kArgmaxThreads = 1024;
constexpr int kNone = INT_MAX;  // no non-NaN value seen yet

// (v, i) beats (bv, bi): a value beats nothing; then larger value, then smaller index.
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
  if (i == kNone) return false;
  if (bi == kNone) return true;
  return v > bv || (v == bv && i < bi);
}

__global__ void argmax_rows_kernel(const float* x, int64_t n_cols, int64_t ld, int32_t* ids) {
  detail::wait_for_inputs();
  __shared__ float warp_v[kArgmaxThreads / 32];
  __shared__ int warp_i[kArgmaxThreads / 32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * ld;
  float bv = 0.0f;
  int bi = kNone;
  // Each thread scans increasing indices, so strict > keeps its first maximum.
  for (int64_t c = threadIdx.x; c < n_cols; c += kArgmaxThreads) {
    const float v = row[c];
    if (!isnan(v) && (bi == kNone || v > bv)) {
      bv = v;
      bi = static_cast<int>(c);
    }
  }
  for (int off = 16; off > 0; off /= 2) {
    const float ov = __shfl_down_sync(0xffffffffu, bv, off);
    const int oi = __shfl_down_sync(0xffffffffu, bi, off);
    if (beats(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_v[warp] = bv;
    warp_i[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kArgmaxThreads / 32; ++w)
    if (beats(warp_v[w], warp_i[w], bv, bi)) {
      bv = warp_v[w];
      bi = warp_i[w];
    }
  // std::max_element keeps a NaN first value (nothing compares greater than it); all NaN: 0.
  ids[blockIdx.x] = (n_cols == 0 || bi == kNone || isnan(row[0])) ? 0 : bi;
}

}  // namespace

void argmax_rows(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld, int32_t* ids,
                 cudaStream_t stream) {
  detail::require_non_negative("argmax_rows", n_rows, "n_rows");
  detail::require_non_negative("argmax_rows", n_cols, "n_cols");
  if (n_cols > INT_MAX - 1 || n_rows > INT_MAX || ld < n_cols)
    fail(ErrorCode::invalid_argument, "argmax_rows: {} rows of {} columns at stride {}", n_rows,
         n_cols, ld);
  if (n_rows == 0) return;
  detail::launch(argmax_rows_kernel, static_cast<unsigned>(n_rows), kArgmaxThreads, 0, stream, x,
                 n_cols, ld, ids);
}

}  // namespace memra::kernels
