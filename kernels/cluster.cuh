// Private helpers shared by the kernels' .cu files: thread block cluster pieces (sm_90) for
// kernels whose blocks share what they hold: the block's rank, the cluster's size, cluster-wide
// barriers (whole, or split into an arrival and a wait), and loads from and stores to another
// block's shared memory (distributed shared memory). PTX ISA names; only code compiled for sm_90 or
// later may call them (the launchers pick these kernels on such devices only).
#pragma once

#include <cstdint>

#include "kernels/common.cuh"

namespace memra::kernels::detail {

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
// This thread's arrival at the cluster barrier (release at cluster scope: its writes, shared
// memory included, are visible to every block of the cluster once the barrier completes).
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
// The same arrival without release: for a thread whose shared-memory reads of other blocks are
// done (their values used), telling their owners they may exit.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
// Until every thread of every block of the cluster has arrived (acquire at cluster scope).
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Every thread of every block of the cluster arrives and waits: what each block did before it
// (mbarrier initialization included) is visible to all.
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
// p's offset in block `rank`'s shared memory as a shared::cluster address (p: this block's shared
// memory; every block of the kernel lays its shared memory out alike).
__device__ __forceinline__ uint32_t cluster_addr(const void* p, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(smem_addr(p)), "r"(rank));
  return remote;
}
// The float at p's offset in block `rank`'s shared memory (p: this block's shared memory).
__device__ __forceinline__ float load_cluster_f32(const float* p, uint32_t rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n"
               : "=f"(v)
               : "r"(cluster_addr(p, rank))
               : "memory");
  return v;
}

// Stores into a block's shared memory (cluster_addr's `dst`) that complete their bytes on that
// block's mbarrier (`bar`, cluster_addr's too): no fence before them, and the owner's wait on the
// barrier's phase (mbar_wait_cluster) is what makes them visible.
__device__ __forceinline__ void store_async_f32(uint32_t dst, float v, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(dst),
      "f"(v), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void store_async_f32x2(uint32_t dst, float x, float y, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(
          dst),
      "f"(x), "f"(y), "r"(bar)
      : "memory");
}

}  // namespace memra::kernels::detail
