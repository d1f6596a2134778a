// Private to kernels/: the asynchronous global-to-shared copies (cp.async, sm_80+) that the
// attention kernels and the attention prologue stage rows with. (The matrix kernels keep their
// own zero-filling form, matmul/mma_util.cuh.)
#pragma once

#include "kernels/common.cuh"

namespace memra::kernels::detail {

// 16 bytes from global to shared memory asynchronously (cp.async, sm_80+; both 16-byte aligned),
// cached in L2 only; a thread's copies since its last commit form one group.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits for every one of this thread's cp.async copies.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

}  // namespace memra::kernels::detail
