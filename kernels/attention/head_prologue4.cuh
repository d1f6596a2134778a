// Private to kernels/attention: the attention prologue's arithmetic on one 128-dim, fully rotated
// head held four elements a lane (lane l: elements 4l .. 4l + 3), shared by qk_prologue.cu's
// four-a-lane kernel and the decode kernel's prologue form (decode_prologue.cuh), so that both
// give the same bits. The sum of squares is the norm kernel's, step for step: lane l's chunk is
// the one the norm kernel's thread l owns, its four squares added in order, then the warp's xor
// butterfly (qk_prologue.cu's header says why that is rms_norm's order); each rotated value is
// rope_rotate's on the same operands.
#pragma once

#include <cstdint>

#include "kernels/attention/cache_convert.cuh"
#include "kernels/elementwise/norm_math.cuh"
#include "kernels/rope/rope_table.cuh"

namespace memra::kernels::detail {

constexpr int kHeadDim4 = 128;

// The angles lane l's rotations take from a token's cos and sin tables (64 entries each): neox
// (pairs (i, i + 64)), entries 4 (l % 16) .. + 3, one for each of the lane's elements; normal
// (pairs (2i, 2i + 1)), entries 2l and 2l + 1 in c[0..1] and s[0..1].
struct LaneAngles4 {
  float c[4], s[4];
};
__device__ __forceinline__ LaneAngles4 lane_angles4(const float* cos_t, const float* sin_t,
                                                    bool neox, int lane) {
  LaneAngles4 a{};
  if (neox) {
    const int e = 4 * (lane & 15);
    const float4 c4 = *reinterpret_cast<const float4*>(cos_t + e);
    const float4 s4 = *reinterpret_cast<const float4*>(sin_t + e);
    a.c[0] = c4.x, a.c[1] = c4.y, a.c[2] = c4.z, a.c[3] = c4.w;
    a.s[0] = s4.x, a.s[1] = s4.y, a.s[2] = s4.z, a.s[3] = s4.w;
  } else {
    const float2 c2 = *reinterpret_cast<const float2*>(cos_t + 2 * lane);
    const float2 s2 = *reinterpret_cast<const float2*>(sin_t + 2 * lane);
    a.c[0] = c2.x, a.c[1] = c2.y;
    a.s[0] = s2.x, a.s[1] = s2.y;
  }
  return a;
}

// The lane's four elements v normed in place with weights w (lane l's w[4l .. 4l + 3]; has_w
// false: no norm, v as is; warp-wide either way, every lane calls it), then rotated into out.
__device__ __forceinline__ void norm_rope4(float (&v)[4], bool has_w, float4 w, float eps,
                                           const LaneAngles4& a, bool neox, int lane,
                                           float (&out)[4]) {
  if (has_w) {
    float total = 0.0f;
    total += warp_butterfly_sum(add_squares(0.0f, v, 4));
    const float inv = inv_rms(total, kHeadDim4, eps);
    v[0] = norm_out_w(v[0], inv, w.x, true);
    v[1] = norm_out_w(v[1], inv, w.y, true);
    v[2] = norm_out_w(v[2], inv, w.z, true);
    v[3] = norm_out_w(v[3], inv, w.w, true);
  }
  if (neox) {  // lane l < 16 holds the first of pairs 4l .., lane l + 16 the second
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float other = __shfl_xor_sync(0xffffffffu, v[j], 16);
      out[j] = lane < 16 ? rope_rotate(v[j], other, a.c[j], a.s[j]).x
                         : rope_rotate(other, v[j], a.c[j], a.s[j]).y;
    }
  } else {  // pairs (2i, 2i + 1): the lane's own elements
    const float2 r0 = rope_rotate(v[0], v[1], a.c[0], a.s[0]);
    const float2 r1 = rope_rotate(v[2], v[3], a.c[1], a.s[1]);
    out[0] = r0.x, out[1] = r0.y, out[2] = r1.x, out[3] = r1.y;
  }
}

// Four values as a 16-bit cache stores them (to_cache's bits), packed in element order: what
// lane l writes at elements 4l .. 4l + 3 of a cache row in one 8-byte store.
template <typename T>
__device__ __forceinline__ uint2 pack4_cache16(const float (&f)[4]) {
  static_assert(sizeof(T) == 2, "a 16-bit cache element");
  uint32_t b[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const T v = to_cache<T>(f[j]);
    b[j] = *reinterpret_cast<const uint16_t*>(&v);
  }
  return make_uint2(b[0] | b[1] << 16, b[2] | b[3] << 16);
}

}  // namespace memra::kernels::detail
