// x's prepared forms (prepare_x.cuh's steps, one group's for every writer): x_to_f16 a row a block
// (the element-order form the mma.sync and decode kernels read, and/or the wgmma kernels' form),
// x's wgmma form by token groups from the rows' largest |x| (found a block a row, or written by the
// kernel that made x: kernels/row_max.h), the decode norms writing their output's prepared rows,
// and the prompt norms writing x's rows form. Split from matmul.cu, which multiplies.
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
#include "kernels/matmul/prepare_x.cuh"
#include "kernels/matmul/scratch_layout.cuh"
#include "kernels/row_max.h"

namespace memra::kernels {
namespace {

using detail::aligned16;
using matmul_detail::block_max;
using matmul_detail::group_to_f16;
using matmul_detail::kChunk;
using matmul_detail::kDecodeTokens;
using matmul_detail::kXRowsK;
using matmul_detail::kXThreads;
using matmul_detail::max_abs;
using matmul_detail::row_shift;
using matmul_detail::row_to_f16;
using matmul_detail::row_to_f16_regs;
using matmul_detail::ScratchLayout;

// Row `row` of the result is x row rows[row] (rows null: x row `row`): the expert matmuls gather
// their pairs' rows in expert order this way. kG > 0: the register form (prepare_x.cuh) for rows
// of at most kG x 256 groups of 32. kRows: xp in x's rows form (x_rows_offset).
template <int kG, bool kRows = false>
__global__ void __launch_bounds__(kXThreads)
    x_to_f16_kernel(const float* __restrict__ x, int n_in, uint16_t* __restrict__ xh,
                    uint16_t* __restrict__ xp, float* __restrict__ xsum, int xsum_stride,
                    float* __restrict__ xinv, const int32_t* __restrict__ rows) {
  detail::wait_for_inputs();
  __shared__ float warp_max[kXThreads / 32];
  const int64_t row = blockIdx.x;
  const float* x_row = x + (rows ? rows[row] : row) * static_cast<int64_t>(n_in);
  if constexpr (kG > 0) {
    row_to_f16_regs<kG, kRows>(x_row, row, n_in, xh, xp, xsum, xsum_stride, xinv, warp_max);
    return;
  }
  const float4* src = reinterpret_cast<const float4*>(x_row);
  float m = 0.0f;
  for (int i = threadIdx.x; i < n_in / 4; i += kXThreads) {
    const float4 f = __ldg(src + i);
    m = max_abs(m, f);
  }
  m = block_max(m, warp_max);
  row_to_f16<true, kRows>(x_row, m, row, n_in, xh, xp, xsum, xsum_stride, xinv);
}

// x_to_f16's xp-only form by token groups (launch_xp_groups; the prefill steps whose outputs all
// take the wgmma kernels). One block a row writes the row's xp as 16-byte pieces 128 bytes to
// 4 KB apart, each store a part of a sector (Nsight Compute: 58 us for 512 x 12,288). Here each
// row's largest |x| first (xp_row_max_kernel, exact in any order as x_to_f16_kernel's; or from
// the kernel that wrote x, kernels/row_max.h), then blocks of 8 rows x 32 groups
// (xp_groups_kernel): thread t converts group 32 y + t / 8 of row 8 x + t % 8 with row_to_f16's
// steps (prepare_x.cuh, group_to_f16), so the 8 lanes of a group write its 8 rows' pieces as one
// 128-byte row of a core matrix.
constexpr int kXpGroupRows = 8, kXpGroupGroups = 32;
// The rows' largest |x|, a block a row: thread t reads float4s t, t + 256, ..., kRowMaxLoads of
// them issued before any is used. Why: a warp a row made 64 blocks of a 512-token step (half the
// SMs) whose lanes walked 32 float4s each (96 at 12,288 wide) in dependent rounds to memory; here
// 512 blocks take one round (three at 12,288). Measured (PERFORMANCE.md, thirty-seventh round):
// 8B Q4_K_M pp512 19,399 -> 19,885 tok/s, BF16 pp512 22,943 -> 23,491.
constexpr int kRowMaxLoads = 4;
__global__ void __launch_bounds__(kXThreads)
    xp_row_max_kernel(const float* __restrict__ x, int n_in, float* __restrict__ xmax) {
  detail::wait_for_inputs();
  __shared__ float warp_max[kXThreads / 32];
  const int64_t row = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(x + row * n_in);
  const int n4 = n_in / 4;
  float m = 0.0f;
  for (int i0 = static_cast<int>(threadIdx.x); i0 < n4; i0 += kRowMaxLoads * kXThreads) {
    float4 f[kRowMaxLoads];
#pragma unroll
    for (int u = 0; u < kRowMaxLoads; ++u) {
      const int i = i0 + u * kXThreads;
      f[u] = i < n4 ? __ldg(src + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kRowMaxLoads; ++u) m = max_abs(m, f[u]);
  }
  m = block_max(m, warp_max);
  if (threadIdx.x == 0) xmax[row] = m;
}
template <bool kRows>
__global__ void __launch_bounds__(kXThreads)
    xp_groups_kernel(const float* __restrict__ x, int n_in, int n_rows,
                     const float* __restrict__ xmax, uint16_t* __restrict__ xp,
                     float* __restrict__ xsum, int xsum_stride, float* __restrict__ xinv) {
  detail::wait_for_inputs();
  const int row =
      static_cast<int>(blockIdx.x) * kXpGroupRows + static_cast<int>(threadIdx.x) % kXpGroupRows;
  const int g =
      static_cast<int>(blockIdx.y) * kXpGroupGroups + static_cast<int>(threadIdx.x) / kXpGroupRows;
  if (row >= n_rows || g >= xsum_stride) return;
  const int shift = row_shift(xmax[row]);
  if (g == 0) xinv[row] = ldexpf(1.0f, -shift);
  group_to_f16<true, kRows>(reinterpret_cast<const float4*>(x + static_cast<int64_t>(row) * n_in),
                            ldexpf(1.0f, shift), row, g, n_in, nullptr, xp, xsum, xsum_stride);
}
static_assert(kXpGroupRows * kXpGroupGroups == kXThreads, "a block is 8 rows x 32 groups");

// rms_norm / add_rms_norm of a row (norm_row.cuh: the norm kernel's own steps) and then the f16
// form of y as x_to_f16 makes it: the largest |y| is gathered as y is written, and after a
// barrier the block reads its own y back (plain loads: it wrote them in this launch).
// kN > 0: the norm's register form (norm_row.cuh), y's copy for the f16 form staged in shared
// memory instead of reread. x16: xh, or (kRows) x's rows form (rms_norm_x_rows).
static_assert(kXThreads == detail::kNormThreads, "one block shape for both halves");
template <int kN, bool kRows = false>
__global__ void __launch_bounds__(kXThreads)
    norm_to_f16_kernel(float* x, const float* d, const float* w, int dim, float eps, float* y,
                       uint16_t* __restrict__ x16, float* __restrict__ xsum, int xsum_stride,
                       float* __restrict__ xinv) {
  detail::wait_for_inputs();
  uint16_t* const xh = kRows ? nullptr : x16;
  uint16_t* const xp = kRows ? x16 : nullptr;
  __shared__ float warp_sums[detail::kNormWarps];
  __shared__ float warp_max[kXThreads / 32];
  __shared__ detail::RowStage<kN> ys;
  const int64_t row = blockIdx.x;
  if constexpr (kN > 0) {
    const float m =
        block_max(detail::norm_row_regs<kN>(x + row * dim, d ? d + row * dim : nullptr, w, dim, eps,
                                            y + row * dim, ys.v, warp_sums),
                  warp_max);
    row_to_f16<false, kRows>(ys.v, m, row, dim, xh, xp, xsum, xsum_stride, xinv);
  } else {
    const float m = block_max(detail::norm_row(x, d, w, dim, eps, y, row, warp_sums), warp_max);
    row_to_f16<false, kRows>(y + row * dim, m, row, dim, xh, xp, xsum, xsum_stride, xinv);
  }
}

}  // namespace

namespace matmul_detail {

// x_to_f16_kernel over n_rows rows, in the register form where a row has at most 3 x 256 groups
// of 32 (24,576 elements; MEMRA_PREP_REGS=0: the loop form, the A/B). xp_rows: xp in x's rows form.
void launch_x_to_f16(int64_t n_rows, int n_in, cudaStream_t stream, const float* x, uint16_t* xh,
                     uint16_t* xp, float* xsum, int xsum_stride, float* xinv, const int32_t* rows,
                     bool xp_rows) {
  static const bool regs = env_switch("MEMRA_PREP_REGS", true);
  const int groups = regs ? xsum_stride : 1 << 30;
  const auto launch = [&](auto kernel) {
    detail::launch(kernel, static_cast<unsigned>(n_rows), kXThreads, 0, stream, x, n_in, xh, xp,
                   xsum, xsum_stride, xinv, rows);
  };
  const auto pick = [&](auto with_rows) {
    constexpr bool kRows = decltype(with_rows)::value;
    if (groups <= kXThreads) return launch(x_to_f16_kernel<1, kRows>);
    if (groups <= 2 * kXThreads) return launch(x_to_f16_kernel<2, kRows>);
    if (groups <= 3 * kXThreads) return launch(x_to_f16_kernel<3, kRows>);
    launch(x_to_f16_kernel<0, kRows>);
  };
  if (xp_rows)
    pick(std::true_type{});
  else
    pick(std::false_type{});
}

// x's wgmma form alone (xp, the group sums and the scales; no xh) by token groups
// (prepare_x.cuh, group_to_f16): on by default, MEMRA_XP_GROUPS=0 for the A/B (x_to_f16_kernel's
// one block a row; the same bits). Measured on the H200 (thirty-fifth round, PERFORMANCE.md): 8B
// Q4_K_M pp512 18,452 -> 19,285 tok/s, BF16 pp512 21,648 -> 22,892, pp2048 21,177 -> 22,921.
bool xp_groups_enabled() {
  static const bool enabled = env_switch("MEMRA_XP_GROUPS", true);
  return enabled;
}
// xmax_given: the rows' largest |x| are in xmax already (kernels/row_max.h's producers wrote them).
// xp_rows: xp in x's rows form.
void launch_xp_groups(int n_rows, int n_in, cudaStream_t stream, const float* x, uint16_t* xp,
                      float* xsum, int xsum_stride, float* xinv, float* xmax, bool xmax_given,
                      bool xp_rows) {
  const auto rows = static_cast<unsigned>(n_rows);
  if (!xmax_given) detail::launch(xp_row_max_kernel, rows, kXThreads, 0, stream, x, n_in, xmax);
  const dim3 grid((rows + kXpGroupRows - 1) / kXpGroupRows,
                  static_cast<unsigned>((xsum_stride + kXpGroupGroups - 1) / kXpGroupGroups));
  detail::launch(xp_rows ? xp_groups_kernel<true> : xp_groups_kernel<false>, grid, kXThreads, 0,
                 stream, x, n_in, n_rows, static_cast<const float*>(xmax), xp, xsum, xsum_stride,
                 xinv);
}

// x's rows form (matmul_launch.cuh: x_rows_offset) for the prefill steps whose outputs all take
// the wgmma kernels, where the kernels that serve those steps read it (the BF16 kernel, the Q4_K
// chunk ring, the scaled Q6_K / Q8_0 kernel; with MEMRA_WGMMA_FOLD=0 or MEMRA_WGMMA_SCALED=0 the
// older kernels read xp_offset's layout only). On by default (fortieth round: 8B pp512 +3.2%
// Q4_K_M, +3.0% BF16); MEMRA_X_ROWS=0 turns it off for the A/B (the same bits). Why: written a row
// a block, x's wgmma form needs no pass of its own over the row's maxima, and the kernel that
// writes a row stores whole runs (xp_offset's 16-byte pieces sit 128 bytes to 4 KB apart, the
// reason xp_groups_kernel exists).
//
// At the decode steps of 33-64 tokens too (on by default since the fiftieth round: 8B Q4_K_M c40
// +5.1%, c64 +4.1%, Q8_0 c64 +3.8%, 0.6B c64 +7.2% on an H100; MEMRA_X_ROWS_DECODE=0 for the A/B,
// the same bits), where every Q4_K, Q6_K and Q8_0 product runs on the pipelined Q4_K kernel or the
// scaled one, which read it as the prefill kernels do (the same boxes, the same bits): the norms
// and the gated activation then write the products' input themselves, instead of the two passes
// of its own each product input takes (c64's step profile, forty-ninth round: 26 us a layer of
// ~317).
static bool x_rows_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_X_ROWS_DECODE", true);
  return enabled;
}
bool x_rows_enabled(int64_t n_tokens) {
  static const bool enabled = env_switch("MEMRA_X_ROWS", true);
  if (!enabled) return false;
  if (n_tokens > kDecodeTokens)
    return matmul_detail::prefill_wgmma_fold_enabled() &&
           matmul_detail::prefill_wgmma_scaled_enabled();
  return n_tokens > kRowsDecodeMinTokens && x_rows_decode_enabled() &&
         matmul_detail::wgmma_fold64_enabled() && matmul_detail::scaled_decode_enabled();
}

}  // namespace matmul_detail

bool raw_x_enabled() {
  static const bool enabled = env_switch("MEMRA_RAW_X", true);
  return enabled;
}

bool raw_x_attention_enabled() {
  static const bool enabled = env_switch("MEMRA_RAW_X_ATTENTION", true);
  return enabled;
}

namespace matmul_detail {

float* scratch_row_max(void* scratch, int64_t n_rows, int64_t dim) {
  return ScratchLayout(n_rows, dim).xmax(scratch, n_rows);
}

uint16_t* scratch_x_rows(void* scratch, int64_t n_rows, int64_t dim) {
  return ScratchLayout(n_rows, dim).parts(scratch).xp;
}

float* scratch_part_max(void* scratch) {
  return ScratchLayout::part_max(scratch);
}

PreparedRows x_rows_places(void* scratch, int64_t n_rows, int64_t dim) {
  // The rows form lives where the wgmma form would: a scratch sized for kWgmmaMinTokens rows or
  // fewer has no room for it.
  if (n_rows <= kWgmmaMinTokens)
    fail(ErrorCode::invalid_argument, "x's rows form: {} rows (it needs more than {})", n_rows,
         kWgmmaMinTokens);
  const ScratchLayout layout(n_rows, dim);
  const ScratchLayout::Parts p = layout.parts(scratch);
  return {p.xp, p.xsum, static_cast<int>(layout.xsum_stride), p.xinv};
}

MatmulArgs prepare_x_rows(const float* x, int64_t n_rows, int64_t n_in, const int32_t* rows,
                          void* scratch, cudaStream_t stream) {
  if (n_rows <= 0 || n_rows > (int64_t{1} << 30) || n_in <= 0 || n_in % 16 != 0 || n_in > (1 << 30))
    fail(ErrorCode::invalid_argument, "prepare_x_rows: {} rows of {}", n_rows, n_in);
  if (!aligned16(x) || !aligned16(scratch))
    fail(ErrorCode::invalid_argument, "prepare_x_rows: x and scratch must be 16-byte aligned");
  const ScratchLayout layout(n_rows, n_in);
  const ScratchLayout::Parts p = layout.parts(scratch);
  launch_x_to_f16(n_rows, static_cast<int>(n_in), stream, x, p.xh, nullptr, p.xsum,
                  static_cast<int>(layout.xsum_stride), p.xinv, rows);
  MatmulArgs a;
  a.xh = p.xh;
  a.xsum = p.xsum;
  a.xsum_stride = static_cast<int>(layout.xsum_stride);
  a.xinv = p.xinv;
  a.n_in = static_cast<int>(n_in);
  return a;
}

PreparedRows prepared_rows(const char* kernel, void* scratch, int64_t n_rows, int64_t dim,
                           std::initializer_list<const void*> aligned) {
  if (n_rows < 0 || n_rows > kPreparedRows || dim <= 0 || dim % 16 != 0 || dim > (1 << 30))
    fail(ErrorCode::invalid_argument,
         "{}: {} prepared rows of {} (at most {} rows, dim a multiple of 16)", kernel, n_rows, dim,
         kPreparedRows);
  bool ok = aligned16(scratch);
  for (const void* p : aligned) ok = ok && (p == nullptr || aligned16(p));
  if (!ok)
    fail(ErrorCode::invalid_argument, "{}: rows and scratch must be 16-byte aligned", kernel);
  const ScratchLayout layout(n_rows, dim);
  const ScratchLayout::Parts p = layout.parts(scratch);
  return {p.xh, p.xsum, static_cast<int>(layout.xsum_stride), p.xinv};
}

}  // namespace matmul_detail

using matmul_detail::x_rows_enabled;
using matmul_detail::xp_groups_enabled;

bool row_max_pays(int64_t n_rows) {
  return n_rows > kDecodeTokens && xp_groups_enabled() && matmul_detail::prefill_wgmma_available();
}

bool x_rows_pays(int64_t n_rows, int64_t dim) {
  return x_rows_enabled(n_rows) && dim % kChunk == 0 && dim <= (1 << 30) &&
         matmul_detail::prefill_wgmma_available();
}

void rms_norm_x_rows(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                     float eps, float* y, void* scratch, cudaStream_t stream) {
  if (n_rows <= matmul_detail::kWgmmaMinTokens || n_rows > (int64_t{1} << 30) || dim <= 0 ||
      dim % kXRowsK != 0 || dim > (1 << 30))
    fail(ErrorCode::invalid_argument,
         "rms_norm_x_rows: {} rows of {} (more than {} rows, dim a multiple of {})", n_rows, dim,
         matmul_detail::kWgmmaMinTokens, kXRowsK);
  if (!x || !y || !aligned16(x) || !aligned16(y) || !aligned16(scratch) || (d && !aligned16(d)))
    fail(ErrorCode::invalid_argument,
         "rms_norm_x_rows: x, d, y and scratch must be 16-byte aligned");
  const matmul_detail::PreparedRows p = matmul_detail::x_rows_places(scratch, n_rows, dim);
  detail::with_row_regs(dim, {x, d, y, w}, [&](auto kn) {
    detail::launch(norm_to_f16_kernel<decltype(kn)::value, true>, static_cast<unsigned>(n_rows),
                   kXThreads, 0, stream, x, d, w, static_cast<int>(dim), eps, y, p.xh, p.xsum,
                   p.xsum_stride, p.xinv);
  });
}

PreparedX matmul_prepare_x(const float* x, int64_t n_tokens, int64_t n_in, void* scratch,
                           cudaStream_t stream) {
  const matmul_detail::MatmulArgs a =
      matmul_detail::prepare_x_rows(x, n_tokens, n_in, nullptr, scratch, stream);
  return {a.xh, a.xinv};
}

void rms_norm_for_matmul(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                         float eps, float* y, void* scratch, cudaStream_t stream) {
  const matmul_detail::PreparedRows p =
      matmul_detail::prepared_rows("rms_norm_for_matmul", scratch, n_rows, dim, {x, d, y});
  if (n_rows == 0) return;
  detail::with_row_regs(dim, {x, d, y, w}, [&](auto kn) {
    detail::launch(norm_to_f16_kernel<decltype(kn)::value>, static_cast<unsigned>(n_rows),
                   kXThreads, 0, stream, x, d, w, static_cast<int>(dim), eps, y, p.xh, p.xsum,
                   p.xsum_stride, p.xinv);
  });
}

}  // namespace memra::kernels
