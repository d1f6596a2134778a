// Private helpers shared by the kernels' .cu files: grid sizing for 64-bit element counts,
// host-side argument checks that throw memra::Error, and exact f16/bf16 bit decoding.
// Not part of the kernels.h contract.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/error.h"

// Defined in the compilation passes that emit sm_90 (Hopper) code: the passes where a kernel may
// use bulk and tensor copies, mbarrier waits and clusters. Device functions built on them trap in
// the other passes; the host launches such kernels only where the device runs their sm_90 code.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MEMRA_SM90_CODE 1
#endif

namespace memra::kernels::detail {

constexpr int kThreads = 256;  // block size of the simple elementwise kernels
// Cap on blocks of a grid-stride launch: enough to fill any current GPU many times over, far
// below gridDim.x's 2^31 - 1 limit, so any int64 element count works.
constexpr int64_t kMaxGridBlocks = int64_t{1} << 20;

inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks);
}

// Throws Error(invalid_argument) naming the kernel when a size is negative.
inline void require_non_negative(const char* kernel, int64_t value, const char* name) {
  if (value < 0) fail(ErrorCode::invalid_argument, "{}: {} is negative ({})", kernel, name, value);
}

// A generic pointer into shared memory as the 32-bit shared-window address PTX instructions take
// (ldmatrix, cp.async, mbarrier, wgmma descriptors).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Raises a kernel's dynamic shared memory limit once per device: the attribute call costs as much
// host time as a launch, and decode steps launch hundreds of kernels that need it. Errors surface
// at the caller's next launch check, as for the launch itself.
template <typename Kernel>
void allow_smem_once(Kernel kernel, int bytes, std::atomic<uint64_t>& devices_done) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return;
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (devices_done.load(std::memory_order_acquire) & bit) return;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
      cudaSuccess)
    devices_done.fetch_or(bit, std::memory_order_release);
}

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// IEEE half -> float from the raw bits, bit-identical to core/half.h's f16_to_f32 (NaN payloads
// kept, which the hardware conversion does not promise).
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u) {
    const uint32_t bits = (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u |
                          (static_cast<uint32_t>(h & 0x3ffu) << 13);
    return __uint_as_float(bits);
  }
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));  // exact for finite values, subnormals too
  return f;
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// The largest of a block's kBlock threads' m, in every thread (warp_max: kBlock / 32 floats of
// shared memory; one block barrier). fmaxf: a NaN never wins, and the result is exact in any
// order, so any reduction tree gives the same bits.
template <int kBlock>
__device__ __forceinline__ float block_max(float m, float* warp_max) {
  static_assert(kBlock % 32 == 0 && kBlock <= 1024, "whole warps");
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  m = warp_max[0];
#pragma unroll
  for (int w = 1; w < kBlock / 32; ++w) m = fmaxf(m, warp_max[w]);
  return m;
}

// Little-endian u16 from a possibly only 2-byte aligned address (quant block fields).
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

}  // namespace memra::kernels::detail
