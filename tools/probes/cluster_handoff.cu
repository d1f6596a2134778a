// A probe, not part of the build: what it costs a block of a two-block cluster to hand its peer
// what it wrote to its shared memory, by the cluster barrier (release, then acquire: decode
// attention's cluster merge, decode_cluster.cuh) and by an mbarrier in the reader's shared memory
// that the writer's thread 0 arrives on remotely (release at cluster scope, after a block barrier),
// each with and without a global store in flight before the hand-off. Why: the seventieth round's
// truthful stamps put ~1,400 cycles between a block's partial written and its peers' partials
// readable, in every block of the launch; whether that is the barrier's own price (then an
// mbarrier hand-off is the next step) or what its release waits for (then the store before it).
// Run on the GPU box:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/cluster_handoff.cu \
//     -o /tmp/cluster_handoff && /tmp/cluster_handoff
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_cluster.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kFloats = 2 * kThreads;  // a block's partial: two floats a thread

enum Way : int { kBarrier = 0, kBarrierRelaxed = 1, kMbarrier = 2, kWays = 3 };
const char* const kWayNames[kWays] = {"cluster barrier (release/acquire)",
                                      "cluster barrier (relaxed arrival)",
                                      "mbarrier, remote arrival (release.cluster)"};

using probe::cluster_sync;
using probe::rank_addr;
using probe::smem_addr;
using probe::wait_parity;

__device__ __forceinline__ float load_peer(const float* p, uint32_t rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(rank_addr(p, rank)) : "memory");
  return v;
}

// Each block: `iters` rounds of writing its partial (buffer i & 1), handing it over `way`, and
// reading one float of the peer's; clocks[block] = thread 0's cycles over the rounds. kStore: a
// global store by every thread just before each hand-off.
template <int kWay, bool kStore>
__global__ void __cluster_dims__(2, 1, 1)
    handoff(int iters, float* sink, long long* clocks, float* out) {
  __shared__ float part[2][kFloats];
  __shared__ alignas(8) uint64_t bars[2];
  uint32_t rank, peer;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  peer = rank ^ 1u;
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&bars[b])));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync();
  float acc = 0.0f;
  const long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
    float* mine = part[i & 1];
    mine[2 * threadIdx.x] = acc + static_cast<float>(i);
    mine[2 * threadIdx.x + 1] = static_cast<float>(rank);
    if (kStore) sink[(blockIdx.x * kThreads + threadIdx.x) * 2 + (i & 1)] = acc;
    if (kWay == kBarrier) {
      cluster_sync();
    } else if (kWay == kBarrierRelaxed) {
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
      asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
    } else {
      __syncthreads();  // the block's writes, before thread 0's release covers them
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
                         rank_addr(&bars[i & 1], peer))
                     : "memory");
      wait_parity(&bars[i & 1], (i >> 1) & 1);
    }
    acc += load_peer(&mine[(2 * threadIdx.x + 37) % kFloats], peer);
  }
  const long long t1 = clock64();
  cluster_sync();  // no block leaves while its peer may still read it
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

template <int kWay, bool kStore>
double median_cycles(int blocks, int iters, float* sink, long long* clocks, float* out) {
  handoff<kWay, kStore><<<blocks, kThreads>>>(iters, sink, clocks, out);  // warm
  handoff<kWay, kStore><<<blocks, kThreads>>>(iters, sink, clocks, out);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    std::exit(1);
  }
  std::vector<long long> host(blocks);
  cudaMemcpy(host.data(), clocks, blocks * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(host.begin(), host.end());
  return static_cast<double>(host[blocks / 2]) / iters;
}

template <int kWay>
void report(int blocks, float* sink, long long* clocks, float* out) {
  std::printf("%-44s", kWayNames[kWay]);
  for (int iters : {1, 64})
    for (bool store : {false, true}) {
      const double c = store ? median_cycles<kWay, true>(blocks, iters, sink, clocks, out)
                             : median_cycles<kWay, false>(blocks, iters, sink, clocks, out);
      std::printf(" %10.1f", c);
    }
  std::printf("\n");
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms / 2 * 2;  // one block an SM, two a cluster
  float *sink, *out;
  long long* clocks;
  cudaMalloc(&sink, sizeof(float) * blocks * kThreads * 2);
  cudaMalloc(&out, sizeof(float) * blocks * kThreads);
  cudaMalloc(&clocks, sizeof(long long) * blocks);
  std::printf("cycles a hand-off (median of %d blocks, thread 0's clock), %d threads a block\n",
              blocks, kThreads);
  std::printf("%-44s %10s %10s %10s %10s\n", "way", "1 round", "+ store", "64 rounds", "+ store");
  report<kBarrier>(blocks, sink, clocks, out);
  report<kBarrierRelaxed>(blocks, sink, clocks, out);
  report<kMbarrier>(blocks, sink, clocks, out);
  cudaFree(sink), cudaFree(out), cudaFree(clocks);
  return 0;
}
