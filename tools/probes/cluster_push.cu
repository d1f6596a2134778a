// A probe, not part of the build: what it costs the blocks of a cluster to hand each other a
// token's partial the way decode attention's async merge does (decode_cluster_async.cuh: every
// block pushes its split's statistics to every block and each value to the block whose share holds
// it, and each block waits on its own inbox's mbarrier), against three other ways of moving the
// same bytes:
//   scalar st.async   today's pushes: a thread's four values by four st.async stores
//   staged v4         the values staged in the warp's own shared memory in output order, then one
//                     16-byte st.async a thread (a quarter of the remote stores)
//   staged bulk       the whole partial staged in the block's shared memory, then one bulk copy a
//                     destination block (cp.async.bulk shared::cluster from shared::cta)
//   pull              the pull merge's publish: local stores, the cluster barrier (release and
//                     acquire), each block's share read from every block's shared memory
// Why: the seventy-first round's stamps put ~600 cycles on the pushes at 512 keys (values and
// pushes 2,455 cycles, the values alone ~1,850); whether that is the remote stores' count (then
// fewer, wider stores pay) or the hand-off's latency (then nothing on the sender's side does).
// Columns: thread 0's cycles from the pushes' start to its issue done, to its inbox full, and to
// its share read (medians over the launch's blocks), for one round and a mean of 64 rounds, at the
// 8B's four query rows a kv head and the 0.6B's two, for clusters of two and four blocks.
// Measured in the seventy-second round (H100, docs/PERFORMANCE.md): to a full inbox at two blocks
// and four rows, 4-byte stores 853 cycles, 16-byte 677, a bulk copy a block 574, the pull's
// barrier 965; the 16-byte form in the decode kernel was no faster and is not kept.
// Standalone (nvcc alone on the GPU box, where the project's headers would need fmt's), so it
// spells out the few PTX wrappers kernels/cluster.cuh and kernels/bulk_copy.cuh hold. Run on the
// GPU box:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/cluster_push.cu \
//     -o /tmp/cluster_push && /tmp/cluster_push
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_cluster.cuh"

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kD = 128;                      // head_dim
constexpr int kMaxRows = 8, kMaxGroups = 4;  // query rows a block, blocks a cluster
constexpr int kRowDims = kD / kWarps;        // a warp's dims of a row: 16 (d and d + 8 a lane)

enum Way : int { kScalar = 0, kStagedV4 = 1, kStagedBulk = 2, kPull = 3, kWays = 4 };
const char* const kWayNames[kWays] = {"scalar st.async (today)", "staged, v4 st.async",
                                      "staged, bulk copy a block", "pull (cluster barrier)"};

// A block's shared memory: its inboxes (two, by round parity) and its staged partial.
struct Smem {
  alignas(16) uint64_t bar[2];
  alignas(16) float2 stats[2][kMaxGroups][kMaxRows];
  alignas(16) float values[2][kMaxRows * kD];  // [split][share], groups x share = the outputs
  alignas(16) float2 stage_stats[kMaxRows];
  alignas(16) float stage[kMaxRows * kD];  // the partial in output order (row r, dim d: r kD + d)
};

using probe::cluster_rank;
using probe::cluster_sync;
using probe::rank_addr;
using probe::smem_addr;
using probe::wait_parity;

__device__ __forceinline__ void expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void push_f32(uint32_t dst, float v, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(dst),
      "f"(v), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void push_f32x2(uint32_t dst, float2 v, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(
          dst),
      "f"(v.x), "f"(v.y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void push_f32x4(uint32_t dst, float4 v, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(dst),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void bulk_push(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst),
      "r"(smem_addr(src)), "r"(bytes), "r"(bar)
      : "memory");
}

// Each block: `iters` rounds of pushing its partial (this thread's four values in decode_values_t's
// layout: rows 2 t + e at dims d and d + 8) and statistics to the cluster's inboxes `way`, waiting
// for its own inbox and reading its share. clocks[3 block + c]: thread 0's cycles over the rounds
// to its issue done (c = 0), its inbox full (1), its share read (2).
template <int kWay>
__global__ void push_rounds(int iters, int n_h, long long* clocks, float* out) {
  __shared__ Smem sm;
  uint32_t n_blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n_blocks));
  const uint32_t rank = cluster_rank();
  const int total = n_h * kD, share = total / static_cast<int>(n_blocks);
  const uint32_t inbox_bytes = n_blocks * (n_h * 8 + share * 4);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
  const int d = warp * kRowDims + (lane >> 2);
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&sm.bar[b])));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync();
  float acc[4];
  for (int j = 0; j < 4; ++j) acc[j] = static_cast<float>(rank * 1000 + threadIdx.x * 4 + j);
  // Every row's statistics to every block (the pushing ways), and this thread's values staged in
  // the block's partial in output order (the staging ways).
  const auto push_stats = [&](int b) {
    if (static_cast<int>(threadIdx.x) < n_h * static_cast<int>(n_blocks)) {
      const int r = threadIdx.x % n_h, g = threadIdx.x / n_h;
      push_f32x2(rank_addr(&sm.stats[b][rank][r], g), make_float2(acc[0], acc[1]),
                 rank_addr(&sm.bar[b], g));
    }
  };
  const auto stage_values = [&] {
    for (int e = 0; e < 2; ++e) {
      const int r = 2 * t + e;
      if (r >= n_h) continue;
      for (int h = 0; h < 2; ++h) sm.stage[r * kD + d + 8 * h] = acc[2 * h + e];
    }
  };
  float sum = 0.0f;
  long long issued = 0, full = 0, read = 0;
  for (int it = 0; it < iters; ++it) {
    const int b = it & 1;
    if (kWay != kPull && threadIdx.x == 0) expect_bytes(&sm.bar[b], inbox_bytes);
    __syncthreads();
    const long long t0 = clock64();
    if (kWay == kScalar) {
      push_stats(b);
      for (int e = 0; e < 2; ++e) {
        const int r = 2 * t + e;
        if (r >= n_h) continue;
        for (int h = 0; h < 2; ++h) {
          const int i = r * kD + d + 8 * h, g = i / share;
          push_f32(rank_addr(&sm.values[b][rank * share + (i - g * share)], g), acc[2 * h + e],
                   rank_addr(&sm.bar[b], g));
        }
      }
    } else if (kWay == kStagedV4) {
      push_stats(b);
      stage_values();
      __syncwarp();  // the warp's rows of its 16 dims, read back four at a time
      if (lane < n_h * (kRowDims / 4)) {
        const int r = lane / (kRowDims / 4), i = r * kD + warp * kRowDims + 4 * (lane % 4);
        const int g = i / share;
        push_f32x4(rank_addr(&sm.values[b][rank * share + (i - g * share)], g),
                   *reinterpret_cast<const float4*>(&sm.stage[i]), rank_addr(&sm.bar[b], g));
      }
    } else if (kWay == kStagedBulk) {
      if (static_cast<int>(threadIdx.x) < n_h) sm.stage_stats[threadIdx.x] = {acc[0], acc[1]};
      stage_values();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for the copies' reads
      __syncthreads();
      if (threadIdx.x < n_blocks) {
        const uint32_t g = threadIdx.x, bar = rank_addr(&sm.bar[b], g);
        bulk_push(rank_addr(&sm.stats[b][rank][0], g), sm.stage_stats, n_h * 8, bar);
        bulk_push(rank_addr(&sm.values[b][rank * share], g), &sm.stage[g * share], share * 4, bar);
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
    } else {  // kPull: the partial in output order, published by the cluster barrier
      if (static_cast<int>(threadIdx.x) < n_h) sm.stage_stats[threadIdx.x] = {acc[0], acc[1]};
      stage_values();
    }
    const long long t1 = clock64();
    if (kWay == kPull)
      cluster_sync();
    else
      wait_parity(&sm.bar[b], (it >> 1) & 1);
    const long long t2 = clock64();
    // This block's share, from every block's partial (the merge's reads, without its arithmetic).
    for (int i = threadIdx.x; i < share; i += kThreads) {
      for (uint32_t k = 0; k < n_blocks; ++k) {
        float v;
        if (kWay == kPull) {
          asm volatile("ld.shared::cluster.f32 %0, [%1];\n"
                       : "=f"(v)
                       : "r"(rank_addr(&sm.stage[rank * share + i], k))
                       : "memory");
        } else {
          v = sm.values[b][k * share + i];
        }
        sum += v;
      }
    }
    if (kWay == kPull) {
      sum += sm.stage_stats[0].x;
    } else {
      sum += sm.stats[b][n_blocks - 1][n_h - 1].y;
    }
    const long long t3 = clock64();
    issued += t1 - t0, full += t2 - t0, read += t3 - t0;
    // The next round rewrites the staged partial (and the peers' inboxes of this parity two
    // rounds on): the copies must have read it, and the pull's peers must be done reading it.
    if (kWay == kStagedBulk && threadIdx.x < n_blocks)
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    if (kWay == kPull) cluster_sync();
    __syncthreads();
  }
  cluster_sync();  // no block leaves while a peer may still push to it or read it
  if (threadIdx.x == 0) {
    clocks[3 * blockIdx.x + 0] = issued;
    clocks[3 * blockIdx.x + 1] = full;
    clocks[3 * blockIdx.x + 2] = read;
  }
  out[blockIdx.x * kThreads + threadIdx.x] = sum;
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

template <int kWay>
void medians(int blocks, int cluster, int iters, int n_h, long long* clocks, float* out,
             double (&m)[3]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  for (int rep = 0; rep < 2; ++rep)  // the first warms
    check(cudaLaunchKernelEx(&cfg, push_rounds<kWay>, iters, n_h, clocks, out), "launch");
  check(cudaDeviceSynchronize(), "run");
  std::vector<long long> host(3 * blocks);
  check(cudaMemcpy(host.data(), clocks, host.size() * sizeof(long long), cudaMemcpyDeviceToHost),
        "copy");
  for (int c = 0; c < 3; ++c) {
    std::vector<long long> col(blocks);
    for (int i = 0; i < blocks; ++i) col[i] = host[3 * i + c];
    std::sort(col.begin(), col.end());
    m[c] = static_cast<double>(col[blocks / 2]) / iters;
  }
}

template <int kWay>
void report(int blocks, int cluster, int n_h, long long* clocks, float* out) {
  std::printf("%-28s %2d %2d", kWayNames[kWay], cluster, n_h);
  for (int iters : {1, 64}) {
    double m[3];
    medians<kWay>(blocks, cluster, iters, n_h, clocks, out, m);
    std::printf(" %8.0f %8.0f %8.0f", m[0], m[1], m[2]);
  }
  std::printf("\n");
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  long long* clocks;
  float* out;
  check(cudaMalloc(&clocks, sizeof(long long) * 3 * sms), "malloc");
  check(cudaMalloc(&out, sizeof(float) * kThreads * sms), "malloc");
  std::printf("thread 0's cycles from the pushes' start (median of the blocks, one an SM)\n");
  std::printf("%-28s %2s %2s %8s %8s %8s %8s %8s %8s\n", "way", "cl", "nh", "issued", "full",
              "read", "issued64", "full64", "read64");
  for (int cluster : {2, 4}) {
    const int blocks = sms / cluster * cluster;
    for (int n_h : {4, 2}) {
      report<kScalar>(blocks, cluster, n_h, clocks, out);
      report<kStagedV4>(blocks, cluster, n_h, clocks, out);
      report<kStagedBulk>(blocks, cluster, n_h, clocks, out);
      report<kPull>(blocks, cluster, n_h, clocks, out);
    }
  }
  cudaFree(clocks), cudaFree(out);
  return 0;
}
