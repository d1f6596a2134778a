// Private to kernels/matmul: where a one-token product's blocks (the one-token kernel,
// decode_single_block.cuh; the tiled decode kernel's F16/BF16 at one token tile,
// matmul_decode_tiled.cu) take x from. XPrepared reads x's prepared form (prepare_x.cuh: the f16
// row and its group sums), which an x_to_f16 launch or the norm before wrote. XRaw reads the f32
// row itself, whose kernel handed the products the largest |x| of each of its parts (row_max.h:
// Handed::part_max), and makes each fragment and group sum from it with x_to_f16's steps: the row's
// scale from its largest |x|, each element times it rounded to f16, a group's rounded values summed
// in half_sum's tree order (prepare_x.cuh). So both give the mma the same operands, and the
// products the same bits (kernel-check compares them), and a product reading x raw needs no
// x_to_f16 launch before it.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/matmul/decode_common.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/mma_util.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels::matmul_detail {

// A chunk's 16 B fragments of column 0 as a kernel's mma steps read them (xf[st]): held in
// registers (Column0Regs), or left in the warp's shared memory and loaded at each step (Column0Row:
// XRaw's stage form, Column0::stage; loaded all at once, before the decoding, they and the Q4_K
// kernel's decoding would not fit its 80 registers: ptxas spilled).
struct Column0Regs {
  uint2 f[kChunk / 16];
  __device__ __forceinline__ uint2 operator[](int st) const { return f[st]; }
};
struct Column0Row {
  const uint2* row;  // the lane's row of the stage: step st's fragment at row[st]
  __device__ __forceinline__ uint2 operator[](int st) const { return row[st]; }
};

struct XPrepared {
  const MatmulArgs& a;  // x row 0 of a's prepared form

  // The view a kernel's first round reads x through (XRaw's may hold that chunk already).
  __device__ __forceinline__ const XPrepared& first_round() const { return *this; }

  // The lane's B fragment of k16 step s of the chunk at k0: elements k0 + 16 s + 4 t .. + 3 (i:
  // which of the lane's fragments of the chunk it is, for XRawFirstOf).
  __device__ __forceinline__ uint2 frag(int k0, int t, int s, int /*i*/) const {
    return x_frag(a, 0, 0, t, k0, s, kChunk / 16);
  }
  // The token's 16 B fragments of the chunk at k0 in column 0's lanes (g == 0), zeros elsewhere:
  // the tiled decode kernel's one token tile (matmul_decode_tiled.cu), x_frag's loads as it had
  // them.
  __device__ __forceinline__ Column0Regs column0_frags(int k0, int lane) const {
    Column0Regs xf;
#pragma unroll
    for (int s = 0; s < kChunk / 16; ++s)
      xf.f[s] = x_frag(a, 0, lane >> 2, lane & 3, k0, s, kChunk / 16);
    return xf;
  }
  // The folded types' operands of the chunk at k0 (tiled_chunk.cuh: fold_partial), the token in
  // column 0: its 16 steps' B fragments in column 0's lanes (g == 0) and the mins step's B
  // fragment (bias_b); zeros in the other lanes. (Plain loads, as fold_partial had them: frag's
  // token check is always true here, and keeping it out keeps the kernel's code as it was.)
  __device__ __forceinline__ Column0Regs fold_operands(int k0, int lane, uint2& bb) const {
    const int g = lane >> 2, t = lane & 3;
    Column0Regs xf;
#pragma unroll
    for (int st = 0; st < kChunk / 16; ++st)
      xf.f[st] = g == 0 ? __ldg(reinterpret_cast<const uint2*>(a.xh + k0 + 4 * t + 16 * st))
                        : make_uint2(0u, 0u);
    bb = bias_b(g == 0 ? a.xsum : nullptr, k0 / kChunk, t);
    return xf;
  }
};

// The two float4s of a warp's first chunk of x that a lane's partial reads, loaded right after the
// kernel's wait, before the partial maxima (load_raw_first): the chunk's loads then fly beside
// the maxima's instead of after them, one L2 round trip off the first chunk's chain
// (the default since the sixty-seventh round; MEMRA_RAW_X_EARLY=0: after them). Column 0's forms
// read float4s L and L + 32 (lane_halves), the columns types a lane's two fragments in
// columns_partial's order (decode_single_block.cuh: load_first_x). k0 < 0: none loaded.
struct RawFirst {
  int k0 = -1;
  float4 v[2];
};

// Float4s f0 and f1 of the chunk at k0 of row, where `load`.
__device__ __forceinline__ RawFirst load_raw_first(const float* row, int k0, int f0, int f1,
                                                   bool load) {
  RawFirst f;
  if (load) {
    const float4* src = reinterpret_cast<const float4*>(row + k0);
    f.k0 = k0;
    f.v[0] = __ldg(src + f0);
    f.v[1] = __ldg(src + f1);
  }
  return f;
}

// How XRaw hands column 0's lanes their fragments of a chunk from the lanes that hold them.
// shuffle: 32 shuffles a chunk (MEMRA_RAW_X_STAGE=0). stage (the default since the seventieth
// round: 8B Q4_K_M c1 +1.3-1.7% on an H100): a transpose through the warp's shared memory, two
// 8-byte stores a lane, then an 8-byte load a step at the step's mma (Column0Row), every column
// lane taking column 0's fragments (the mma's columns are independent, so column 0's sums are the
// same bits, and no lane's fragments need zeroing). A shuffle goes through the SM's shared-memory
// pipe at one warp instruction a cycle: 32 a chunk against 20 wavefronts for the transpose (each
// load reads four rows' 8 bytes, broadcast), and the 32 selects of the zeros go.
enum class Column0 : uint8_t { shuffle, stage };

// The stage form's shared memory: a row per column-0 lane t of kStageRowSlots fragments (16 used),
// the four rows kColumn0StageSlots uint2s a warp. A row of 20 slots (160 bytes) keeps the stores
// (half a warp: rows 0..3 x slots 0..3, 8 bytes each) and the loads (row t's slot st, every t)
// free of bank conflicts; 16 slots would put the four rows' loads in the same banks.
inline constexpr int kStageRowSlots = 20;
inline constexpr int kColumn0StageSlots = 4 * kStageRowSlots;

template <Column0 kC0>
struct XRawFirstOf;

template <Column0 kC0>
struct XRawOf {
  const float* row;  // n_in floats, 16-byte aligned
  float scale;       // row_scale's 2^shift
  RawFirst first;    // the warp's first chunk where it was loaded early
  uint2* stage;      // Column0::stage: the warp's kColumn0StageSlots in shared memory (else null)
  using Frags = std::conditional_t<kC0 == Column0::stage, Column0Row, Column0Regs>;

  // The view the kernels' first round reads x through (XPrepared's is itself).
  __device__ __forceinline__ XRawFirstOf<kC0> first_round() const { return {*this}; }

  static __device__ __forceinline__ uint2 to_f16(const float4& f, float scale) {
    return make_uint2(pack_f16(f.x * scale, f.y * scale), pack_f16(f.z * scale, f.w * scale));
  }
  // The lane's B fragment of step s (i: which of the lane's fragments of the chunk it is, for
  // XRawFirst).
  __device__ __forceinline__ uint2 frag(int k0, int t, int s, int /*i*/) const {
    return to_f16(__ldg(reinterpret_cast<const float4*>(row + k0 + 4 * t + 16 * s)), scale);
  }
  // XPrepared's column 0 fragments and fold operands made from the row. The chunk's 64 float4s are
  // spread over the warp, lane L holding float4s L and L + 32 (elements 4 L .. 4 L + 3 of the
  // chunk: step L / 4 and 8 + L / 4, lane L % 4 of an mma step), so a lane holds 8 floats where
  // column 0's lanes would hold 64, and column 0's lanes take their fragments from the lanes that
  // hold them.
  // Column0::stage: lane L stores its float4s L and L + 32 (step L / 4 and 8 + L / 4 of column lane
  // L % 4) to row L % 4, and every lane loads row t, the one its column lane t of column 0 holds:
  // the other columns take column 0's fragments.
  __device__ __forceinline__ Frags column0_frags(int lane, const uint2 (&h)[2]) const {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (kC0 == Column0::stage) {
      uint2* const mine = stage + t * kStageRowSlots;
      __syncwarp();  // the warp's loads of the last chunk's rows are done
      mine[g] = h[0];
      mine[8 + g] = h[1];
      __syncwarp();  // the four rows are written
      return {mine};
    } else {
      Column0Regs xf;
#pragma unroll
      for (int st = 0; st < kChunk / 16; ++st) {
        const int from = 4 * (st % 8) + t;  // the lane holding step st's float4 t
        const uint2 f = make_uint2(__shfl_sync(0xffffffffu, h[st / 8].x, from),
                                   __shfl_sync(0xffffffffu, h[st / 8].y, from));
        xf.f[st] = g == 0 ? f : make_uint2(0u, 0u);
      }
      return xf;
    }
  }
  // The float4s of the chunk a lane holds in column 0's forms (column0_frags, fold_operands): L
  // and L + 32.
  static __device__ __forceinline__ int lane_float4(int lane, int i) {
    return lane + 32 * i;
  }
  // Those two of the chunk at k0, in f16.
  __device__ __forceinline__ void lane_halves(int k0, int lane, uint2 (&h)[2]) const {
    static_assert(kChunk == 256, "a chunk is 64 float4s, two a lane");
    const float4* src = reinterpret_cast<const float4*>(row + k0);
    h[0] = to_f16(__ldg(src + lane_float4(lane, 0)), scale);
    h[1] = to_f16(__ldg(src + lane_float4(lane, 1)), scale);
  }
  // Those two loaded early (RawFirst) where `load`.
  static __device__ __forceinline__ RawFirst load_first_halves(const float* row, int k0,
                                                               bool load) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    return load_raw_first(row, k0, lane_float4(lane, 0), lane_float4(lane, 1), load);
  }
  __device__ __forceinline__ Frags column0_frags(int k0, int lane) const {
    uint2 h[2];
    lane_halves(k0, lane, h);
    return column0_frags(lane, h);
  }
  // The group sums too (prepare_x.cuh: half_sum's order). Float4 L is run L % 8 of group L / 8
  // (and float4 L + 32 of group 4 + L / 8): each lane sums its run, and the shuffles across lanes
  // 1, 2, 4 apart add runs into halves and halves into the group, every lane of the eight alike
  // (an add of two values is the same either way round). Column 0's lane t takes the sums of
  // groups 4 (t % 2) .. + 3 from the eight-lane sets, lanes 4 .. 7 of a set handing the second
  // float4's groups.
  __device__ __forceinline__ Frags fold_operands(int k0, int lane, uint2& bb) const {
    uint2 h[2];
    lane_halves(k0, lane, h);
    return fold_operands(lane, h, bb);
  }
  __device__ __forceinline__ Frags fold_operands(int lane, const uint2 (&h)[2], uint2& bb) const {
    const int g = lane >> 2, t = lane & 3;
    const Frags xf = column0_frags(lane, h);
    float sum[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&h[i].x));
      const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&h[i].y));
      sum[i] = run_sum(lo.x, lo.y, hi.x, hi.y);
#pragma unroll
      for (int off = 1; off < 8; off <<= 1)
        sum[i] = __fadd_rn(sum[i], __shfl_xor_sync(0xffffffffu, sum[i], off));
    }
    const float handed = (lane & 4) ? sum[1] : sum[0];
    float mine[4];  // lane t of column 0: groups 4 (t % 2) .. + 3
#pragma unroll
    for (int q = 0; q < 4; ++q) mine[q] = __shfl_sync(0xffffffffu, handed, 8 * q + 4 * (t & 1));
    const uint2 b = bias_b_of(make_float4(mine[0], mine[1], mine[2], mine[3]), t);
    // (Every column's lane t holds column 0's: the stage form keeps them, as it does xf.)
    bb = (kC0 == Column0::stage || g == 0) ? b : make_uint2(0u, 0u);
    return xf;
  }
};

// The name the kernels' static helpers go by (to_f16, load_first_halves: alike in either form).
using XRaw = XRawOf<Column0::shuffle>;

// XRaw for a warp's first round: the chunk's float4s from RawFirst where they were loaded early
// (the round's chunk is always that one), else loaded as XRaw does. The scale is the same, so the
// same operands either way.
template <Column0 kC0>
struct XRawFirstOf {
  const XRawOf<kC0>& x;

  __device__ __forceinline__ void lane_halves(int k0, int lane, uint2 (&h)[2]) const {
    if (x.first.k0 == k0) {
      h[0] = XRawOf<kC0>::to_f16(x.first.v[0], x.scale);
      h[1] = XRawOf<kC0>::to_f16(x.first.v[1], x.scale);
    } else {
      x.lane_halves(k0, lane, h);
    }
  }
  __device__ __forceinline__ uint2 frag(int k0, int t, int s, int i) const {
    return x.first.k0 == k0 ? XRawOf<kC0>::to_f16(x.first.v[i], x.scale) : x.frag(k0, t, s, i);
  }
  __device__ __forceinline__ typename XRawOf<kC0>::Frags column0_frags(int k0, int lane) const {
    uint2 h[2];
    lane_halves(k0, lane, h);
    return x.column0_frags(lane, h);
  }
  __device__ __forceinline__ typename XRawOf<kC0>::Frags fold_operands(int k0, int lane,
                                                                       uint2& bb) const {
    uint2 h[2];
    lane_halves(k0, lane, h);
    return x.fold_operands(lane, h, bb);
  }
};

// A block's XRaw of x row `row` from its n_parts partial maxima (kernels/row_max.h): each warp
// takes their largest (exact in any order, as x_to_f16's block maximum), and the scale from it as
// row_scale does; thread 0 writes the inverse to *inv, which the block's writes read after its
// barrier.
// first: the warp's first chunk, where the kernel loaded it before calling this (RawFirst).
// stage: Column0::stage's kColumn0StageSlots for this warp.
template <Column0 kC0 = Column0::shuffle>
__device__ __forceinline__ XRawOf<kC0> raw_x(const float* row, const float* parts, int n_parts,
                                             float* inv, const RawFirst& first = {},
                                             uint2* stage = nullptr) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float m = 0.0f;
  for (int i = lane; i < n_parts; i += 32) m = fmaxf(m, __ldg(parts + i));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  return {row, row_scale(m, 0, inv), first, stage};
}

}  // namespace memra::kernels::matmul_detail
