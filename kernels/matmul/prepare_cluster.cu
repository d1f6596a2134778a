// The prepared f16 form of decode rows made by thread block clusters (prepare_cluster.cuh): the
// matmul's own preparation of x (x_to_f16's cluster form) and the SwiGLU / GeGLU that writes its
// output's prepared form too (kernels::act_mul_for_matmul). Both write x_to_f16's bits;
// kernel-check compares the products over them with the products over x_to_f16's.
#include "core/env.h"
#include "core/error.h"
#include "kernels/elementwise/act.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/prepare_cluster.cuh"

namespace memra::kernels {
namespace matmul_detail {
namespace {

// Rows of x (rows: the row each output row reads, or null), as x_to_f16_kernel.
__global__ void __launch_bounds__(kClusterPrepThreads)
    x_to_f16_cluster_kernel(const float* __restrict__ x, int n_in, uint16_t* __restrict__ xh,
                            uint16_t* __restrict__ xp, float* __restrict__ xsum, int xsum_stride,
                            float* __restrict__ xinv, const int32_t* __restrict__ rows) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int64_t row = blockIdx.x / cluster_size();
  const float4* src =
      reinterpret_cast<const float4*>(x + (rows ? rows[row] : row) * static_cast<int64_t>(n_in));
  const auto load = [&](int g, int n, float(&v)[32]) {
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (4 * q < n) f = __ldg(src + 8 * g + q);
      v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
    }
  };
  cluster_prepare_row(load, row, n_in, xh, xp, xsum, xsum_stride, xinv);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90 code
#endif
}

// out = act(gate) * up over dense rows of n_cols (out may be gate), and out's prepared form.
template <Act kAct>
__global__ void __launch_bounds__(kClusterPrepThreads)
    act_prepare_kernel(const float* gate, const float* __restrict__ up, int n_cols, float* out,
                       uint16_t* __restrict__ xh, float* __restrict__ xsum, int xsum_stride,
                       float* __restrict__ xinv) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int64_t row = blockIdx.x / cluster_size();
  const int64_t base = row * n_cols;
  // Plain loads of gate: out may be gate, written in this launch (each element by the thread that
  // read it).
  const auto load = [&](int g, int n, float(&v)[32]) {
    const float4* gv = reinterpret_cast<const float4*>(gate + base) + 8 * g;
    const float4* uv = reinterpret_cast<const float4*>(up + base) + 8 * g;
    float4* ov = reinterpret_cast<float4*>(out + base) + 8 * g;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (4 * q < n) {
        const float4 gf = gv[q], uf = __ldg(uv + q);
        a = make_float4(detail::act_value<kAct>(gf.x, uf.x), detail::act_value<kAct>(gf.y, uf.y),
                        detail::act_value<kAct>(gf.z, uf.z), detail::act_value<kAct>(gf.w, uf.w));
        ov[q] = a;
      }
      v[4 * q] = a.x, v[4 * q + 1] = a.y, v[4 * q + 2] = a.z, v[4 * q + 3] = a.w;
    }
  };
  cluster_prepare_row(load, row, n_cols, xh, nullptr, xsum, xsum_stride, xinv);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90 code
#endif
}

}  // namespace

// On unless MEMRA_PREP_CLUSTER=0 (the A/B: one block a row, the same bits), for up to
// kClusterPrepMaxRows rows of at most 8 x 64 groups, where the device runs this build's sm_90a
// code.
int cluster_prep_takes(int64_t n_rows, int64_t n_in) {
  static const bool enabled = env_switch("MEMRA_PREP_CLUSTER", true);
  if (!enabled || n_rows <= 0 || n_rows > kClusterPrepMaxRows || n_in <= 0 ||
      !prefill_wgmma_available())
    return 0;
  return cluster_prep_blocks((n_in + 31) / 32);
}

bool launch_x_to_f16_cluster(int64_t n_rows, int n_in, cudaStream_t stream, const float* x,
                             uint16_t* xh, uint16_t* xp, float* xsum, int xsum_stride, float* xinv,
                             const int32_t* rows) {
  const int blocks = cluster_prep_takes(n_rows, n_in);
  if (blocks == 0) return false;
  detail::launch_clustered(x_to_f16_cluster_kernel, dim3(static_cast<unsigned>(n_rows * blocks)),
                           dim3(kClusterPrepThreads), 0, stream, static_cast<unsigned>(blocks), x,
                           n_in, xh, xp, xsum, xsum_stride, xinv, rows);
  return true;
}

}  // namespace matmul_detail

bool act_mul_for_matmul(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                        float* out, void* scratch, cudaStream_t stream) {
  const int blocks = matmul_detail::cluster_prep_takes(n_rows, n_cols);
  if (blocks == 0 || n_rows > kPreparedRows) return false;
  const matmul_detail::PreparedRows p =
      matmul_detail::prepared_rows("act_mul_for_matmul", scratch, n_rows, n_cols, {gate, up, out});
  const auto launch = [&](auto kernel) {
    detail::launch_clustered(kernel, dim3(static_cast<unsigned>(n_rows * blocks)),
                             dim3(matmul_detail::kClusterPrepThreads), 0, stream,
                             static_cast<unsigned>(blocks), gate, up, static_cast<int>(n_cols), out,
                             p.xh, p.xsum, p.xsum_stride, p.xinv);
  };
  if (act == Act::silu)
    launch(matmul_detail::act_prepare_kernel<Act::silu>);
  else
    launch(matmul_detail::act_prepare_kernel<Act::gelu_tanh>);
  return true;
}

}  // namespace memra::kernels
