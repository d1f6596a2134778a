// Private to kernels/matmul: the Hopper (sm_90a) pieces the wgmma prefill kernels share: wgmma
// with A from registers (the mma.sync A fragment of each warp's m16 tile) and B from shared memory,
// its fences, and the stage pipelines of bulk copies (kernels/bulk_copy.cuh) they read. PTX ISA
// names; only code compiled for sm_90a may call them.
#pragma once

#include <cstdint>

#include "kernels/bulk_copy.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

// Shared-memory matrix descriptor (PTX ISA, wgmma) of a K-major x tile in xp_offset's layout: start
// address, leading-dimension byte offset (between the two k halves of a step: adjacent 128-byte
// core matrices), stride byte offset (between 8-token groups: 256 bytes), no swizzle; each field in
// 16-byte units.
__device__ __forceinline__ uint64_t b_desc(const void* p) {
  constexpr uint64_t kCore = 128;
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3ffffu) >> 4) | ((kCore >> 4) << 16) | (((2 * kCore) >> 4) << 32);
}

// The descriptor of k16 step s (0..3) of a box of x's rows form (x_rows_offset) as the tensor copy
// left it with the 128-byte swizzle: token n's 64 k at 128 n bytes, its 16-byte piece j at piece
// j ^ (n % 8). wgmma reads that as a K-major operand with the same swizzle (layout type 1): 8-token
// groups 1,024 bytes apart (stride byte offset), step s 32 s bytes into the first row, where the
// hardware applies the swizzle to the addresses it forms (the box 1,024-byte aligned, so the base
// offset is 0; the leading byte offset is unused with the K extent inside the 128-byte span).
__device__ __forceinline__ uint64_t b_desc_rows(const void* box, int s) {
  const uint64_t addr = smem_addr(box) + 32 * s;
  return ((addr & 0x3ffffu) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
// The descriptor of k16 step s of a kernel's staged x of kTokens tokens: in xp_offset's layout
// (steps of kTokens x 32 bytes one after another) or, kRows, in boxes of kXRowsK (four steps) of
// kTokens x 128 bytes.
template <bool kRows, int kTokens>
__device__ __forceinline__ uint64_t x_step_desc(const uint8_t* X, int s) {
  if constexpr (kRows) return b_desc_rows(X + (s / 4) * (kTokens * 128), s % 4);
  return b_desc(X + s * (kTokens * 32));
}
// The rows form's dynamic shared memory, declared 1,024-byte aligned: the swizzle's pattern follows
// the address, and the kernels' boxes sit at multiples of 1,024 bytes from here. Where the runtime
// placed it otherwise the kernel traps rather than multiply misplaced values. (The kernels keep
// their own 128-byte aligned declaration for xp_offset's layout: declared here, or with the
// larger alignment, it changed their code; one extern array declared with two alignments draws
// a warning.)
__device__ __forceinline__ uint8_t* rows_smem() {
  extern __shared__ __align__(1024) uint8_t smem_rows[];
  if (threadIdx.x == 0 && (smem_addr(smem_rows) & 1023u) != 0) __trap();
  return smem_rows;
}

// d += A * B for one k16 step: A the warpgroup's 64 rows from registers (each warp its m16 tile's
// mma A fragment), B 128 tokens x 16 k from shared memory (b_desc). The scale-d predicate is true:
// d accumulates (a chain starts from registers zeroed beforehand, as mma.sync's from +0).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4],
                                                 uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

// The same with 64 tokens (B: 64 tokens x 16 k); d[j] is n8 tile j's mma.sync C fragment.
// kAccumulate false sets the scale-d predicate false: d = A * B, a chain's first step without
// zeroing d first (the same bits as accumulating onto +0: kernel-check compares them with the
// mma.sync kernels).
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], const uint32_t (&a)[4],
                                                uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kAccumulate ? 1 : 0));
}

// The same with 32 tokens (B: 32 tokens x 16 k): the split form's token halves. A row's sums are
// the 64-token instruction's for the same tokens, bit for bit (an output element's dot product
// does not depend on how many columns the instruction computes; kernel-check compares them).
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[4][4], const uint32_t (&a)[4],
                                                uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kAccumulate ? 1 : 0));
}
// m64nNk16 for the token tiles the kernels take (N = 8 x the n8 tiles of d).
template <bool kAccumulate, int kN8>
__device__ __forceinline__ void wgmma_m64nk16(float (&d)[kN8][4], const uint32_t (&a)[4],
                                              uint64_t b) {
  static_assert(kN8 == 8 || kN8 == 4, "64 or 32 tokens");
  if constexpr (kN8 == 8)
    wgmma_m64n64k16<kAccumulate>(d, a, b);
  else
    wgmma_m64n32k16<kAccumulate>(d, a, b);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N of this warpgroup's committed wgmma groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// A warpgroup gives back registers down to N a thread, or takes more up to N (every warp of the
// warpgroup executes it).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// The bulk copies and their barriers (kernels/bulk_copy.cuh).
using detail::bulk_copy;
using detail::mbar_arrive;
using detail::mbar_arrive_expect_tx;
using detail::mbar_init;
using detail::mbar_init_stages;
using detail::mbar_wait;
using detail::tensor_copy_2d;

// The warp-specialized kernels' pieces (matmul_prefill_wgmma.cu, matmul_prefill_wgmma_fold.cu):
// kStages buffers, each with a "full" barrier the bulk copies complete and an "empty" barrier each
// of the kComputeWarps compute warps arrives on once done with it.
//
// The copy warpgroup's first lane: fills sub-stage q into buffer Q % kStages (fill(q, buffer,
// full barrier)) once use Q - kStages's readers are gone (that phase of its empty barrier), where
// Q = q0 + q counts the block's sub-stages over every tile it has walked (a persistent block's
// ring runs on from tile to tile; q0 = 0 for one tile a block).
template <int kStages, typename Fill>
__device__ __forceinline__ void copy_stages(int n_sub, uint8_t* smem, int stage_bytes,
                                            uint64_t* full, uint64_t* empty, Fill&& fill,
                                            int q0 = 0) {
  for (int q = 0; q < n_sub; ++q) {
    const int Q = q0 + q, b = Q % kStages;
    if (Q >= kStages) mbar_wait(empty + b, (Q / kStages - 1) & 1);
    fill(q, smem + b * stage_bytes, full + b);
  }
}

// The copy warpgroup's part (its warps kCompute / 32 ..) in the Q4_K kernel, which has both
// schedules: one lane of its first warp fills every sub-stage with fill_one(q, buffer, full
// barrier), or with kLaneCopies every lane of that warp waits for the buffer and issues its
// share, fill_lanes(q, buffer, full barrier, lane).
template <int kStages, int kCompute, bool kLaneCopies, typename FillOne, typename FillLanes>
__device__ __forceinline__ void run_copies(int warp, int lane, int n_sub, uint8_t* smem,
                                           int stage_bytes, uint64_t* full, uint64_t* empty,
                                           FillOne&& fill_one, FillLanes&& fill_lanes) {
  if constexpr (kLaneCopies) {
    if (warp == kCompute / 32) {
      copy_stages<kStages>(
          n_sub, smem, stage_bytes, full, empty,
          [&](int q, uint8_t* stage, uint64_t* bar) { fill_lanes(q, stage, bar, lane); });
    }
  } else if (warp == kCompute / 32 && lane == 0) {
    copy_stages<kStages>(n_sub, smem, stage_bytes, full, empty, fill_one);
  }
}

// y = total * xinv for warp `warp`'s m16 tile (rows 16 warp.. of the block's) over the block's kBN
// tokens: total in the wgmma accumulator's order (n8 tile j in total[4j .. 4j + 3], mma.sync's C
// layout).
template <int kBN>
__device__ __forceinline__ void store_tile(const MatmulArgs& a, const float (&total)[kBN / 2],
                                           int row0, int tok0, int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + warp * 16 + g + 8 * (i >> 1);
      const int tok = tok0 + 8 * j + 2 * t + (i & 1);
      if (row < a.n_out && tok < a.n_tokens)
        a.y[static_cast<int64_t>(tok) * a.ldy + row] = total[4 * j + i] * a.xinv[tok];
    }
  }
}

}  // namespace memra::kernels::matmul_detail
