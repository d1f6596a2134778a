// The thread block cluster pieces the cluster probes share (tools/probes/cluster_*.cu): standalone
// PTX wrappers, since a probe builds with nvcc alone on the GPU box, where the project's headers
// (kernels/cluster.cuh, kernels/bulk_copy.cuh: the kernels' own) would need fmt's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace probe {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// p's offset in block `rank`'s shared memory as a shared::cluster address.
__device__ __forceinline__ uint32_t rank_addr(const void* p, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The cluster barrier: arrival with release, wait with acquire.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Until the phase of `bar` (this block's) with the parity completes, acquiring at cluster scope.
__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace probe
