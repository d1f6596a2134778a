// Private to kernels/attention: an f32 value as the KV cache stores it (f32 as is, f16 and bf16
// rounded to nearest even), shared by kv_store and the fused attention prologue so both write the
// same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace memra::kernels::detail {

template <typename T>
__device__ __forceinline__ T to_cache(float v);
template <>
__device__ __forceinline__ float to_cache<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_cache<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half to_cache<__half>(float v) {
  return __float2half_rn(v);
}

}  // namespace memra::kernels::detail
