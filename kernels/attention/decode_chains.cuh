// A one-split decode block's scores and values with short dependency chains (private to
// attention.cu; the decode kernel's kChains form, MEMRA_DECODE_CHAINS): the same mma sequence per
// accumulator as attention_mma.cuh's mma_chunk_scores and mma_chunk_values, so the same bits, but
// issued so that the chains do not wait on each other or on their operands' loads.
//
// Why. MEMRA_DECODE_STAMPS at one sequence of 512 keys (sixty-first round, H100): the split's
// scores take ~4,100 cycles and its values ~4,100, for 48 dependent mma a warp each. A chunk's
// scores (24 mma a chain, the dims in 16-dim steps times q's terms) ran after the other chunk's,
// not beside it; and ldmatrix and mma are both `asm volatile`, so each step's operand loads issue
// only after the previous step's mma have issued, and every link of a chain waits a load's latency
// as well as an mma's. Here both chunks' chains run side by side (one warp's keys of each chunk,
// q's fragments shared), and each step's operands are loaded a step ahead.
#pragma once

#include "kernels/attention/attention_mma.cuh"

namespace memra::kernels::detail {

// kSteps steps of a product's chains (the scores' 16-dim steps), each step's operands loaded
// (load(buf, k)) while the previous step's mma run (step(buf)): buf alternates, a constant once
// the loop is unrolled (registers, not local memory).
template <int kSteps, typename Load, typename Step>
__device__ __forceinline__ void steps_loaded_ahead(const Load& load, const Step& step) {
  load(0, 0);
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    if (k + 1 < kSteps) load((k + 1) & 1, k + 1);
    step(k & 1);
  }
}

// The 16-key steps [j0, j1) of a split's values, each step's operands loaded (load(buf, j)) while
// the previous step's mma run (step(buf)): two steps a turn, so that each of the two buffers is
// named by a constant (registers, not local memory).
template <typename Load, typename Step>
__device__ __forceinline__ void key_steps_loaded_ahead(int j0, int j1, const Load& load,
                                                       const Step& step) {
  if (j0 >= j1) return;
  load(0, j0);
  for (int j = j0; j < j1; j += 32) {
    if (j + 16 < j1) load(1, j + 16);
    step(0);
    if (j + 16 >= j1) break;
    if (j + 32 < j1) load(0, j + 32);
    step(1);
  }
}

// The scores of split s, both chunks at once: warp w takes keys [w kKeysW, + kKeysW) of each
// chunk, as mma_chunk_scores does for one. A chunk without keys of the run is computed on
// whatever its rows hold and not stored (a chain's operands never meet another's).
template <int D, typename CT>
__device__ __forceinline__ void decode_split_scores(const AttnParams& p, const Run& run, int s,
                                                    const MmaSmem& sm, const unsigned char* kb) {
  using C = MmaConfig<D, CT, false>;
  constexpr int kCh = kSplit / C::kChunk, kSteps = D / 16, kN = C::kNTilesS;
  static_assert(C::kMTiles == 1, "one-query blocks: one row tile");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sbase = s * kSplit, k0 = warp * C::kKeysW;
  const int a_col = 16 * (lane >> 4);
  const int b_off = (k0 + (lane & 7)) * C::kRowBytes + 16 * ((lane >> 3) & 1);
  const unsigned char* q_row = sm.q + staged_row<C::kRows>(0, lane) * C::kRowBytes + a_col;
  float acc[kCh][kN][4];
#pragma unroll
  for (int ci = 0; ci < kCh; ++ci)
#pragma unroll
    for (int n = 0; n < kN; ++n)
      acc[ci][n][0] = acc[ci][n][1] = acc[ci][n][2] = acc[ci][n][3] = 0.0f;
  uint32_t a[2][C::kTerms][4], b[2][kCh][kN][2];
  const auto load = [&](int buf, int kk) {
#pragma unroll
    for (int ci = 0; ci < kCh; ++ci)
#pragma unroll
      for (int n = 0; n < kN; ++n)
        ldsm_x2(b[buf][ci][n][0], b[buf][ci][n][1],
                kb + ci * C::kChunkBytes + b_off + 8 * n * C::kRowBytes + 32 * kk);
#pragma unroll
    for (int i = 0; i < C::kTerms; ++i)
      ldsm_x4(a[buf][i], q_row + i * C::kRows * C::kRowBytes + 32 * kk);
  };
  // Each chain in mma_chunk_scores' order: the dims' steps, each the terms smallest first.
  steps_loaded_ahead<kSteps>(load, [&](int buf) {
#pragma unroll
    for (int i = C::kTerms - 1; i >= 0; --i)
#pragma unroll
      for (int ci = 0; ci < kCh; ++ci)
#pragma unroll
        for (int n = 0; n < kN; ++n)
          mma16816<CT>(acc[ci][n], a[buf][i], b[buf][ci][n][0], b[buf][ci][n][1]);
  });
#pragma unroll
  for (int ci = 0; ci < kCh; ++ci)
    store_chunk_scores<C>(p, run, sm, acc[ci], 0, sbase + ci * C::kChunk, sbase, k0);
}

// acc += p . v over split s's 16-key steps that hold keys of the run, in key order across its
// chunks (the steps mma_chunk_values takes chunk by chunk: chunks start at multiples of 16), each
// step's operands loaded while the previous step's mma run. vb: the split's V rows.
template <int D, typename CT>
__device__ __forceinline__ void decode_split_values(
    const Run& run, int s, const MmaSmem& sm, const unsigned char* vb,
    float (&acc)[MmaConfig<D, CT, false>::kMTiles][MmaConfig<D, CT, false>::kNTilesV][4]) {
  using C = MmaConfig<D, CT, false>;
  constexpr int kN = C::kNTilesV;
  static_assert(C::kMTiles == 1 && kN % 2 == 0, "one row tile; V's tiles in x4 loads");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sbase = s * kSplit;
  const int j0 = (max(sbase, run.lo) - sbase) & ~15;
  const int j1 = (min(sbase + kSplit, run.hi) - sbase + 15) & ~15;
  const int d0 = warp * C::kDimsW;
  const unsigned char* v_lane =
      vb + ((lane & 7) + 8 * ((lane >> 3) & 1)) * C::kRowBytes + 2 * (d0 + 8 * (lane >> 4));
  const unsigned char* p_lane =
      reinterpret_cast<const unsigned char*>(sm.sc + staged_row<C::kRows>(0, lane) * C::kScStride) +
      2 * 8 * (lane >> 4);
  uint32_t a[2][C::kTerms][4], b[2][kN][2];
  const auto load = [&](int buf, int j) {
#pragma unroll
    for (int n = 0; n < kN; n += 2) {
      uint32_t r[4];
      ldsm_x4_t(r, v_lane + j * C::kRowBytes + 2 * 8 * n);
      b[buf][n][0] = r[0], b[buf][n][1] = r[1], b[buf][n + 1][0] = r[2], b[buf][n + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < C::kTerms; ++i) ldsm_x4(a[buf][i], p_lane + 2 * (i * kSplit + j));
  };
  const auto step = [&](int buf) {
#pragma unroll
    for (int i = C::kTerms - 1; i >= 0; --i)
#pragma unroll
      for (int n = 0; n < kN; ++n) mma16816<CT>(acc[0][n], a[buf][i], b[buf][n][0], b[buf][n][1]);
  };
  key_steps_loaded_ahead(j0, j1, load, step);
}

}  // namespace memra::kernels::detail
