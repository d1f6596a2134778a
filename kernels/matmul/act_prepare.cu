// The gated activation of a decode step's feed-forward block that also writes the down
// projection's f16 input (prepare_x.cuh's form), as a decode step's norms prepare the q/k/v and
// gate/up inputs: one launch where act_mul and the product's x_to_f16 were two.
//
// Why a cluster. The prepared form scales a row by a power of two picked from its largest |y|, so
// every element of the row must be known before any is rounded. One block a row (the seventh
// round's try, docs/PERFORMANCE.md) ran a 12,288-wide activation, an expf and a division an
// element, on one SM: 25 us against ~7 for the two kernels. Here a row is a cluster of kBlocks
// blocks on as many SMs: each activates its share of the row's 32-element groups into registers,
// and the blocks trade their largest |y| through distributed shared memory. Every element is
// act_mul's expression (act_math.cuh), the row's maximum is exact in any order, and each group's
// rounding and sum are row_to_f16's steps (half_group_to_f16), so out and the prepared form are
// bit-identical to act_mul then x_to_f16; kernel-check compares them.
#include <atomic>

#include "kernels/elementwise/act_math.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/cluster.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels {
namespace matmul_detail {
namespace {

constexpr int kBlocks = 8;  // a row's cluster (the portable cluster size)
constexpr int kMaxThreads = 256;
constexpr int kMaxGroupsPerThread = 2;

// Block `rank` of row blockIdx.x / kBlocks takes the row's 32-element groups [rank * per,
// (rank + 1) * per) (per = ceil(groups / kBlocks); the last group may hold 16), thread t the
// block's groups t + j * blockDim.x, j < kG. gate may be out (the decoder activates in place):
// each element is read by the thread that writes it, before it writes it.
template <Act kAct, int kG>
__global__ void __launch_bounds__(kMaxThreads)
    act_to_f16_kernel(const float* gate, const float* __restrict__ up, int n_cols, int64_t ld_in,
                      float* out, uint16_t* __restrict__ xh, float* __restrict__ xsum,
                      int xsum_stride, float* __restrict__ xinv) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ float warp_max[kMaxThreads / 32];
  __shared__ float block_max;
  const uint32_t rank = cluster_rank();
  const int64_t row = blockIdx.x / kBlocks;
  const int n_groups = xsum_stride;  // (n_cols + 31) / 32
  const int per = (n_groups + kBlocks - 1) / kBlocks;
  const float* g_row = gate + row * ld_in;
  const float* u_row = up + row * ld_in;
  float* o_row = out + row * n_cols;
  int group[kG], count[kG];  // count: the group's elements, 0 where the thread has none
  float v[kG][32];
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int local = static_cast<int>(threadIdx.x) + j * static_cast<int>(blockDim.x);
    group[j] = static_cast<int>(rank) * per + local;
    count[j] = local < per && group[j] < n_groups ? min(32, n_cols - 32 * group[j]) : 0;
    float gv[32], uv[32];
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
      if (4 * q < count[j]) {
        a = reinterpret_cast<const float4*>(g_row + 32 * group[j])[q];
        b = __ldg(reinterpret_cast<const float4*>(u_row + 32 * group[j]) + q);
      }
      gv[4 * q] = a.x, gv[4 * q + 1] = a.y, gv[4 * q + 2] = a.z, gv[4 * q + 3] = a.w;
      uv[4 * q] = b.x, uv[4 * q + 1] = b.y, uv[4 * q + 2] = b.z, uv[4 * q + 3] = b.w;
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      v[j][i] = detail::act_times<kAct>(gv[i], uv[i]);
      if (i < count[j]) m = fmaxf(m, fabsf(v[j][i]));  // fmaxf: NaN never wins, as in x_to_f16
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if (4 * q < count[j])
        reinterpret_cast<float4*>(o_row + 32 * group[j])[q] =
            make_float4(v[j][4 * q], v[j][4 * q + 1], v[j][4 * q + 2], v[j][4 * q + 3]);
    }
  }
  // The block's largest |y|, then the row's from the cluster's blocks.
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = warp_max[0];
    for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) b = fmaxf(b, warp_max[w]);
    block_max = b;
  }
  cluster_sync();  // every block's maximum is written
  float row_max = 0.0f;
#pragma unroll
  for (uint32_t r = 0; r < kBlocks; ++r) row_max = fmaxf(row_max, load_remote_f32(&block_max, r));
  // Done reading the other blocks' shared memory; none may exit before every block is (the wait
  // at the end).
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  const int shift = row_shift(row_max);
  const float scale = ldexpf(1.0f, shift);
  if (rank == 0 && threadIdx.x == 0) xinv[row] = ldexpf(1.0f, -shift);
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    if (count[j] == 0) continue;
    float sum = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (16 * h >= count[j]) continue;
      float e16[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) e16[i] = v[j][16 * h + i] * scale;
      half_group_to_f16(e16, row, 32 * group[j] + 16 * h, n_cols, xh, nullptr, sum);
    }
    xsum[row * xsum_stride + group[j]] = sum;
  }
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();  // launched only where act_prepare_available() found sm_90 code
#endif
}

// Whether the runtime loads sm_90 code of the kernel on the current device (clusters and
// distributed shared memory); an sm_80 build or device keeps act_mul + x_to_f16.
bool act_prepare_available() {
  static std::atomic<uint64_t> checked{0}, available{0};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (!(checked.load(std::memory_order_acquire) & bit)) {
    cudaFuncAttributes attr{};
    const bool ok = cudaFuncGetAttributes(&attr, act_to_f16_kernel<Act::silu, 1>) == cudaSuccess &&
                    attr.binaryVersion >= 90;
    if (!ok) (void)cudaGetLastError();
    if (ok) available.fetch_or(bit, std::memory_order_release);
    checked.fetch_or(bit, std::memory_order_release);
  }
  return (available.load(std::memory_order_acquire) & bit) != 0;
}

template <Act kAct>
void launch_act_to_f16(int64_t n_rows, int n_cols, int64_t ld_in, const float* gate,
                       const float* up, float* out, const PreparedRows& p, int per,
                       cudaStream_t stream) {
  const int kg = per <= kMaxThreads ? 1 : 2;
  const unsigned threads = static_cast<unsigned>((per + kg - 1) / kg + 31) / 32 * 32;
  const auto blocks = static_cast<unsigned>(n_rows * kBlocks);
  const auto run = [&](auto kernel) {
    detail::launch_clustered(kernel, dim3(blocks), dim3(threads), 0, stream, kBlocks, gate, up,
                             n_cols, ld_in, out, p.xh, p.xsum, p.xsum_stride, p.xinv);
  };
  if (kg == 1)
    run(act_to_f16_kernel<kAct, 1>);
  else
    run(act_to_f16_kernel<kAct, kMaxGroupsPerThread>);
}

}  // namespace
}  // namespace matmul_detail

bool act_mul_for_matmul(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                        int64_t ld_in, float* out, void* scratch, cudaStream_t stream) {
  using namespace matmul_detail;
  const int64_t groups = (n_cols + 31) / 32, per = (groups + kBlocks - 1) / kBlocks;
  if (n_cols <= 0 || per > int64_t{kMaxGroupsPerThread} * kMaxThreads || ld_in < n_cols ||
      ld_in % 4 != 0 || !act_prepare_available())
    return false;
  const PreparedRows p =
      prepared_rows("act_mul_for_matmul", scratch, n_rows, n_cols, {gate, up, out});
  if (n_rows == 0) return true;
  const int cols = static_cast<int>(n_cols), per_block = static_cast<int>(per);
  if (act == Act::silu)
    launch_act_to_f16<Act::silu>(n_rows, cols, ld_in, gate, up, out, p, per_block, stream);
  else
    launch_act_to_f16<Act::gelu_tanh>(n_rows, cols, ld_in, gate, up, out, p, per_block, stream);
  return true;
}

}  // namespace memra::kernels
