// Private to kernels/: the f16 form of a row (prepare_x.cuh) made by a thread block cluster, the
// row's 32-element groups spread over its blocks, one group a thread. Only the row's largest |x|
// crosses blocks (each block's through distributed shared memory), and a maximum is exact in any
// order, so every element, group sum and scale has x_to_f16's bits.
//
// Why. x_to_f16 and the norms prepare a row in one block of 256 threads: a decode step's 12,288-
// wide SwiGLU output is two groups a thread, each thread's 64 conversions and sums in a row, and
// the launch before it (act_mul) is a whole kernel of its own. Here a cluster of up to 8 blocks of
// 64 threads takes a row, each thread one group, and the producer's own elementwise step (the
// SwiGLU: kernels::act_mul_for_matmul) runs in the same threads, writing its output and its
// prepared form in one launch.
#pragma once

#include <cstdint>

#include "kernels/matmul/cluster.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels::matmul_detail {

constexpr int kClusterPrepThreads = 64;      // a block: two warps, one group a thread
constexpr int kClusterPrepMaxBlocks = 8;     // the portable cluster size
constexpr int64_t kClusterPrepMaxRows = 64;  // decode steps

// Blocks a cluster for a row of `groups` 32-element groups, or 0 where the row is too wide for
// one group a thread in a portable cluster.
inline int cluster_prep_blocks(int64_t groups) {
  const int64_t blocks = (groups + kClusterPrepThreads - 1) / kClusterPrepThreads;
  return groups > 0 && blocks <= kClusterPrepMaxBlocks ? static_cast<int>(blocks) : 0;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The largest of every block's m in the cluster (block_m: this block's shared slot; every block
// reads every other's, so the caller keeps its block in the cluster until cluster_sync()).
__device__ __forceinline__ float cluster_max(float m, float* warp_m, float* block_m) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) warp_m[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = warp_m[0];
#pragma unroll
    for (int w = 1; w < kClusterPrepThreads / 32; ++w) b = fmaxf(b, warp_m[w]);
    *block_m = b;
  }
  cluster_sync();  // every block's slot is written
  const uint32_t n = cluster_size();
  float all = 0.0f;
  for (uint32_t r = 0; r < n; ++r) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                 : "=r"(remote)
                 : "r"(smem_addr(block_m)), "r"(r));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    all = fmaxf(all, v);
  }
  return all;
}

// Row `row`'s prepared form from the cluster's blocks: load(g, n, v) puts elements [32 g,
// 32 g + n) of the row in v[0..n) (zeros after) for this thread's group g, once. Call from every
// thread of every block (the cluster's barriers); grid.x = rows x cluster size.
template <typename Load>
__device__ __forceinline__ void cluster_prepare_row(Load load, int64_t row, int n_in, uint16_t* xh,
                                                    uint16_t* xp, float* xsum, int xsum_stride,
                                                    float* xinv) {
  __shared__ float warp_m[kClusterPrepThreads / 32];
  __shared__ float block_m;
  const uint32_t rank = cluster_rank(), blocks = cluster_size();
  const int per = (xsum_stride + static_cast<int>(blocks) - 1) / static_cast<int>(blocks);
  const int g = static_cast<int>(rank) * per + static_cast<int>(threadIdx.x);
  const bool mine = static_cast<int>(threadIdx.x) < per && g < xsum_stride;
  const int n = mine ? min(32, n_in - 32 * g) : 0;
  float v[32];
  load(g, n, v);
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) m = fmaxf(m, fabsf(v[i]));
  m = cluster_max(m, warp_m, &block_m);
  // row_scale's power of two, its inverse written once a row.
  int e = 0;
  if (m > 0.0f && m <= 3.4e38f) (void)frexpf(m, &e);
  const int shift = m > 0.0f && m <= 3.4e38f ? 15 - e : 0;
  if (rank == 0 && threadIdx.x == 0) xinv[row] = ldexpf(1.0f, -shift);
  const float scale = ldexpf(1.0f, shift);
  if (mine) {
    float sum = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (16 * h >= n) continue;
      float e16[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) e16[i] = v[16 * h + i] * scale;
      half_group_to_f16(e16, row, 32 * g + 16 * h, n_in, xh, xp, sum);
    }
    xsum[row * xsum_stride + g] = sum;
  }
  cluster_sync();  // no block leaves while another may still read its block_m
}
#endif

}  // namespace memra::kernels::matmul_detail
