// Private to kernels/matmul: thread block cluster pieces (sm_90a) for kernels whose blocks share
// what they stage, beside kernels/cluster.cuh's (rank, size, barriers): an mbarrier arrival on
// another block's barrier, and a bulk copy that lands in every block of the cluster at once
// (multicast). PTX ISA names; only code compiled for sm_90a may call them.
#pragma once

#include <cstdint>

#include "kernels/cluster.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

using detail::cluster_addr;
using detail::cluster_rank;
using detail::cluster_size;
using detail::cluster_sync;

// One arrival on the mbarrier at bar's offset in block `rank` of the cluster: a reader telling the
// block whose copies refill this buffer that it is done with it. Release at CTA scope, as CUTLASS's
// consumer release: the reads it orders were shared-memory loads whose values the thread has
// already used; release at cluster scope is a full memory barrier, measured as the kernel's largest
// stall (ncu: 3.5 cycles an instruction waiting on it).
__device__ __forceinline__ void mbar_arrive_remote(uint64_t* bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr(bar, rank))
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
