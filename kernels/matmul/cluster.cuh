// Private to kernels/matmul: thread block cluster pieces (sm_90a) for kernels whose blocks share
// what they stage: a cluster-wide barrier, an mbarrier arrival on another block's barrier, and a
// bulk copy that lands in every block of the cluster at once (multicast). PTX ISA names; only code
// compiled for sm_90a may call them.
#pragma once

#include <cstdint>

#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_size() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// Every thread of every block of the cluster arrives and waits (release / acquire at cluster
// scope): what each block did before it (mbarrier initialization included) is visible to all.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
// One arrival (release at cluster scope) on the mbarrier at bar's offset in block `rank` of the
// cluster.
__device__ __forceinline__ void mbar_arrive_remote(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote)
               : "memory");
}
// Waits (acquire at cluster scope) for the barrier's phase with this parity: its arrivals may come
// from other blocks of the cluster.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Global -> shared bulk copy into the same offset of every block in `mask` (bit i: cluster rank
// i), each completing `bytes` of its own mbarrier at bar's offset.
__device__ __forceinline__ void bulk_copy_multicast(void* dst, const void* src, int bytes,
                                                    uint64_t* bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1], %2, [%3], %4;\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "h"(mask)
      : "memory");
}
// Named barrier `id` (1..15; 0 is __syncthreads') over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace memra::kernels::matmul_detail
