// Private to kernels/matmul: the tiled weight layout (kernels.h, WeightLayout::tiled). The ggml
// layout makes the decode kernel stage raw blocks in shared memory and pick each lane's quants
// out of them (~12 instructions a weight, measured: instruction-bound at 0.8 TB/s). The tiled
// layout stores the same quants and headers regrouped by who reads them: a 16-row x 256-element
// tile (one m16 row tile x one canonical chunk) is one contiguous record, and inside it lane l's
// A-fragment quants for four k16 steps are 16 consecutive bytes. A warp loads a tile's quants with
// four coalesced 16-byte loads per lane, straight into registers, and turns each 32-bit word into
// an mma A fragment with a shift (or byte permute), a mask and an exact f16 subtraction per
// register.
//
// The operands are the ggml decoders' exactly (weight_frag.cuh: the same integer quants, the same
// {scale, bias} products), so a tiled matrix gives bit-identical outputs to its ggml form
// (kernel-check proves it); only where bytes sit changes, never the arithmetic or its order.
//
// Record of tile T, chunk c: at (T * n_chunks + c) * kBytes (a tile's chunks are contiguous). In
// a lane's 32-bit word for step s, register i (the A fragment's a[i]: rows g, g + 8, g, g + 8 and
// element pairs {4t, 4t + 1}, {4t, 4t + 1}, {4t + 2, 4t + 3}, {4t + 2, 4t + 3} of the step, the k
// permutation of weight_frag.cuh) holds its two 4-bit quants at bits 4i and 16 + 4i.
//   Q4_K (2304 B = 16 x 144): quants [quad 4][lane 32][step 4][u32] (2048 B), then each row's
//     block header (d, dmin, scales[12]: 16 B) for rows 0..15.
//   Q6_K (3360 B = 16 x 210): low nibbles as Q4_K's quants (2048 B); the 2 high bits [half 2]
//     [lane 32][step pair 4][u32] (1024 B), a step's 16 bits (low half of the word: the even step)
//     holding register i's two high-bit pairs at bits 2i and 8 + 2i; the rows' int8 scales[16]
//     (256 B); the rows' f16 d (32 B).
//   Q8_0 (4352 B = 16 x 8 x 34): quants [quad 4][lane 32][step 4][8 B] (4096 B), a step's two
//     words holding registers 0, 1 and 2, 3 as int8 pairs (register i's pair in bytes 2i, 2i + 1
//     of the step's 8); then each row's eight f16 block scales d (16 B) for rows 0..15.
//   F16 and BF16 (8192 B = 16 x 256 x 2): [step 16][lane 32][u32 4], the step's A fragment as
//     f16 pairs (BF16 converted to f16 by Weight<bf16>::to_f16 when tiled: the operand the ggml
//     kernels make of it, once at load instead of at every read). No scales. The four steps of a
//     64-element prefill sub-stage are 2048 contiguous bytes, so prefill stages a quarter record
//     per sub-stage instead of whole 8 KB records.
// Rows past the matrix are zero (scale 0). K must be a multiple of the 256-element chunk.
#pragma once

#include "core/dtype.h"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

__device__ __forceinline__ uint32_t byte_of(uint32_t word, int i) {
  return (word >> (8 * i)) & 0xffu;
}
__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// How a tiled record's load uses L1. The decode kernels (LaneChunk, tiled_chunk.cuh) read each
// record once a launch, while their x rows (64 KB at K = 4,096 and 8 tokens) are read
// again by every block of an SM from L1; records streamed through the same L1 (~200 KB an SM a
// launch) evict them. A kernel whose larger carveout shrank L1 lost 16% at 8 sequences
// (docs/PERFORMANCE.md, twenty-fifth round). So on that path (Tiled<D>::load<true>, head<true>):
//   bypass:      ld.global.nc.L1::no_allocate, for a load whose lanes cover whole 32-byte sectors
//                (Q4_K, Q6_K's low words, the halves, every head): nothing of it is read again.
//   evict_first: ld.global.nc.L1::evict_first, for a pair of loads that split each sector between
//                them (Q8_0's two halves of a lane's 32 bytes, Q6_K's high words of quads 2i and
//                2i + 1): the second reads the line the first brought, which goes before x's.
// Measured (forty-seventh round, H100, against plain loads): 8B Q4_K_M c1 and c8 +3%, Q8_0 c8
// +1.2%, BF16 c1 +2.1%. Bypassing every load lost Q8_0 c8 1.3% (each sector then crossed from L2
// twice); evict_first on every load lost Q4_K_M c8 2.0%. Everywhere else (the prefill and wgmma
// kernels, whose warps share a block's records, and the default template arguments) loads stay
// plain: pp512 was 0.8-0.9% slower with the decode path's loads. Records are constants of a step,
// so the non-coherent path is the one the compiler picks for them already. The build's
// MEMRA_WEIGHTS_L1 picks another policy for the decode path, for an A/B (gpu_check.sh bins): plain
// or evict_first (every load allocates, first out). A shared-memory address (the cluster kernel's
// stages) takes the plain load; __isGlobal folds where the address space is known.
enum class L1Use { plain, bypass, evict_first };

// A record load's L1 use: kUse on the decode kernels' path (kStream), plain elsewhere, as the
// build's MEMRA_WEIGHTS_L1 adjusts it.
template <bool kStream, L1Use kUse = L1Use::bypass>
inline constexpr L1Use kRecordUse =
#if defined(MEMRA_WEIGHTS_L1_PLAIN)
    L1Use::plain;
#elif defined(MEMRA_WEIGHTS_L1_EVICT_FIRST)
    kStream ? L1Use::evict_first : L1Use::plain;
#else
    kStream ? kUse : L1Use::plain;
#endif

// A 16-byte load from global or shared memory (generic address), and an 8-byte one: a tiled
// record's words.
template <L1Use kUse = L1Use::plain>
__device__ __forceinline__ uint4 ld_u128(const uint8_t* p) {
  if constexpr (kUse != L1Use::plain) {
    if (__isGlobal(p)) {
      uint4 v;
      if constexpr (kUse == L1Use::bypass) {
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
      } else {
        asm("ld.global.nc.L1::evict_first.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
      }
      return v;
    }
  }
  return *reinterpret_cast<const uint4*>(p);
}
template <L1Use kUse = L1Use::plain>
__device__ __forceinline__ uint2 ld_u64(const uint8_t* p) {
  if constexpr (kUse != L1Use::plain) {
    if (__isGlobal(p)) {
      uint2 v;
      if constexpr (kUse == L1Use::bypass) {
        asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
      } else {
        asm("ld.global.nc.L1::evict_first.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
      }
      return v;
    }
  }
  return *reinterpret_cast<const uint2*>(p);
}

// Register i of a step from its word of nibbles (bits 4i, 16 + 4i) and its extra high bits
// already in place (bits 4..5 and 20..21) OR-ed into exact_f16x2's bias 0x64006400 (high_bias),
// as the exact f16 pair q - kOffset: exact_f16x2's bits in one LOP3 and one HADD2 (written as C,
// the mask, the high bits and the bias took three LOP3: a LOP3 holds one immediate).
template <int kOffset, int kI>
__device__ __forceinline__ uint32_t nibble_reg(uint32_t word, uint32_t high_bias) {
  const __half2 biased = bits_h2(and_or(word >> (4 * kI), 0x000f000fu, high_bias));
  return h2_bits(__hsub2(
      biased, __half2half2(__ushort_as_half(static_cast<unsigned short>(0x6400u + kOffset)))));
}
// The high bits of register i for nibble_reg: bits 2i..2i + 1 of each half of `high` moved to 4..5
// (high holds them at 4 + 2i and 20 + 2i), with the bias.
template <int kI>
__device__ __forceinline__ uint32_t high_bias(uint32_t high) {
  return and_or(high >> (2 * kI), 0x00300030u, 0x64006400u);
}

template <DType D>
struct Tiled;

// Each Tiled<D> gives:
//   kBytes: bytes of one tile record; kGroup, kScaled, kBias: as Weight<D>.
//   Quad: what a lane needs for four k16 steps (4u .. 4u + 3) of a record; load(rec, u, lane).
//   frag(quad, v, af): the A fragment of step 4u + v.
//   Head: a row's scale data; head(rec, row); scale(head, j): {scale, bias} of group j of the
//     chunk, the same f32 values as Weight<D>::scale.
template <>
struct Tiled<DType::q4_k> {
  static constexpr int kBytes = 2304, kGroup = 32;
  static constexpr bool kScaled = true, kBias = true;
  using Quad = uint4;
  template <bool kStream = false>
  static __device__ __forceinline__ Quad load(const uint8_t* rec, int u, int lane) {
    return ld_u128<kRecordUse<kStream>>(rec + 512 * u + 16 * lane);
  }
  // Registers 0 and 2 take their nibbles from bits 0..3 (of w, and of w >> 8) as exact_f16x2
  // does; registers 1 and 3 read bits 4..7 in place: 0x6400 | 16q is the f16 1024 + 16q, and
  // (1024 + 16q) / 16 - 64 = q exactly in one fma. The same f16 values as nibble_reg, with one
  // shift a step instead of three.
  static __device__ __forceinline__ void frag(const Quad& q, int v, uint32_t (&af)[4]) {
    const uint32_t w = word_of(q, v), w8 = w >> 8;
    const __half2 sixteenth = __float2half2_rn(0.0625f), minus64 = __float2half2_rn(-64.0f);
    af[0] = exact_f16x2<0>(w & 0x000f000fu);
    af[1] = h2_bits(__hfma2(bits_h2((w & 0x00f000f0u) | 0x64006400u), sixteenth, minus64));
    af[2] = exact_f16x2<0>(w8 & 0x000f000fu);
    af[3] = h2_bits(__hfma2(bits_h2((w8 & 0x00f000f0u) | 0x64006400u), sixteenth, minus64));
  }
  // frag's fragment times its rows' group scales (the folded A operand, fold.cuh), from
  // fold_scales: one LOP3 and one HFMA2 a register where decoding then scaling took two LOP3, an
  // HADD2 or HFMA2 and an HMUL2 (the one-token kernel measured ~550 instructions a chunk, 380 of
  // them there). Row g's registers hold low nibbles, 1024 + q as f16: fma(1024 + q, sc, -1024 sc)
  // = sc q; row g + 8's hold high nibbles in place, 1024 + 16q: fma(1024 + 16q, sc / 16, -64 sc)
  // = sc q. Both exactly: sc < 64, so sc / 16, -1024 sc and -64 sc are exact f16, and the fma's
  // one rounding is of the exact integer sc q < 2048: the product decode-then-scale gave, bit
  // for bit.
  static __device__ __forceinline__ void folded_frag(const Quad& q, int v, const FoldScales& sc,
                                                     uint32_t (&af)[4]) {
    const uint32_t w = word_of(q, v), w8 = w >> 8, bias = 0x64006400u;
    af[0] =
        h2_bits(__hfma2(bits_h2(and_or(w, 0x000f000fu, bias)), bits_h2(sc.g.x), bits_h2(sc.g.y)));
    af[1] =
        h2_bits(__hfma2(bits_h2(and_or(w, 0x00f000f0u, bias)), bits_h2(sc.g8.x), bits_h2(sc.g8.y)));
    af[2] =
        h2_bits(__hfma2(bits_h2(and_or(w8, 0x000f000fu, bias)), bits_h2(sc.g.x), bits_h2(sc.g.y)));
    af[3] = h2_bits(
        __hfma2(bits_h2(and_or(w8, 0x00f000f0u, bias)), bits_h2(sc.g8.x), bits_h2(sc.g8.y)));
  }
  using Head = uint4;  // d | dmin << 16, scales[0..3], scales[4..7], scales[8..11]
  template <bool kStream = false>
  static __device__ __forceinline__ Head head(const uint8_t* rec, int row) {
    return ld_u128<kRecordUse<kStream>>(rec + 2048 + 16 * row);
  }
  // scale_min_k4 (weight_frag.cuh) on the header's words.
  static __device__ __forceinline__ float2 scale(const Head& h, int j) {
    const int k = j & 3;
    uint32_t sc, mn;
    if (j < 4) {
      sc = byte_of(h.y, k) & 63u;
      mn = byte_of(h.z, k) & 63u;
    } else {
      sc = (byte_of(h.w, k) & 0x0fu) | ((byte_of(h.y, k) >> 6) << 4);
      mn = (byte_of(h.w, k) >> 4) | ((byte_of(h.z, k) >> 6) << 4);
    }
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(h.x & 0xffffu)));
    const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(h.x >> 16)));
    return make_float2(__fmul_rn(d, exact_float<0>(sc)), -__fmul_rn(dmin, exact_float<0>(mn)));
  }
};

template <>
struct Tiled<DType::q6_k> {
  static constexpr int kBytes = 3360, kGroup = 16;
  static constexpr bool kScaled = true, kBias = false;
  struct Quad {
    uint4 lo;
    uint2 hi;  // the high-bit words of steps 4u, 4u + 1 and 4u + 2, 4u + 3
  };
  template <bool kStream = false>
  static __device__ __forceinline__ Quad load(const uint8_t* rec, int u, int lane) {
    Quad q;
    q.lo = ld_u128<kRecordUse<kStream>>(rec + 512 * u + 16 * lane);
    q.hi = ld_u64<kRecordUse<kStream, L1Use::evict_first>>(rec + 2048 + 512 * (u >> 1) + 16 * lane +
                                                           8 * (u & 1));
    return q;
  }
  static __device__ __forceinline__ void frag(const Quad& q, int v, uint32_t (&af)[4]) {
    const uint32_t w = word_of(q.lo, v);
    const uint32_t hw = (v >> 1) ? q.hi.y : q.hi.x;
    // The step's two high-bit bytes to bits 0..7 and 16..23, then up by 4: register i's pairs
    // sit at 4 + 2i and 20 + 2i.
    const uint32_t h = __byte_perm(hw, 0u, (v & 1) ? 0x4342 : 0x4140) << 4;
    af[0] = nibble_reg<32, 0>(w, high_bias<0>(h));
    af[1] = nibble_reg<32, 1>(w, high_bias<1>(h));
    af[2] = nibble_reg<32, 2>(w, high_bias<2>(h));
    af[3] = nibble_reg<32, 3>(w, high_bias<3>(h));
  }
  struct Head {
    uint4 scales;  // int8 scales[16]
    float d;
  };
  template <bool kStream = false>
  static __device__ __forceinline__ Head head(const uint8_t* rec, int row) {
    return {ld_u128<kRecordUse<kStream>>(rec + 3072 + 16 * row), ld_f16(rec + 3328 + 2 * row)};
  }
  static __device__ __forceinline__ float2 scale(const Head& h, int j) {
    const uint32_t q = byte_of(word_of(h.scales, j >> 2), j & 3);
    return make_float2(__fmul_rn(h.d, exact_float<128>(q ^ 0x80u)), 0.0f);
  }
};

template <>
struct Tiled<DType::q8_0> {
  static constexpr int kBytes = 4352, kGroup = 32;
  static constexpr bool kScaled = true, kBias = false;
  struct Quad {
    uint4 lo, hi;  // steps 4u, 4u + 1 and 4u + 2, 4u + 3
  };
  template <bool kStream = false>
  static __device__ __forceinline__ Quad load(const uint8_t* rec, int u, int lane) {
    constexpr L1Use kUse = kRecordUse<kStream, L1Use::evict_first>;
    return {ld_u128<kUse>(rec + 1024 * u + 32 * lane),
            ld_u128<kUse>(rec + 1024 * u + 32 * lane + 16)};
  }
  // Weight<q8_0>::pair on a register's two int8: biased to unsigned, spread, exact f16 - 128.
  template <int kHalf>
  static __device__ __forceinline__ uint32_t pair(uint32_t biased) {
    return exact_f16x2<128>(__byte_perm(biased, 0u, kHalf ? 0x4342 : 0x4140));
  }
  static __device__ __forceinline__ void frag(const Quad& q, int v, uint32_t (&af)[4]) {
    const uint4& h = (v >> 1) ? q.hi : q.lo;
    const uint32_t w0 = ((v & 1) ? h.z : h.x) ^ 0x80808080u;
    const uint32_t w1 = ((v & 1) ? h.w : h.y) ^ 0x80808080u;
    af[0] = pair<0>(w0);
    af[1] = pair<1>(w0);
    af[2] = pair<0>(w1);
    af[3] = pair<1>(w1);
  }
  using Head = uint4;  // the row's eight f16 d
  template <bool kStream = false>
  static __device__ __forceinline__ Head head(const uint8_t* rec, int row) {
    return ld_u128<kRecordUse<kStream>>(rec + 4096 + 16 * row);
  }
  static __device__ __forceinline__ float2 scale(const Head& h, int j) {
    const uint32_t w = word_of(h, j >> 1);
    const auto bits = static_cast<unsigned short>((j & 1) ? w >> 16 : w & 0xffffu);
    return make_float2(__half2float(__ushort_as_half(bits)), 0.0f);
  }
};

// F16 / BF16: the A fragments themselves, one 16-byte load per lane and step.
struct TiledHalf {
  static constexpr int kBytes = 8192, kGroup = 256;
  static constexpr bool kScaled = false, kBias = false;
  struct Quad {
    uint4 step[4];
  };
  template <bool kStream = false>
  static __device__ __forceinline__ Quad load(const uint8_t* rec, int u, int lane) {
    Quad q;
#pragma unroll
    for (int v = 0; v < 4; ++v)
      q.step[v] = ld_u128<kRecordUse<kStream>>(rec + 2048 * u + 512 * v + 16 * lane);
    return q;
  }
  static __device__ __forceinline__ void frag(const Quad& q, int v, uint32_t (&af)[4]) {
    af[0] = q.step[v].x;
    af[1] = q.step[v].y;
    af[2] = q.step[v].z;
    af[3] = q.step[v].w;
  }
  using Head = uint32_t;  // unused: no scales
  template <bool kStream = false>
  static __device__ __forceinline__ Head head(const uint8_t*, int) {
    return 0u;
  }
  static __device__ __forceinline__ float2 scale(const Head&, int) {
    return make_float2(1.0f, 0.0f);
  }
};
template <>
struct Tiled<DType::f16> : TiledHalf {};
template <>
struct Tiled<DType::bf16> : TiledHalf {};

// Whether dtype D has a tiled layout (the host side: matmul_tiled.cu).
template <DType D>
constexpr bool kHasTiled =
    D == DType::q4_k || D == DType::q6_k || D == DType::q8_0 || D == DType::f16 || D == DType::bf16;

}  // namespace memra::kernels::matmul_detail
