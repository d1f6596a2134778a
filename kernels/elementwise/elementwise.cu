// Pointwise kernels: add, add_row, scale, softcap, act_mul (silu / gelu-tanh gate) and
// gather_rows. Each output element is one independent float expression, so results never depend
// on the launch shape; grid-stride loops with 64-bit indices handle any size.
#include <type_traits>

#include "core/env.h"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/prepare_x.cuh"
#include "kernels/matmul/scratch_layout.cuh"
#include "kernels/row_max.h"

namespace memra::kernels {

namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kThreads;

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  detail::wait_for_inputs();
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] += x[i];
}

__global__ void add_row_kernel(float* y, const float* b, int64_t n_rows, int64_t dim, int64_t ld) {
  detail::wait_for_inputs();
  const int64_t n = n_rows * dim;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t r = i / dim, c = i % dim;
    y[r * ld + c] += b[c];
  }
}

__global__ void scale_kernel(float* y, float s, int64_t n) {
  detail::wait_for_inputs();
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] *= s;
}

__global__ void softcap_kernel(float* y, float cap, int64_t n) {
  detail::wait_for_inputs();
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = cap * tanhf(y[i] / cap);
}

// The CPU reference's formulas term for term: silu(g) = g / (1 + exp(-g)); gelu with the tanh
// approximation 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
template <Act kAct>
__device__ __forceinline__ float act_of(float g) {
  if constexpr (kAct == Act::silu) {
    return g / (1.0f + expf(-g));
  } else {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    return 0.5f * g * (1.0f + tanhf(inner));
  }
}

// Calls f with the activation as a compile-time constant (std::integral_constant<Act, ...>), so
// each launcher picks its kernel's instance in one place.
template <typename F>
void with_act(Act act, F&& f) {
  if (act == Act::silu)
    f(std::integral_constant<Act, Act::silu>{});
  else
    f(std::integral_constant<Act, Act::gelu_tanh>{});
}

template <Act kAct>
__global__ void act_mul_kernel(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                               int64_t ld_in, float* out) {
  detail::wait_for_inputs();
  const int64_t n = n_rows * n_cols;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t r = i / n_cols, c = i % n_cols;
    out[i] = act_of<kAct>(gate[r * ld_in + c]) * up[r * ld_in + c];
  }
}

// The same elements four at a time where rows and strides are whole float4s (16-byte aligned
// pointers, n_cols and ld_in multiples of 4): block (x, y) takes row y's float4s x * kThreads +
// threadIdx.x, + gridDim.x * kThreads, ... (no 64-bit division an element, the loads 16 bytes
// wide). Each element's expression is the scalar kernel's, so the bits are too. Measured
// (memra-kernel-bench --elementwise, H200): the scalar kernel moved 512 x 12,288 SwiGLU rows at
// 41% of the copy rate (43.0 us).
template <Act kAct>
__global__ void act_mul4_kernel(const float4* gate, const float4* up, int64_t n_cols4,
                                int64_t ld_in4, float4* out) {
  detail::wait_for_inputs();
  const int64_t r = blockIdx.y;
  const float4* g_row = gate + r * ld_in4;
  const float4* u_row = up + r * ld_in4;
  float4* o_row = out + r * n_cols4;
  for (int64_t c = int64_t{blockIdx.x} * kThreads + threadIdx.x; c < n_cols4;
       c += int64_t{gridDim.x} * kThreads) {
    const float4 g = g_row[c], u = u_row[c];
    o_row[c] = make_float4(act_of<kAct>(g.x) * u.x, act_of<kAct>(g.y) * u.y,
                           act_of<kAct>(g.z) * u.z, act_of<kAct>(g.w) * u.w);
  }
}

// act_mul4's elements a row a block, then the row's f16 rows form for the down projection
// (act_mul_x_rows): thread t takes the row's float4s t, t + 256, ..., four issued before any is
// used. Each element's expression is act_mul4's (so the same bits); the row's largest |out| is
// exact in any order, and the block reads its own out back for the rows form (x_to_f16's steps:
// prepare_x.cuh).
constexpr int kActLoads = 4;
template <Act kAct>
__global__ void act_mul_x_rows_kernel(const float4* gate, const float4* up, int n_cols4,
                                      float4* out, matmul_detail::PreparedRows rows) {
  detail::wait_for_inputs();
  __shared__ float warp_max[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float4* g_row = gate + r * n_cols4;
  const float4* u_row = up + r * n_cols4;
  float4* o_row = out + r * n_cols4;
  float m = 0.0f;
  for (int c0 = static_cast<int>(threadIdx.x); c0 < n_cols4; c0 += kActLoads * kThreads) {
    float4 g[kActLoads], u[kActLoads];
#pragma unroll
    for (int j = 0; j < kActLoads; ++j) {
      const int c = c0 + j * kThreads;
      if (c < n_cols4) g[j] = g_row[c], u[j] = u_row[c];
    }
#pragma unroll
    for (int j = 0; j < kActLoads; ++j) {
      const int c = c0 + j * kThreads;
      if (c >= n_cols4) break;
      const float4 o = make_float4(act_of<kAct>(g[j].x) * u[j].x, act_of<kAct>(g[j].y) * u[j].y,
                                   act_of<kAct>(g[j].z) * u[j].z, act_of<kAct>(g[j].w) * u[j].w);
      o_row[c] = o;
      m = matmul_detail::max_abs(m, o);
    }
  }
  static_assert(kThreads == matmul_detail::kXThreads, "block_max's shape");
  m = matmul_detail::block_max(m, warp_max);  // its barrier: the block's out is written
  matmul_detail::row_to_f16<false, true>(reinterpret_cast<const float*>(o_row), m, r, 4 * n_cols4,
                                         nullptr, rows.xh, rows.xsum, rows.xsum_stride, rows.xinv);
}

// act_mul4's elements of one row, block b taking float4s 256 b .. 256 b + 255 (kPartMaxElems of
// them), that also writes the largest |out| of its part to parts[b] for the down product reading
// the row raw (kernels/row_max.h: act_mul_part_max). Each element's expression is act_mul4's (so
// the same bits); the largest |out| is exact in any order.
template <Act kAct>
__global__ void act_mul_part_max_kernel(const float4* gate, const float4* up, int n_cols4,
                                        float4* out, float* parts) {
  detail::wait_for_inputs();
  __shared__ float warp_max[kThreads / 32];
  const int c = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  float m = 0.0f;
  if (c < n_cols4) {
    const float4 g = gate[c], u = up[c];
    const float4 o = make_float4(act_of<kAct>(g.x) * u.x, act_of<kAct>(g.y) * u.y,
                                 act_of<kAct>(g.z) * u.z, act_of<kAct>(g.w) * u.w);
    out[c] = o;
    m = matmul_detail::max_abs(m, o);
  }
  static_assert(kThreads == matmul_detail::kXThreads, "block_max's shape");
  static_assert(kPartMaxElems == 4 * kThreads, "a part is a block's float4s");
  m = matmul_detail::block_max(m, warp_max);
  if (threadIdx.x == 0) parts[blockIdx.x] = m;
}

// act_mul_x_rows's register form (act_rows_regs_take, below), for rows of at most kG x 256 groups
// of 32 elements: thread t takes the row's groups t + 256 j, j < kG, whole, every gate and up load
// issued before any is used (one memory round trip where the loop above takes n_cols / 4,096 of
// them: three at the 8B's 12,288; 144-170 registers, no spills), and converts its outputs from
// registers (row_to_f16_regs's steps) instead of reading the row back from memory after the
// block's barrier. Why: at 64 sequences the activation was 10.5 us a layer on the H100
// (fifty-third round's c64 step, 64 blocks: one a row) for ~2 us of bytes. The same bits: each
// element is act_mul4's expression, the largest |out| is exact in any order, and each group's
// conversion and sum are group_to_f16's steps on the same values (kernel-check's rows-form cases).
template <Act kAct, int kG>
__global__ void __launch_bounds__(kThreads)
    act_mul_x_rows_regs_kernel(const float4* gate, const float4* up, int n_cols4, float4* out,
                               matmul_detail::PreparedRows rows) {
  detail::wait_for_inputs();
  __shared__ float warp_max[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float4* g_row = gate + r * n_cols4;
  const float4* u_row = up + r * n_cols4;
  float4* o_row = out + r * n_cols4;
  const int n_groups = n_cols4 / 8, n_in = 4 * n_cols4;
  float4 g[kG][8], u[kG][8];
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int grp = static_cast<int>(threadIdx.x) + j * kThreads;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if (grp < n_groups) g[j][q] = g_row[8 * grp + q], u[j][q] = u_row[8 * grp + q];
    }
  }
  float v[kG][32];
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int grp = static_cast<int>(threadIdx.x) + j * kThreads;
    if (grp >= n_groups) continue;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const float4 o =
          make_float4(act_of<kAct>(g[j][q].x) * u[j][q].x, act_of<kAct>(g[j][q].y) * u[j][q].y,
                      act_of<kAct>(g[j][q].z) * u[j][q].z, act_of<kAct>(g[j][q].w) * u[j][q].w);
      o_row[8 * grp + q] = o;
      m = matmul_detail::max_abs(m, o);
      v[j][4 * q] = o.x, v[j][4 * q + 1] = o.y, v[j][4 * q + 2] = o.z, v[j][4 * q + 3] = o.w;
    }
  }
  static_assert(kThreads == matmul_detail::kXThreads, "block_max's shape");
  const float scale = matmul_detail::row_scale(matmul_detail::block_max(m, warp_max), r, rows.xinv);
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int grp = static_cast<int>(threadIdx.x) + j * kThreads;
    if (grp < n_groups)
      matmul_detail::group_values_to_f16<true>(v[j], scale, r, grp, n_in, nullptr, rows.xh,
                                               rows.xsum, rows.xsum_stride);
  }
}

// Whether act_mul_x_rows takes the register form above: by default (MEMRA_ACT_ROWS_REGS=0 for the
// A/B, `gpu_check.sh actregs`) in decode steps (at most kDecodeTokens rows) whose rows the loop
// form reads in more than one round (over 4,096 elements) and the register form holds (at most 2 x
// 256 groups: 16,384). Measured on the H100 (docs/PERFORMANCE.md, fifty-fifth round), register
// form against the loop on every row: 8B Q4_K_M (12,288 wide) c40 +2.9%, c64 +3.0%; the 0.6B
// (3,072 wide: one round either way, 96 of 256 threads busy) c64 -0.9%; pp512 -1.7% on the 8B and
// -6% on the 0.6B (at 170 registers the kernel runs one block an SM: 12,288 wide at 512 rows 39.6
// -> 62.4 us), hence the bounds.
constexpr int kActRegGroups = 2;
bool act_rows_regs_take(int64_t n_rows, int64_t n_cols) {
  static const bool enabled = env_switch("MEMRA_ACT_ROWS_REGS", true);
  return enabled && n_rows <= matmul_detail::kDecodeTokens &&
         n_cols > int64_t{4} * kActLoads * kThreads &&
         n_cols <= int64_t{32} * kThreads * kActRegGroups;
}

__global__ void gather_rows_kernel(const float* x, int64_t dim, const int32_t* rows, int64_t n_rows,
                                   float* out) {
  detail::wait_for_inputs();
  const int64_t n = n_rows * dim;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t r = i / dim, c = i % dim;
    out[i] = x[static_cast<int64_t>(rows[r]) * dim + c];
  }
}

void check_sizes(const char* kernel, int64_t n_rows, int64_t n_cols) {
  detail::require_non_negative(kernel, n_rows, "row count");
  detail::require_non_negative(kernel, n_cols, "row length");
}

}  // namespace

void add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  detail::require_non_negative("add", n, "n");
  if (n == 0) return;
  detail::launch(add_kernel, grid_for(n), kThreads, 0, stream, y, x, n);
}

void add_row(float* y, const float* b, int64_t n_rows, int64_t dim, int64_t ld,
             cudaStream_t stream) {
  check_sizes("add_row", n_rows, dim);
  if (ld < dim) fail(ErrorCode::invalid_argument, "add_row: row stride {} < dim {}", ld, dim);
  if (n_rows == 0 || dim == 0) return;
  detail::launch(add_row_kernel, grid_for(n_rows * dim), kThreads, 0, stream, y, b, n_rows, dim,
                 ld);
}

void scale(float* y, float s, int64_t n, cudaStream_t stream) {
  detail::require_non_negative("scale", n, "n");
  if (n == 0) return;
  detail::launch(scale_kernel, grid_for(n), kThreads, 0, stream, y, s, n);
}

void softcap(float* y, float cap, int64_t n, cudaStream_t stream) {
  detail::require_non_negative("softcap", n, "n");
  if (!(cap > 0.0f)) fail(ErrorCode::invalid_argument, "softcap: cap {} is not positive", cap);
  if (n == 0) return;
  detail::launch(softcap_kernel, grid_for(n), kThreads, 0, stream, y, cap, n);
}

void act_mul(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
             int64_t ld_in, float* out, cudaStream_t stream) {
  check_sizes("act_mul", n_rows, n_cols);
  if (ld_in < n_cols)
    fail(ErrorCode::invalid_argument, "act_mul: row stride {} < row length {}", ld_in, n_cols);
  if (n_rows == 0 || n_cols == 0) return;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // MEMRA_ACT_MUL_VEC=0: every call on the scalar kernel (the A/B; the same bits).
  static const bool vec = env_switch("MEMRA_ACT_MUL_VEC", true);
  if (vec && n_cols % 4 == 0 && ld_in % 4 == 0 && n_rows <= 65535 && aligned(gate) && aligned(up) &&
      aligned(out)) {
    const int64_t n_cols4 = n_cols / 4;
    const dim3 grid(grid_for(n_cols4), static_cast<unsigned>(n_rows));
    const auto* g4 = reinterpret_cast<const float4*>(gate);
    const auto* u4 = reinterpret_cast<const float4*>(up);
    auto* o4 = reinterpret_cast<float4*>(out);
    return with_act(act, [&](auto a) {
      detail::launch(act_mul4_kernel<decltype(a)::value>, grid, kThreads, 0, stream, g4, u4,
                     n_cols4, ld_in / 4, o4);
    });
  }
  const unsigned blocks = grid_for(n_rows * n_cols);
  with_act(act, [&](auto a) {
    detail::launch(act_mul_kernel<decltype(a)::value>, blocks, kThreads, 0, stream, gate, up,
                   n_rows, n_cols, ld_in, out);
  });
}

bool act_mul_x_rows(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                    float* out, void* scratch, cudaStream_t stream) {
  check_sizes("act_mul_x_rows", n_rows, n_cols);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n_cols % matmul_detail::kXRowsK != 0 || n_cols > (int64_t{1} << 30) || n_rows > 0x7fffffff ||
      !aligned(gate) || !aligned(up) || !aligned(out) || !aligned(scratch))
    return false;
  // The rows form lives where x's wgmma form would, which a scratch for 16 rows or fewer lacks.
  if (n_rows <= matmul_detail::kWgmmaMinTokens) return false;
  if (n_cols == 0) return true;
  const matmul_detail::PreparedRows rows = matmul_detail::x_rows_places(scratch, n_rows, n_cols);
  const auto* g4 = reinterpret_cast<const float4*>(gate);
  const auto* u4 = reinterpret_cast<const float4*>(up);
  auto* o4 = reinterpret_cast<float4*>(out);
  const auto blocks = static_cast<unsigned>(n_rows);
  const int n_cols4 = static_cast<int>(n_cols / 4);
  if (act_rows_regs_take(n_rows, n_cols)) {
    with_act(act, [&](auto a) {
      detail::launch(act_mul_x_rows_regs_kernel<decltype(a)::value, kActRegGroups>, blocks,
                     kThreads, 0, stream, g4, u4, n_cols4, o4, rows);
    });
    return true;
  }
  with_act(act, [&](auto a) {
    detail::launch(act_mul_x_rows_kernel<decltype(a)::value>, blocks, kThreads, 0, stream, g4, u4,
                   n_cols4, o4, rows);
  });
  return true;
}

bool act_mul_part_max(Act act, const float* gate, const float* up, int64_t n_cols, float* out,
                      void* scratch, cudaStream_t stream) {
  check_sizes("act_mul_part_max", 1, n_cols);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n_cols % 4 != 0 || n_cols > kMaxParts * kPartMaxElems || !aligned(gate) || !aligned(up) ||
      !aligned(out) || !aligned(scratch))
    return false;
  if (n_cols == 0) return true;
  const auto blocks = static_cast<unsigned>(part_max_count(n_cols));
  const int n_cols4 = static_cast<int>(n_cols / 4);
  const auto* g4 = reinterpret_cast<const float4*>(gate);
  const auto* u4 = reinterpret_cast<const float4*>(up);
  auto* o4 = reinterpret_cast<float4*>(out);
  float* parts = matmul_detail::ScratchLayout::part_max(scratch);
  with_act(act, [&](auto a) {
    detail::launch(act_mul_part_max_kernel<decltype(a)::value>, blocks, kThreads, 0, stream, g4, u4,
                   n_cols4, o4, parts);
  });
  return true;
}

void gather_rows(const float* x, int64_t dim, const int32_t* rows, int64_t n_rows, float* out,
                 cudaStream_t stream) {
  check_sizes("gather_rows", n_rows, dim);
  if (n_rows == 0 || dim == 0) return;
  detail::launch(gather_rows_kernel, grid_for(n_rows * dim), kThreads, 0, stream, x, dim, rows,
                 n_rows, out);
}

}  // namespace memra::kernels
