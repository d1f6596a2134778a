// Private helpers shared by the kernels' .cu files: the Hopper (sm_90) bulk copies (cp.async.bulk,
// global -> shared) and the mbarriers they complete on. PTX ISA names; only code compiled for
// sm_90 or later may call them (the launchers pick these kernels on such devices only). Not tied
// to wgmma: the cluster decode kernel stages x with them too.
#pragma once

#include <cstdint>

#include "kernels/common.cuh"

namespace memra::kernels::detail {

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Thread 0 of the block: n stage barriers of `arrivals` arrivals each, made visible to the copy
// engine. The caller then syncs the block before anyone waits on them.
__device__ __forceinline__ void mbar_init_stages(uint64_t* bars, int n, int arrivals = 1) {
  for (int i = 0; i < n; ++i) mbar_init(bars + i, arrivals);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also tells the barrier how many bytes the phase's bulk copies bring.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// One plain arrival (release at CTA scope): a consumer warp is done with the stage.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Waits until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// The same wait with acquire at cluster scope: for a phase that other blocks' asynchronous stores
// (st.async, cluster.cuh) complete, whose data it makes visible.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Global -> shared bulk copy (bytes a multiple of 16, both ends 16-byte aligned) that completes
// `bytes` of the mbarrier's transaction count.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, int bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Global -> shared copy of one box of a 2-D tensor map (cuTensorMapEncodeTiled; the map in kernel
// parameter, constant or global memory) at element coordinates (c0 innermost, c1), completing the
// box's bytes on the mbarrier; elements past the tensor's ends arrive as zeros and count all the
// same. dst: 128-byte aligned (1024 for a 128-byte swizzle, whose pattern follows the address).
__device__ __forceinline__ void tensor_copy_2d(void* dst, const void* map, int c0, int c1,
                                               uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

// Brings a tensor map (map: its generic address, a __grid_constant__ parameter's or global
// memory's) into the cache the copies read descriptors from, so a kernel's first copy through it
// does not wait for the descriptor's fetch. A hint: no effect on what the copies do.
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// The same for one box of a 3-D tensor map at element coordinates (c0 innermost, c1, c2).
__device__ __forceinline__ void tensor_copy_3d(void* dst, const void* map, int c0, int c1, int c2,
                                               uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

}  // namespace memra::kernels::detail
