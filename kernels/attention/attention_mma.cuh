// The tensor-core attention kernel (private to attention.cu) for 16-bit KV caches at head_dim 64,
// 128 and 256. Same blocks, splits, chunk ring, plans and combine as the CUDA-core kernel
// (attention_split.cuh); only a split's arithmetic differs. Per split of kAttentionSplit keys,
// every row (query token, query head) computes, in an order that depends only on its own
// position and window:
//   scores  s_j = softcap((q . k_j) * scale), q . k_j one mma.m16n8k16 chain over the dims in
//           16-dim steps, each step the terms of q from the smallest to the largest times k,
//           where q = q_0 + q_1 (+ q_2) in 16-bit values of the cache's type (f16: two terms,
//           ~22 bits; bf16: three, ~25 bits), so the scores keep f32 accuracy;
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j   (fixed lane assignment of the split's key
//           offsets, lane sums in a fixed order, fixed xor tree: mma_split_softmax);
//   acc[d] = sum_j p_j v_j[d]   one mma chain over the split's keys in 16-key steps of absolute
//           position, each step the terms of p (split as q) smallest first times v.
// An mma's row depends only on that row of A, and a 16-key step where the row has no key adds
// products of p = 0 (the V rows of keys outside the block's run are stored as zeros, so no NaN
// enters): a block that runs more steps for its other rows gives this row the same bits. So a
// token's result is identical alone or in a batch, in a tile or alone, split or one_pass.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cstdint>

#include "kernels/attention/attention_split.cuh"

namespace memra::kernels::detail {

// Rows are padded to m16 tiles: one tile for one-query blocks (up to kMaxGroup rows), two for
// query tiles. Warps split a chunk's keys for the scores and the head dims for the weighted V.
// 16-bit terms a q or p value is split into: f16 two (11 + 11 bits), bf16 three (8 + 8 + 8).
template <typename CT>
constexpr int split_terms() {
  return std::is_same_v<CT, __nv_bfloat16> ? 3 : 2;
}

// Rows of a tensor-core query tile: 32 (two m16 tiles), so that two blocks fit an SM (registers
// and shared memory): the kernel is latency-bound at one block of 8 warps a SM (measured: 0.27
// instructions issued a cycle per scheduler with 64-row tiles).
constexpr int kMmaTileRows = 32;

template <int D, typename CT, bool MQ>
struct MmaConfig {
  static_assert(sizeof(CT) == 2 && (D == 64 || D == 128 || D == 256), "16-bit cache, D 64..256");
  static constexpr int kTerms = split_terms<CT>();
  static constexpr int kRows = MQ ? kMmaTileRows : 16;
  static constexpr int kMTiles = kRows / 16;
  static constexpr int kChunk = MQ ? 64 : 128;
  static constexpr int kChunkShift = MQ ? 6 : 7;
  static constexpr int kKeysW = kChunk / kAttnWarps;  // keys a warp scores per chunk
  static constexpr int kNTilesS = kKeysW / 8;
  static constexpr int kDimsW = D / kAttnWarps;  // head dims a warp accumulates
  static constexpr int kNTilesV = kDimsW / 8;
  static constexpr int kSegElems = 8;
  static constexpr int kSegs = D / kSegElems;
  // A 16-byte pad per staged row puts the 8 rows of an ldmatrix on distinct bank quads.
  static constexpr int kRowBytes = D * 2 + 16;
  static constexpr int kChunkBytes = kChunk * kRowBytes;
  static constexpr int kQBytes = kRows * kRowBytes;  // one term of the rows' q
  // A row of the split's scores (f32), overwritten by its p as kTerms arrays of kSplit 16-bit
  // terms; 4 floats of pad for ldmatrix, as above.
  static constexpr int kScStride =
      (kTerms * kSplit > 2 * kSplit ? kTerms * kSplit / 2 : kSplit) + 4;
  static constexpr int kFixedBytes =
      kTerms * kQBytes + kRows * kScStride * 4 + kRows * kRowStateBytes;
  static constexpr bool kZeroFillV = true;
  // Two blocks a SM (<= 128 registers a thread) but for head_dim 256 query tiles, whose V
  // accumulators would spill there.
  static constexpr int kBlocksPerSm = MQ && D > 128 ? 1 : 2;
  static_assert(kNTilesS >= 1 && kNTilesV >= 1 && kSplit % kChunk == 0, "warp tiling");
};

// mma.m16n8k16 with f32 accumulation for the cache's 16-bit type, and the hi/lo split.
template <typename CT>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<CT, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// A score's weight p = e^x (x = s - m <= 0) in the tensor-core arithmetic: 2^(x log2 e) on the
// special-function unit, two instructions (libm's expf is eight, a dependent chain of seven; by
// the code's count a third of the row-owning kernel's instructions for a split). Its error:
// ex2.approx's ~2 ulp, plus the product's rounding, |x| log2 e 2^-24 relative, which is largest
// where p is negligible (the weighted error |x| e^x peaks at 0.37 x 2^-24 at x = -1); results
// under 2^-126 flush to 0. Every tensor-core kernel (flash, mma, decode) calls this one function,
// so their bits stay each other's; the CUDA-core arithmetic keeps expf.
__device__ __forceinline__ float score_exp(float x) {
  float p;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(p) : "f"(__fmul_rn(x, 1.4426950408889634f)));
  return p;
}

// x = t[0] + t[1] (+ t[2]): each term the round-to-nearest of what the larger ones leave (every
// remainder is exact in f32).
template <typename CT>
__device__ __forceinline__ void split16(float x, uint16_t (&t)[split_terms<CT>()]) {
#pragma unroll
  for (int i = 0; i < split_terms<CT>(); ++i) {
    if constexpr (std::is_same_v<CT, __nv_bfloat16>) {
      const __nv_bfloat16 h = __float2bfloat16_rn(x);
      t[i] = __bfloat16_as_ushort(h);
      x -= __bfloat162float(h);
    } else {
      const __half h = __float2half_rn(x);
      t[i] = __half_as_ushort(h);
      x -= __half2float(h);
    }
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x2(uint32_t& r0, uint32_t& r1, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t& r0, uint32_t& r1, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(p)));
}

// Shared memory of a tensor-core block (dynamic; layout from MmaConfig).
struct MmaSmem : RowState {
  unsigned char* q;     // [kTerms][kRows][kRowBytes] the rows' q terms (zero rows pad the tile)
  float* sc;            // [kRows][kScStride] the split's scores, then its p as kTerms term arrays
  unsigned char* ring;  // [stages][kChunk][kRowBytes]
};

template <class C>
__device__ __forceinline__ MmaSmem mma_smem(unsigned char* base) {
  MmaSmem m;
  m.q = base;
  m.sc = reinterpret_cast<float*>(m.q + C::kTerms * C::kQBytes);
  m.ring = carve_row_state(m, m.sc + C::kRows * C::kScStride, C::kRows);
  return m;
}

// The staged row (of q's terms, or of the scores' p) that ldmatrix lane `lane` addresses for row
// tile m. Every row of the tiles is staged (kStaged = kRows), or, where a one-query block stages
// only its first kStaged < 16 rows (the decode kernel's ring form, attention_decode_ring.cuh), the
// tile's other rows repeat staged ones: an mma row depends on that row of A alone, so the staged
// rows' results are the same bits, and the repeats' are never stored.
template <int kStaged>
__device__ __forceinline__ int staged_row(int m, int lane) {
  static_assert(kStaged >= 16 || (kStaged > 0 && (kStaged & (kStaged - 1)) == 0),
                "a power of two below a tile's 16 rows");
  if constexpr (kStaged < 16)
    return lane & (kStaged - 1);
  else
    return 16 * m + (lane & 15);
}

// A score as the scores' rows hold it: the product's f32 times the scale, soft-capped where the
// model caps (every tensor-core scores function stores through this one).
__device__ __forceinline__ float scaled_score(const AttnParams& p, float dot) {
  float s = dot * p.scale;
  if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  return s;
}

// q's dims d and d + 1 of staged row r as their terms (q_terms: kTerms arrays of kStaged rows).
template <typename CT, typename C, int kStaged>
__device__ __forceinline__ void store_q_pair(unsigned char* q_terms, int r, int d, float2 x) {
  uint16_t t0[C::kTerms], t1[C::kTerms];
  split16<CT>(x.x, t0);
  split16<CT>(x.y, t1);
#pragma unroll
  for (int k = 0; k < C::kTerms; ++k)
    *reinterpret_cast<uint32_t*>(q_terms + (k * kStaged + r) * C::kRowBytes + 2 * d) =
        t0[k] | uint32_t{t1[k]} << 16;
}

// Row tile m's scores of the chunk at key `base` (a warp's keys base + k0 + [0, kKeysW), as the
// mma fragments acc hold them) into the split's score rows; keys outside the run's are skipped.
template <class C>
__device__ __forceinline__ void store_chunk_scores(const AttnParams& p, const Run& run,
                                                   const MmaSmem& sm,
                                                   const float (&acc)[C::kNTilesS][4], int m,
                                                   int base, int sbase, int k0) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
#pragma unroll
  for (int n = 0; n < C::kNTilesS; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * m + g + 8 * h;
      if (r >= run.n_rows) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = base + k0 + 8 * n + 2 * t + e;
        if (key < c0 || key >= c1) continue;
        sm.sc[r * C::kScStride + (key - sbase)] = scaled_score(p, acc[n][2 * h + e]);
      }
    }
  }
}

// Scores of chunk c: warp w takes keys [w * kKeysW, + kKeysW) of the chunk for every row tile.
// kStaged: the rows of q's terms staged (staged_row), each term's array kStaged rows long.
template <int D, typename CT, bool MQ, int kStaged = MmaConfig<D, CT, MQ>::kRows>
__device__ __forceinline__ void mma_chunk_scores(const AttnParams& p, const Run& run,
                                                 const Cursor& c, const MmaSmem& sm,
                                                 const unsigned char* buf) {
  using C = MmaConfig<D, CT, MQ>;
  static_assert(kStaged <= C::kRows, "staged rows of the tiles");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sbase = c.s * kSplit, base = sbase + c.ci * C::kChunk;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
  const int k0 = warp * C::kKeysW;
  if (base + k0 >= c1 || base + k0 + C::kKeysW <= c0) return;  // none of the warp's keys
  float acc[C::kMTiles][C::kNTilesS][4];
#pragma unroll
  for (int m = 0; m < C::kMTiles; ++m)
#pragma unroll
    for (int n = 0; n < C::kNTilesS; ++n)
      acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.0f;
  const int a_col = 16 * (lane >> 4);
  const int b_off = (k0 + (lane & 7)) * C::kRowBytes + 16 * ((lane >> 3) & 1);
#pragma unroll 2
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t b[C::kNTilesS][2];
#pragma unroll
    for (int n = 0; n < C::kNTilesS; ++n)
      ldsm_x2(b[n][0], b[n][1], buf + b_off + 8 * n * C::kRowBytes + 32 * kk);
#pragma unroll
    for (int m = 0; m < C::kMTiles; ++m) {
      if (16 * m >= run.n_rows) break;  // uniform
#pragma unroll
      for (int i = C::kTerms - 1; i >= 0; --i) {
        uint32_t a[4];
        ldsm_x4(a, sm.q + (i * kStaged + staged_row<kStaged>(m, lane)) * C::kRowBytes + a_col +
                       32 * kk);
#pragma unroll
        for (int n = 0; n < C::kNTilesS; ++n) mma16816<CT>(acc[m][n], a, b[n][0], b[n][1]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < C::kMTiles; ++m)
    store_chunk_scores<C>(p, run, sm, acc[m], m, base, sbase, k0);
}

// Softmax statistics of split s, one warp per row (kBatch of a warp's rows at once, for
// independent shuffle chains); the row's p (zero outside its keys) replaces its scores as term
// arrays. Lane l holds the split's key offsets 64 i + 2 l and 64 i + 2 l + 1 (i < 4) as v[2 i],
// v[2 i + 1]: a row's l is each lane's sum of v in index order, then the fixed xor tree.
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void mma_split_softmax(const Run& run, int s, const MmaSmem& sm) {
  using C = MmaConfig<D, CT, MQ>;
  // One-query blocks hold at most kMaxGroup = kAttnWarps rows, a row a warp: a batch of four
  // would run three empty rows' loads, exponentials and shuffles beside each row (predicated
  // off, not skipped), on the split's critical path (fifty-sixth round).
  static_assert(MQ || kMaxGroup <= kAttnWarps, "a one-query block's rows, one a warp");
  constexpr int kBatch = MQ ? 4 : 1, kPer = kSplit / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r0 = warp; r0 < run.n_rows; r0 += kBatch * kAttnWarps) {
    int ob[kBatch], oe[kBatch];
    float v[kBatch][kPer], m[kBatch], l[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int r = r0 + b * kAttnWarps;
      int kb = 0, ke = 0;
      if (r < run.n_rows) row_keys(sm, r / run.n_h, s, kb, ke);
      ob[b] = kb - s * kSplit, oe[b] = ke - s * kSplit;  // empty: no key of the row here
      const float* row = sm.sc + r * C::kScStride;
      m[b] = -INFINITY;
#pragma unroll
      for (int i = 0; i < kPer; i += 2) {
        const int o = 32 * i + 2 * lane;
        float2 x = make_float2(-INFINITY, -INFINITY);
        if (o + 1 >= ob[b] && o < oe[b]) x = *reinterpret_cast<const float2*>(row + o);
        v[b][i] = o >= ob[b] && o < oe[b] ? x.x : -INFINITY;
        v[b][i + 1] = o + 1 >= ob[b] && o + 1 < oe[b] ? x.y : -INFINITY;
        m[b] = fmaxf(m[b], fmaxf(v[b][i], v[b][i + 1]));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int b = 0; b < kBatch; ++b) m[b] = fmaxf(m[b], __shfl_xor_sync(0xffffffffu, m[b], o));
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      l[b] = 0.0f;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int o = 32 * (i & ~1) + 2 * lane + (i & 1);
        v[b][i] = o >= ob[b] && o < oe[b] ? score_exp(__fsub_rn(v[b][i], m[b])) : 0.0f;
        l[b] += v[b][i];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int b = 0; b < kBatch; ++b) l[b] += __shfl_xor_sync(0xffffffffu, l[b], o);
    __syncwarp();  // every lane has read its rows before any overwrites them
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int r = r0 + b * kAttnWarps;
      if (ob[b] >= oe[b]) continue;  // no key (or no row): nothing to write
      uint32_t* terms = reinterpret_cast<uint32_t*>(sm.sc + r * C::kScStride);
#pragma unroll
      for (int i = 0; i < kPer; i += 2) {
        uint16_t t0[C::kTerms], t1[C::kTerms];
        split16<CT>(v[b][i], t0);
        split16<CT>(v[b][i + 1], t1);
#pragma unroll
        for (int k = 0; k < C::kTerms; ++k)
          terms[k * (kSplit / 2) + 16 * i + lane] = t0[k] | uint32_t{t1[k]} << 16;
      }
      if (lane == 0) sm.split_m[r] = m[b], sm.split_l[r] = l[b];
    }
  }
}

// acc += p . v over chunk c's 16-key steps that hold keys of the run (warp w: head dims
// [w * kDimsW, + kDimsW), every row tile). kStaged: the scores' rows staged (staged_row).
template <int D, typename CT, bool MQ, int kStaged = MmaConfig<D, CT, MQ>::kRows>
__device__ __forceinline__ void mma_chunk_values(
    const Run& run, const Cursor& c, const MmaSmem& sm, const unsigned char* buf,
    float (&acc)[MmaConfig<D, CT, MQ>::kMTiles][MmaConfig<D, CT, MQ>::kNTilesV][4]) {
  using C = MmaConfig<D, CT, MQ>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int base = c.s * kSplit + c.ci * C::kChunk;
  const int c0 = max(base, run.lo), c1 = min(base + C::kChunk, run.hi);
  const int j0 = (c0 - base) & ~15, j1 = (c1 - base + 15) & ~15;
  const int d0 = warp * C::kDimsW;
  for (int j = j0; j < j1; j += 16) {
    uint32_t b[C::kNTilesV][2];
#pragma unroll
    for (int n = 0; n + 1 < C::kNTilesV; n += 2) {
      uint32_t r[4];
      ldsm_x4_t(r, buf + (j + (lane & 7) + 8 * ((lane >> 3) & 1)) * C::kRowBytes +
                       2 * (d0 + 8 * n + 8 * (lane >> 4)));
      b[n][0] = r[0], b[n][1] = r[1], b[n + 1][0] = r[2], b[n + 1][1] = r[3];
    }
    if constexpr (C::kNTilesV % 2 == 1) {
      constexpr int n = C::kNTilesV - 1;
      ldsm_x2_t(b[n][0], b[n][1],
                buf + (j + (lane & 7) + 8 * ((lane >> 3) & 1)) * C::kRowBytes + 2 * (d0 + 8 * n));
    }
    const int key = c.ci * C::kChunk + j + 8 * (lane >> 4);  // split-relative
#pragma unroll
    for (int m = 0; m < C::kMTiles; ++m) {
      if (16 * m >= run.n_rows) break;  // uniform
      const unsigned char* prow = reinterpret_cast<const unsigned char*>(
          sm.sc + staged_row<kStaged>(m, lane) * C::kScStride);
#pragma unroll
      for (int i = C::kTerms - 1; i >= 0; --i) {
        uint32_t a[4];
        ldsm_x4(a, prow + 2 * (i * kSplit + key));
#pragma unroll
        for (int n = 0; n < C::kNTilesV; ++n) mma16816<CT>(acc[m][n], a, b[n][0], b[n][1]);
      }
    }
  }
}

// Split s's statistics (m, l) of each row with keys in it into the row's partial (the split plan).
template <int D>
__device__ __forceinline__ void store_split_stats(const AttnParams& p, const Run& run, int s,
                                                  const RowState& sm) {
  for (int r = threadIdx.x; r < run.n_rows; r += kAttnThreads) {
    int kb, ke;
    row_keys(sm, r / run.n_h, s, kb, ke);
    if (kb >= ke) continue;
    float* part = partial_row<D>(p, run, r, s);
    part[D] = sm.split_m[r], part[D + 1] = sm.split_l[r];
  }
}

// The end of split s, as split_finish: partials to scratch (split plan) or merged into O
// (one_pass); acc is zeroed. A thread's fragment elements: row 16m + g (+8), dims
// d0 + 8n + 2t (+1).
template <int D, typename CT, bool MQ>
__device__ __forceinline__ void mma_split_finish(
    const AttnParams& p, const Run& run, int s, const MmaSmem& sm,
    float (&acc)[MmaConfig<D, CT, MQ>::kMTiles][MmaConfig<D, CT, MQ>::kNTilesV][4],
    float (&O)[MmaConfig<D, CT, MQ>::kMTiles][MmaConfig<D, CT, MQ>::kNTilesV][4]) {
  using C = MmaConfig<D, CT, MQ>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  if (p.one_pass)
    update_running_stats(run, s, sm);
  else
    store_split_stats<D>(p, run, s, sm);
  const int d0 = warp * C::kDimsW;
#pragma unroll
  for (int m = 0; m < C::kMTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * m + g + 8 * h;
      if (r < run.n_rows) {
        const int q = r / run.n_h;
        int kb, ke;
        row_keys(sm, q, s, kb, ke);
        if (kb < ke) {
          if (p.one_pass) {
            const bool first = s == sm.qlo[q] / kSplit;
#pragma unroll
            for (int n = 0; n < C::kNTilesV; ++n)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& o = O[m][n][2 * h + e];
                const float a = acc[m][n][2 * h + e];
                o = first ? a : merge_value(o, a, sm.w_old[r], sm.w_new[r]);
              }
          } else {
            float* part = partial_row<D>(p, run, r, s);
#pragma unroll
            for (int n = 0; n < C::kNTilesV; ++n)
              *reinterpret_cast<float2*>(part + d0 + 8 * n + 2 * t) =
                  make_float2(acc[m][n][2 * h], acc[m][n][2 * h + 1]);
          }
        }
      }
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n) acc[m][n][2 * h] = acc[m][n][2 * h + 1] = 0.0f;
    }
  }
}

// The value accumulators of a block's n_rows rows (the mma's accumulator layout: rows g and g + 8
// of each row tile, the warp's dims 8n + 2t and + 1), a pair of dims at a time: f(r, d, x, y) for
// row r's dims d and d + 1.
template <typename C, typename F>
__device__ __forceinline__ void for_value_pairs(int n_rows,
                                                const float (&acc)[C::kMTiles][C::kNTilesV][4],
                                                const F& f) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int d0 = warp * C::kDimsW + 2 * t;
#pragma unroll
  for (int m = 0; m < C::kMTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * m + g + 8 * h;
      if (r >= n_rows) continue;
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n)
        f(r, d0 + 8 * n, acc[m][n][2 * h], acc[m][n][2 * h + 1]);
    }
}

// The value accumulators and the split's output rows, zeroed.
template <typename C>
__device__ __forceinline__ void zero_tiles(float (&acc)[C::kMTiles][C::kNTilesV][4],
                                           float (&O)[C::kMTiles][C::kNTilesV][4]) {
#pragma unroll
  for (int m = 0; m < C::kMTiles; ++m)
#pragma unroll
    for (int n = 0; n < C::kNTilesV; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][n][e] = O[m][n][e] = 0.0f;
}

// The run's q rows (row r: token tb + r / n_h, head h0 + r % n_h) split into their terms at
// q_terms, two dims a thread; the last row tile's missing rows are zero. kBatch: a thread's loads
// of kBatch pairs are issued before any is converted (the row-owning form's 128 rows are 32 pairs
// a thread: one at a time, each waited on its global load, ~10% of that kernel's warp samples at
// 2,048 tokens in Nsight, forty-third round); the same values in the same slots either way.
// kStaged: each term's array of rows (staged_row): the tiles' whole rows, or kStaged < 16 rows
// (n_rows <= kStaged) for the decode kernel's ring form.
template <int D, typename CT, typename C, int kBatch = 1, int kStaged = C::kRows>
__device__ __forceinline__ void stage_q_terms(const AttnParams& p, const Run& run,
                                              unsigned char* q_terms) {
  const int rows_padded = kStaged < 16 ? kStaged : (run.n_rows + 15) & ~15;
  const int total = rows_padded * (D / 2);
  for (int i0 = threadIdx.x; i0 < total; i0 += kBatch * kAttnThreads) {
    float2 x[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * kAttnThreads;
      const int r = i / (D / 2), d = 2 * (i % (D / 2));
      x[b] = make_float2(0.0f, 0.0f);
      if (i < total && r < run.n_rows) {  // two loads: q rows need not be 8-byte aligned
        const float* qr =
            p.q + int64_t{run.tb + r / run.n_h} * p.ldq + int64_t{run.h0 + r % run.n_h} * D + d;
        x[b] = make_float2(qr[0], qr[1]);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * kAttnThreads;
      const int r = i / (D / 2), d = 2 * (i % (D / 2));
      if (i >= total) continue;
      store_q_pair<CT, C, kStaged>(q_terms, r, d, x[b]);
    }
  }
}

// Pair i of a one-token run's q rows (row i / (D / 2), its dims 2 (i % (D / 2)) and + 1), zero
// past its rows: stage_q_terms' values, loaded apart from their staging (MEMRA_DECODE_Q_FIRST).
// (stage_q_terms keeps its own loads: calling this from its batched loop moved the flash kernels'
// spills, 64 -> 88 bytes of stack at head_dim 128.)
template <int D>
__device__ __forceinline__ float2 load_q_pair(const AttnParams& p, const Run& run, int i) {
  const int r = i / (D / 2), d = 2 * (i % (D / 2));
  if (r >= run.n_rows) return make_float2(0.0f, 0.0f);
  const float* qr = p.q + int64_t{run.tb} * p.ldq + int64_t{run.h0 + r} * D + d;
  return make_float2(qr[0], qr[1]);  // two loads: q rows need not be 8-byte aligned
}

// stage_q_terms for a one-token run (its rows are the token's heads h0 .. h0 + n_h - 1) with this
// thread's first pair already loaded (first: load_q_pair(p, run, threadIdx.x)), and the row's key
// range from the run (its token's: [lo, hi) is [key_range.lo, pos + 1)) rather than re-read from
// p.positions: the same values in the same slots as publish_key_ranges and stage_q_terms.
template <int D, typename CT, typename C>
__device__ __forceinline__ void stage_q_terms_from(const AttnParams& p, const Run& run,
                                                   const RowState& st, unsigned char* q_terms,
                                                   float2 first) {
  if (threadIdx.x == 0) {
    st.qpos[0] = run.hi - 1;
    st.qlo[0] = run.lo;
  }
  static_assert(C::kRows >= 16, "stage_q_terms' tiles of whole rows");
  const int total = ((run.n_rows + 15) & ~15) * (D / 2);
  for (int i = threadIdx.x; i < total; i += kAttnThreads) {
    const float2 x = i == static_cast<int>(threadIdx.x) ? first : load_q_pair<D>(p, run, i);
    store_q_pair<CT, C, C::kRows>(q_terms, i / (D / 2), 2 * (i % (D / 2)), x);
  }
}

// Attention of one run (tokens [tb, te) of one sequence) for this block's kv head and heads.
template <int D, typename CT, bool MQ>
__device__ void mma_attend_run(const AttnParams& p, const MmaSmem& sm, int tb, int te, int seq,
                               int kv_head, int h0, int n_h) {
  using C = MmaConfig<D, CT, MQ>;
  Run run;
  if (!make_run(p, tb, te, seq, kv_head, h0, n_h, C::kChunkShift, run)) return;

  const Cursor prod = start_ring<D, CT, C>(p, run, sm.ring);
  publish_key_ranges(p, run, sm);
  stage_q_terms<D, CT, C>(p, run, sm.q);

  float acc[C::kMTiles][C::kNTilesV][4], O[C::kMTiles][C::kNTilesV][4];
  zero_tiles<C>(acc, O);
  stream_chunks<D, CT, C>(
      p, run, sm.ring, prod,
      [&](const Cursor& c, const unsigned char* buf) {
        if (c.phase == 0) {
          mma_chunk_scores<D, CT, MQ>(p, run, c, sm, buf);
        } else {
          mma_chunk_values<D, CT, MQ>(run, c, sm, buf, acc);
        }
      },
      [&](int s) { mma_split_softmax<D, CT, MQ>(run, s, sm); },
      [&](int s) { mma_split_finish<D, CT, MQ>(p, run, s, sm, acc, O); });
  if (p.one_pass) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int m = 0; m < C::kMTiles; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * m + g + 8 * h;
        if (r >= run.n_rows) continue;
        float* o = p.out + (int64_t{tb + r / n_h} * p.n_heads + h0 + r % n_h) * D +
                   warp * C::kDimsW + 2 * t;
        const float L = sm.run_l[r];
#pragma unroll
        for (int n = 0; n < C::kNTilesV; ++n)
          *reinterpret_cast<float2*>(o + 8 * n) =
              make_float2(__fdiv_rn(O[m][n][2 * h], L), __fdiv_rn(O[m][n][2 * h + 1], L));
      }
  }
  __syncthreads();  // shared memory is reused by the block's next run
}

}  // namespace memra::kernels::detail
