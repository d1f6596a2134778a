// RMS norm, the fused residual-add + RMS norm, and Gemma's fused norm chains (post_norm_add_norm,
// rms_norm_dual): one block of a fixed 256 threads per row (norm_row.cuh), so a row's result is
// the same in any batch. The chains run in one launch what a decode step ran as two to four (the
// plain rms_norm, add, scale and rms_norm kernels), with the same bits: each reduction is
// norm_row.cuh's, each elementwise step one rounded IEEE operation in the plain kernels' order, and
// a thread rereads only the elements it wrote itself (every pass gives thread t the same chunks).
// Rows that fit it take the register form (kN chunks a thread, norm_row.cuh's RowRegs: one memory
// round trip a row instead of one a chunk and pass), the same arithmetic; kN = 0 is the loop form.
#include "kernels/common.cuh"
#include "kernels/elementwise/norm_row.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/prepare_x.cuh"
#include "kernels/row_max.h"

namespace memra::kernels {

namespace {

using detail::aligned16;
using detail::kNormThreads;
using detail::kNormWarps;
using detail::RowRegs;
using detail::RowStage;
using detail::with_row_regs;
using matmul_detail::PreparedRows;

static_assert(matmul_detail::kXThreads == kNormThreads, "block_max's shape is the norm's");
// kRowMax: also each row's largest |y| to ymax[row] (rms_norm_row_max), the maximum norm_row
// finds as it writes y, gathered over the block.
template <int kN, bool kRowMax = false>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(float* x, const float* d, const float* w, int64_t dim, float eps, float* y,
                    float* ymax) {
  detail::wait_for_inputs();
  __shared__ float warp_sums[kNormWarps];
  const int64_t row = blockIdx.x;
  float m;
  if constexpr (kN == 0) {
    m = detail::norm_row(x, d, w, dim, eps, y, row, warp_sums);
  } else {
    m = detail::norm_row_regs<kN>(x + row * dim, d ? d + row * dim : nullptr, w, dim, eps,
                                  y + row * dim, nullptr, warp_sums);
  }
  if constexpr (kRowMax) {
    __shared__ float warp_max[kNormWarps];
    m = matmul_detail::block_max(m, warp_max);
    if (threadIdx.x == 0) ymax[row] = m;
  } else {
    (void)m;
  }
}

// x = x + d, then times s when kScaled, over the thread's chunks (the add and scale kernels'
// roundings), for a chain with no norm after the add.
template <bool kScaled>
__device__ __forceinline__ void add_scale_row(float* xr, const float* dr, float s, int64_t dim,
                                              bool vec) {
  const int64_t n_chunks = (dim + 3) / 4;
  float v[4], dv[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = detail::load4(xr, c, dim, vec, v);
    detail::load4(dr, c, dim, vec, dv);
    for (int k = 0; k < n; ++k) v[k] = __fadd_rn(v[k], dv[k]);
    if constexpr (kScaled)
      for (int k = 0; k < n; ++k) v[k] = __fmul_rn(v[k], s);
    detail::store4(xr, c, vec, v, n);
  }
}

struct SandwichArgs {
  float* d;
  const float* w_post;
  float* x;
  float x_scale;
  const float* w_pre;
  float* y;  // null: no pre-norm
  int64_t dim;
  float eps;
  PreparedRows prep;  // xh null: y not prepared
};

// The register form of post_norm_add_norm_kernel's row (below): d, x and both weights in one
// round trip. ys: shared memory for y's prepared form.
template <int kN, bool kScaled>
__device__ __forceinline__ void post_norm_add_norm_regs(const SandwichArgs& a, int64_t row,
                                                        float* post_sums, float* pre_sums,
                                                        float* warp_max, float* ys) {
  const int64_t n = a.dim / 4;
  float* dr = a.d + row * a.dim;
  float* xr = a.x + row * a.dim;
  RowRegs<kN> d, x, w_post{}, w_pre{};
  d.load(dr, n);
  x.load(xr, n);
  if (a.w_post) w_post.load(a.w_post, n);
  if (a.y && a.w_pre) w_pre.load(a.w_pre, n);
  const float inv_d =
      detail::inv_rms(detail::norm_block_sum(d.squares(n), post_sums), a.dim, a.eps);
  (void)detail::row_out(d, d, inv_d, w_post, a.w_post != nullptr, n);
  d.store(dr, n);
  x.template add_scale<kScaled>(d, a.x_scale);
  x.store(xr, n);
  if (!a.y) return;
  const float inv = detail::inv_rms(detail::norm_block_sum(x.squares(n), pre_sums), a.dim, a.eps);
  const float m = detail::row_out(x, x, inv, w_pre, a.w_pre != nullptr, n);
  x.store(a.y + row * a.dim, n);
  if (!a.prep.xh) return;
  x.store(ys, n);
  matmul_detail::prepare_row(ys, m, row, static_cast<int>(a.dim), a.prep, warp_max);
}

// d = rms_norm(d) * w_post in place (norm_row, as rms_norm); x = (x + d) [* x_scale]; y =
// rms_norm(x) * w_pre. The two reductions use separate shared sums, so no barrier between them.
template <int kN, bool kScaled>
__global__ void __launch_bounds__(kNormThreads) post_norm_add_norm_kernel(const SandwichArgs a) {
  detail::wait_for_inputs();
  __shared__ float post_sums[kNormWarps], pre_sums[kNormWarps], warp_max[kNormWarps];
  __shared__ RowStage<kN> ys;
  const int64_t row = blockIdx.x;
  if constexpr (kN > 0) {
    post_norm_add_norm_regs<kN, kScaled>(a, row, post_sums, pre_sums, warp_max, ys.v);
    return;
  }
  (void)detail::norm_row(a.d, nullptr, a.w_post, a.dim, a.eps, a.d, row, post_sums);
  const float* dr = a.d + row * a.dim;
  float* xr = a.x + row * a.dim;
  const bool vec_xd = a.dim % 4 == 0 && aligned16(xr) && aligned16(dr);
  if (!a.y) {
    add_scale_row<kScaled>(xr, dr, a.x_scale, a.dim, vec_xd);
    return;
  }
  float* yr = a.y + row * a.dim;
  const bool vec = vec_xd && aligned16(yr);
  const float inv = detail::norm_row_inv<kScaled>(xr, dr, a.x_scale, a.dim, a.eps, vec, pre_sums);
  const float m = detail::norm_row_out(xr, a.w_pre, inv, a.dim, vec, yr);
  if (a.prep.xh) matmul_detail::prepare_row(yr, m, row, static_cast<int>(a.dim), a.prep, warp_max);
}

struct DualArgs {
  const float* x;
  const float* w1;
  float s1;
  float* y1;
  const float* w2;
  float* y2;
  int64_t dim;
  float eps;
  PreparedRows prep;  // xh null: y1 not prepared
};

// The register form of rms_norm_dual_kernel's row (below).
template <int kN>
__device__ __forceinline__ void rms_norm_dual_regs(const DualArgs& a, int64_t row, float* warp_sums,
                                                   float* warp_max, float* ys) {
  const int64_t n = a.dim / 4;
  RowRegs<kN> x, w1{}, w2{}, y1, y2;
  x.load(a.x + row * a.dim, n);
  if (a.w1) w1.load(a.w1, n);
  if (a.w2) w2.load(a.w2, n);
  const float inv = detail::inv_rms(detail::norm_block_sum(x.squares(n), warp_sums), a.dim, a.eps);
  (void)detail::row_out(y2, x, inv, w2, a.w2 != nullptr, n);
  (void)detail::row_out(y1, x, inv, w1, a.w1 != nullptr, n);
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      y1.v[i][k] = __fmul_rn(y1.v[i][k], a.s1);
      m = fmaxf(m, fabsf(y1.v[i][k]));
    }
  }
  y1.store(a.y1 + row * a.dim, n);
  y2.store(a.y2 + row * a.dim, n);
  if (!a.prep.xh) return;
  y1.store(ys, n);
  matmul_detail::prepare_row(ys, m, row, static_cast<int>(a.dim), a.prep, warp_max);
}

// One reduction of x (norm_row_inv, as rms_norm's), then both outputs from the same 1 / rms:
// y1 = (x * inv * w1) * s1 (rms_norm, then scale's rounding), y2 = x * inv * w2.
template <int kN>
__global__ void __launch_bounds__(kNormThreads) rms_norm_dual_kernel(const DualArgs a) {
  detail::wait_for_inputs();
  __shared__ float warp_sums[kNormWarps], warp_max[kNormWarps];
  __shared__ RowStage<kN> ys;
  const int64_t row = blockIdx.x;
  if constexpr (kN > 0) {
    rms_norm_dual_regs<kN>(a, row, warp_sums, warp_max, ys.v);
    return;
  }
  // x is only read (no d, not scaled); norm_row_inv takes float* for the chains that write it.
  float* xr = const_cast<float*>(a.x) + row * a.dim;
  float *y1r = a.y1 + row * a.dim, *y2r = a.y2 + row * a.dim;
  const bool vec = a.dim % 4 == 0 && aligned16(xr) && aligned16(y1r) && aligned16(y2r);
  const float inv = detail::norm_row_inv(xr, nullptr, 1.0f, a.dim, a.eps, vec, warp_sums);
  const int64_t n_chunks = (a.dim + 3) / 4;
  float m = 0.0f;
  float v[4], v1[4], v2[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = detail::load4(xr, c, a.dim, vec, v);
    for (int k = 0; k < n; ++k) {
      v1[k] = __fmul_rn(detail::norm_out(v[k], inv, a.w1, 4 * c + k), a.s1);
      v2[k] = detail::norm_out(v[k], inv, a.w2, 4 * c + k);
      m = fmaxf(m, fabsf(v1[k]));
    }
    detail::store4(y1r, c, vec, v1, n);
    detail::store4(y2r, c, vec, v2, n);
  }
  if (a.prep.xh) matmul_detail::prepare_row(y1r, m, row, static_cast<int>(a.dim), a.prep, warp_max);
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
  with_row_regs(dim, {x, y, w}, [&](auto kn) {
    detail::launch(rms_norm_kernel<decltype(kn)::value>, static_cast<unsigned>(n_rows),
                   kNormThreads, 0, stream, const_cast<float*>(x), nullptr, w, dim, eps, y,
                   nullptr);
  });
}

void add_rms_norm(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim, float eps,
                  float* y, cudaStream_t stream) {
  check_norm_args("add_rms_norm", n_rows, dim);
  if (n_rows == 0) return;
  if (d == nullptr) fail(ErrorCode::invalid_argument, "add_rms_norm: residual d is null");
  with_row_regs(dim, {x, d, y, w}, [&](auto kn) {
    detail::launch(rms_norm_kernel<decltype(kn)::value>, static_cast<unsigned>(n_rows),
                   kNormThreads, 0, stream, x, d, w, dim, eps, y, nullptr);
  });
}

void rms_norm_row_max(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                      float eps, float* y, void* scratch, cudaStream_t stream) {
  check_norm_args("rms_norm_row_max", n_rows, dim);
  if (!x || !y || !scratch || reinterpret_cast<uintptr_t>(scratch) % 16 != 0)
    fail(ErrorCode::invalid_argument, "rms_norm_row_max: x, y or scratch is null or unaligned");
  if (n_rows == 0) return;
  float* ymax = matmul_detail::scratch_row_max(scratch, n_rows, dim);
  with_row_regs(dim, {x, d, y, w}, [&](auto kn) {
    detail::launch(rms_norm_kernel<decltype(kn)::value, true>, static_cast<unsigned>(n_rows),
                   kNormThreads, 0, stream, x, d, w, dim, eps, y, ymax);
  });
}

void post_norm_add_norm(float* d, const float* w_post, float* x, float x_scale, const float* w_pre,
                        float* y, int64_t n_rows, int64_t dim, float eps, void* prepared,
                        cudaStream_t stream) {
  check_norm_args("post_norm_add_norm", n_rows, dim);
  if (!d || !x || (prepared && !y))
    fail(ErrorCode::invalid_argument, "post_norm_add_norm: d or x is null, or y prepared but null");
  PreparedRows prep;
  if (prepared)
    prep = matmul_detail::prepared_rows("post_norm_add_norm", prepared, n_rows, dim, {y});
  if (n_rows == 0) return;
  const SandwichArgs a{d, w_post, x, x_scale, w_pre, y, dim, eps, prep};
  // Scaling by exactly 1 is skipped, as the model skips the scale op then.
  with_row_regs(dim, {d, x, y, w_post, w_pre}, [&](auto kn) {
    const auto kernel = x_scale != 1.0f ? post_norm_add_norm_kernel<decltype(kn)::value, true>
                                        : post_norm_add_norm_kernel<decltype(kn)::value, false>;
    detail::launch(kernel, static_cast<unsigned>(n_rows), kNormThreads, 0, stream, a);
  });
}

void rms_norm_dual(const float* x, const float* w1, float s1, float* y1, const float* w2, float* y2,
                   int64_t n_rows, int64_t dim, float eps, void* prepared, cudaStream_t stream) {
  check_norm_args("rms_norm_dual", n_rows, dim);
  if (!x || !y1 || !y2) fail(ErrorCode::invalid_argument, "rms_norm_dual: x, y1 or y2 is null");
  PreparedRows prep;
  if (prepared) prep = matmul_detail::prepared_rows("rms_norm_dual", prepared, n_rows, dim, {y1});
  if (n_rows == 0) return;
  const DualArgs a{x, w1, s1, y1, w2, y2, dim, eps, prep};
  with_row_regs(dim, {x, y1, y2, w1, w2}, [&](auto kn) {
    detail::launch(rms_norm_dual_kernel<decltype(kn)::value>, static_cast<unsigned>(n_rows),
                   kNormThreads, 0, stream, a);
  });
}

}  // namespace memra::kernels
