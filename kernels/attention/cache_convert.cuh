// Private to kernels/attention: KV cache elements to and from f32. to_cache: an f32 value as the
// cache stores it (f32 as is, f16 and bf16 rounded to nearest even, fp8 e4m3 rounded to nearest
// even and saturated), shared by kv_store and the fused attention prologue so both write the same
// bits. cvt_word / load_cvt: staged cache elements back to f32, exactly, for the attention kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace memra::kernels::detail {

// Calls f(CT{}) with the device element type CT of a KV cache dtype (float, __half,
// __nv_bfloat16, __nv_fp8_e4m3): the one place kv_store, the fused prologue and attention map a
// cache's dtype to the type their kernels are instantiated for. Other dtypes are refused by name,
// `what` naming the caller.
template <typename F>
void with_cache_type(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    case DType::f8_e4m3:
      return f(__nv_fp8_e4m3{});
    default:
      fail(ErrorCode::unsupported,
           "{}: KV cache type {} is not supported (F32, F16, BF16, F8_E4M3)", what,
           dtype_name(dtype));
  }
}

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
// FP8 without a scale, as vLLM's unscaled fp8 cache (its k_scale = v_scale = 1): a per-tensor
// scale needs calibration data or a running amax, and a multiply on every read, while E4M3's
// range (2^-9 to 448) holds K and V activations as they usually are (measured: a per-row scale
// recovered little of the 3 mantissa bits' cost, docs/PERFORMANCE.md fifteenth round). What
// falls outside: magnitudes past 448 (Inf too) saturate to +-448, where plain rounding
// would give NaN (E4M3 spends its top code on NaN, it has no Inf); those at most 2^-10 flush to a
// signed zero; NaN stays NaN. core/fp8.h is the host's bit-exact copy of this conversion.
template <>
__device__ __forceinline__ __nv_fp8_e4m3 to_cache<__nv_fp8_e4m3>(float v) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  return r;
}

// Two fp8 e4m3 cache elements (low byte first) -> f32, exactly (e4m3 -> f16 is exact, one
// cvt.rn.f16x2.e4m3x2 on sm_89 and later).
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t w) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w), __NV_E4M3);
  return __half22float2(__half2(h));
}

// Cache elements -> f32, exactly. w holds one f32, two f16 / bf16 or four fp8 (low bytes first).
template <typename CT>
__device__ __forceinline__ void cvt_word(uint32_t w, float* out) {
  if constexpr (sizeof(CT) == 4) {
    out[0] = __uint_as_float(w);
  } else if constexpr (sizeof(CT) == 1) {
    static_assert(std::is_same_v<CT, __nv_fp8_e4m3>, "fp8 e4m3 is the one 1-byte cache type");
    const float2 lo = fp8x2_to_float2(static_cast<uint16_t>(w & 0xffffu));
    const float2 hi = fp8x2_to_float2(static_cast<uint16_t>(w >> 16));
    out[0] = lo.x;
    out[1] = lo.y;
    out[2] = hi.x;
    out[3] = hi.y;
  } else if constexpr (std::is_same_v<CT, __half>) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w));
    out[0] = f.x;
    out[1] = f.y;
  } else {
    out[0] = __uint_as_float(w << 16);
    out[1] = __uint_as_float(w & 0xffff0000u);
  }
}

// N consecutive cache elements at p (shared memory, aligned to their byte size) -> f32. The
// V phase's per-thread dims (kDimsV) make every size from 16 bytes down to one element occur.
template <typename CT, int N>
__device__ __forceinline__ void load_cvt(const unsigned char* p, float* out) {
  constexpr int kBytes = N * static_cast<int>(sizeof(CT));
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(CT));
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 w = reinterpret_cast<const uint4*>(p)[i];
      cvt_word<CT>(w.x, out + (4 * i + 0) * kPerWord);
      cvt_word<CT>(w.y, out + (4 * i + 1) * kPerWord);
      cvt_word<CT>(w.z, out + (4 * i + 2) * kPerWord);
      cvt_word<CT>(w.w, out + (4 * i + 3) * kPerWord);
    }
  } else if constexpr (kBytes == 8) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    cvt_word<CT>(w.x, out);
    cvt_word<CT>(w.y, out + kPerWord);
  } else if constexpr (kBytes == 4) {
    cvt_word<CT>(*reinterpret_cast<const uint32_t*>(p), out);
  } else if constexpr (sizeof(CT) == 1) {
    static_assert(kBytes == 2 || kBytes == 1, "one or two fp8 elements");
    if constexpr (kBytes == 2) {
      const float2 f = fp8x2_to_float2(*reinterpret_cast<const uint16_t*>(p));
      out[0] = f.x;
      out[1] = f.y;
    } else {
      out[0] = fp8x2_to_float2(*p).x;
    }
  } else {
    static_assert(kBytes == 2, "one 16-bit element");
    const uint16_t h = *reinterpret_cast<const uint16_t*>(p);
    if constexpr (std::is_same_v<CT, __half>) {
      out[0] = __half2float(__ushort_as_half(h));
    } else {
      out[0] = __uint_as_float(static_cast<uint32_t>(h) << 16);
    }
  }
}

}  // namespace memra::kernels::detail
