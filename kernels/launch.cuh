// Private to kernels/: how every kernel is launched. On Hopper a launch may be programmatic
// (programmatic dependent launch, PDL): the runtime starts the next kernel's blocks while the one
// before it is still finishing, as soon as that one's blocks have all started, so a decode step's
// hundreds of small dependent launches stop paying a launch gap and a ramp each.
//
// The contract that keeps this exact: every kernel calls wait_for_inputs() before its first read
// of anything an earlier kernel wrote and before its first write (griddepcontrol.wait returns once
// every earlier grid has completed and its memory is visible: the same ordering as a plain stream,
// only the launch overlaps). Only constant inputs (weights, kernel parameters) may be touched
// before it: the decode products load their first round of weights there (EarlyChunk,
// kernels/matmul/tiled_chunk.cuh; docs/PERFORMANCE.md twenty-third round), the one statement
// scripts/check_kernels.py lets a kernel run before its wait. Kernels call it unconditionally, so a
// kernel launched without PDL (sm_80, or MEMRA_PDL=0) behaves exactly as before: the instruction
// returns at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace memra::kernels::detail {

// Whether launches on the current device are programmatic: compute capability 9.0 or newer and
// MEMRA_PDL not set to 0 (an A/B switch: the outputs are bit-identical either way).
bool programmatic_launch();

// MEMRA_DIAG_DROP, a measuring instrument and never a mode to run: a list of substrings of kernel
// names, separated by ',' or '+' (e.g. "x_to_f16_kernel+norm_to_f16"). Every launch of a kernel
// whose name contains one of them is skipped, so what reads its outputs reads stale memory and
// every result after it is wrong; what a step's time loses is what those launches cost in place,
// with the overlap programmatic launch gives them (which a serialized profile cannot say). Unset,
// the default: nothing is skipped. The names matched are the mangled ones, which for kernels in
// an anonymous namespace hold their source file's name too ("qk_prologue" matches every kernel of
// qk_prologue.cu): the first skip of each kernel is named on stderr.
bool dropped(const void* kernel);

// Launches kernel<<<grid, block, smem, stream>>>(args...), programmatic where
// programmatic_launch() says so, in thread block clusters of `cluster` blocks where cluster.x > 0
// (each of grid's extents a multiple of cluster's; the kernel's code must be sm_90). Errors surface
// at the caller's next launch check, as for <<<>>>.
template <typename... Params, typename... Args>
void launch_clustered(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, dim3 cluster, Args&&... args) {
  if (dropped(reinterpret_cast<const void*>(kernel))) return;
  cudaLaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (cluster.x > 0) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster.x;
    attrs[n].val.clusterDim.y = cluster.y;
    attrs[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  if (programmatic_launch()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args&&... args) {
  launch_clustered(kernel, grid, block, smem, stream, dim3(0u), std::forward<Args>(args)...);
}

// When a kernel lets the next one in the stream be scheduled (its blocks then wait in
// wait_for_inputs() for this one to finish). early: at the start, the default for small kernels,
// so the next kernel's blocks are resident before this one ends. late: the kernel calls
// let_dependents_start() itself near its end (or implicitly at exit): the decode matmuls, whose one
// wave of blocks must find every SM slot free (measured: early triggers there cost 6% on Qwen3-8B
// Q8_0 decode and 14% at 8 sequences).
enum class Trigger { early, late };

__device__ __forceinline__ void let_dependents_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits for the kernels before this one (griddepcontrol.wait). The first statement of every
// kernel.
__device__ __forceinline__ void wait_for_inputs(Trigger trigger = Trigger::early) {
  if (trigger == Trigger::early) let_dependents_start();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace memra::kernels::detail
