// Private to kernels/matmul: PTX wrappers (cp.async, ldmatrix, mma.sync m16n8k16 f16) and the
// exact small-integer to f16 conversions the weight decoders share. Fragment layouts are the
// PTX ISA's for mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): a[0] = row g cols 2t,2t+1; a[1] = row g+8 same cols; a[2], a[3] = cols +8.
//   B (16x8, col):  b[0] = k 2t,2t+1 of column g; b[1] = k 2t+8,2t+9 of column g.
//   C (16x8 f32):   c[0], c[1] = row g cols 2t,2t+1; c[2], c[3] = row g+8 same cols.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common.cuh"

namespace memra::kernels::matmul_detail {

// The canonical reduction chunk: every output element is the left-to-right f32 sum of partials
// over consecutive 256-element slices of K, each partial an mma chain started from zero.
constexpr int kChunk = 256;

using detail::smem_addr;

// 16-byte global -> shared copy, bypassing L1. src_bytes 0 writes zeros (src must still be a valid
// address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// acc = A * B + acc, one 16x8x16 f16 step with f32 accumulation.
__device__ __forceinline__ void mma_f16(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats to an f16 pair, round-to-nearest-even; `lo` lands in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 p = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ __half2 bits_h2(uint32_t u) {
  return *reinterpret_cast<const __half2*>(&u);
}

// Small unsigned integers to exact f16 pairs without the int->float converter: the f16 with bits
// 0x6400 | u is 1024 + u for u < 1024, so one packed subtraction of 1024 + kOffset gives
// u - kOffset exactly. `pair` holds the two integers in bits 0..9 and 16..25.
template <int kOffset>
__device__ __forceinline__ uint32_t exact_f16x2(uint32_t pair) {
  const __half2 biased = bits_h2(pair | 0x64006400u);
  return h2_bits(__hsub2(
      biased, __half2half2(__ushort_as_half(static_cast<unsigned short>(0x6400u + kOffset)))));
}

// (a & mask) | bits in one LOP3. Written as C, ptxas splits it into two (a LOP3 takes one
// immediate and both operands are constants); here `bits` lives in a register.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// The two bytes of a little-endian 16-bit word moved to bits 0..7 and 16..23 (one per f16 lane).
__device__ __forceinline__ uint32_t spread_bytes(uint32_t word16) {
  return __byte_perm(word16, 0u, 0x4140);
}

// float(q - offset) for 0 <= q < 2^22, exactly, without the slow int->float converter: the bits
// 0x4B000000 | q are the float 2^23 + q, and the subtraction of 2^23 + offset is exact.
template <int kOffset>
__device__ __forceinline__ float exact_float(uint32_t q) {
  return __uint_as_float(0x4B000000u | q) - (8388608.0f + static_cast<float>(kOffset));
}

__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ float ld_f16(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

}  // namespace memra::kernels::matmul_detail
