// The row-owning form of the tensor-core arithmetic (private to attention.cu): query tiles of
// 16-bit caches at head_dim 64 and 128, the prefill shape (one_pass, or the split plan's one split
// a block with attention_mma.cuh's partials for the combine). It computes every row with
// attention_mma.cuh's arithmetic, step for step, so its bits are that kernel's (and the decode
// kernel's): kernel-check compares them bit for bit.
//
// Why. attention_mma.cuh's query tile has 32 rows, its warps split a chunk's keys for the scores
// and the head dims for the weighted V, and the scores and p make a round trip through shared
// memory with a block barrier per phase: each mma waits on an ldmatrix of its A operand, and an SM
// issued 0.44 instructions a cycle (Nsight, tenth round): ~108 us a layer at 512 tokens, 20 TFLOP/s
// of the tensor cores' several hundred. Here each warp owns 16 rows (a block 128) for the whole
// run, as flash attention's warps do: the split's scores stay in the warp's registers (256 keys x
// 16 rows, 128 a thread), the softmax runs on them with quad shuffles, and p goes from the scores'
// accumulator layout straight into the A operand of the p . v mma (an m16n8 accumulator pair is an
// m16k16 A fragment). K and V chunks still come through the shared ring (stream_chunks), one
// ldmatrix of B serving the three terms' mmas.
//
// The arithmetic, against attention_mma.cuh (which the comments there define):
//   scores: each accumulator's chain over the dims in 16-dim steps, each step the terms of q from
//           the smallest, then * scale (and softcap) with explicit rounding (no contraction into
//           the next subtraction: the mma kernel stores s to shared memory between the two);
//   m, p:   m = max over the row's keys of the split, p = score_exp(s - m) or 0 outside its keys
//           (the scores outside made -inf first: e^-inf is that +0);
//   l:      lane L's sum in the mma kernel is the keys 64 c + 2 L, 64 c + 2 L + 1 (c = 0..3, in
//   that
//           order), then a xor tree over L (16, 8, 4, 2, 1). Key pair 2 L of a 64-key block is
//           n-tile L / 4 of it, quad thread L % 4 here, so a thread sums its n-tile i's pairs
//           over the four blocks in order, then folds i ^ 4, i ^ 2, i ^ 1 in registers and
//           t ^ 2, t ^ 1 with shuffles: the same additions in the same order;
//   p . v:  one chain over the split's 16-key steps in order, each the terms of p smallest first;
//           steps outside the run add nothing (p = 0 there and V's rows are zero-filled), so the
//           mma kernel's skipping them or not gives the same bits;
//   merge:  merge_weights / merge_value at the end of each split that has keys of the row, O / L
//           with __fdiv_rn at the end.
// The running O, M and L and the split's m and l live in shared memory, private to their thread
// (the split's accumulators and the scores fill the registers); read and written once a split.
#pragma once

#include "kernels/attention/attention_mma.cuh"

namespace memra::kernels::detail {

template <int D, typename CT>
struct FlashConfig {
  static_assert(sizeof(CT) == 2 && (D == 64 || D == 128), "16-bit cache, head_dim 64 or 128");
  static constexpr int kTerms = split_terms<CT>();
  static constexpr int kRows = 16 * kAttnWarps;  // a warp's m16 tile each
  static constexpr int kChunk = 64;
  static constexpr int kChunkShift = 6;
  static constexpr int kChunksPerSplit = kSplit / kChunk;
  static constexpr int kNTilesChunk = kChunk / 8;  // score n-tiles of a chunk
  static constexpr int kNTilesSplit = kSplit / 8;  // of a split: the registers a thread keeps
  static constexpr int kNTilesV = D / 8;           // value n-tiles: every head dim
  static constexpr int kSegElems = 8;
  static constexpr int kSegs = D / kSegElems;
  static constexpr int kRowBytes = D * 2 + 16;  // padded as MmaConfig's rows (ldmatrix banks)
  static constexpr int kChunkBytes = kChunk * kRowBytes;
  static constexpr int kQBytes = kRows * kRowBytes;  // one term of the rows' q
  // A thread's running O, then its rows' running M and L and the split's m and l (two rows each):
  // kept out of the registers, which the scores and the split's accumulators fill.
  static constexpr int kStateM = kNTilesV * 4, kStateL = kStateM + 2, kSplitM = kStateM + 4,
                       kSplitL = kStateM + 6;
  static constexpr int kStateFloats = kStateM + 8;
  static constexpr int kStateBytes = kAttnThreads * kStateFloats * 4;  // [kStateFloats][threads]
  static constexpr int kFixedBytes = kTerms * kQBytes + kStateBytes;
  static constexpr bool kZeroFillV = true;
  static constexpr int kBlocksPerSm = 1;
  static_assert(kSplit % kChunk == 0 && kChunk % 16 == 0 && kNTilesSplit % 8 == 0 &&
                    kNTilesV % 8 == 0,
                "chunks tile a split, 16-key steps tile a chunk, 64-key blocks tile a split");
};

// A thread's two rows (16 w + g and + 8): their key ranges.
struct FlashRows {
  bool valid[2];
  int32_t pos[2], lo[2];
};

// Scores of chunk CI of split s into s_reg's n-tiles [CI * 8, + 8): this warp's 16 rows x the
// chunk's 64 keys, q's terms from shared memory (ldmatrix), K from the chunk.
template <int D, typename CT, int CI>
__device__ __forceinline__ void flash_chunk_scores(
    const AttnParams& p, const unsigned char* q_terms, const unsigned char* buf,
    float (&s_reg)[FlashConfig<D, CT>::kNTilesSplit][4]) {
  using C = FlashConfig<D, CT>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int n0 = CI * C::kNTilesChunk;
#pragma unroll
  for (int n = 0; n < C::kNTilesChunk; ++n)
    s_reg[n0 + n][0] = s_reg[n0 + n][1] = s_reg[n0 + n][2] = s_reg[n0 + n][3] = 0.0f;
  const unsigned char* qa = q_terms + (16 * warp + (lane & 15)) * C::kRowBytes + 16 * (lane >> 4);
  // ldmatrix x4 of two n-tiles: matrices (n, dims +0..7), (n, +8..15), (n + 1, ...), (n + 1, ...).
  const unsigned char* kb =
      buf + (8 * (lane >> 4) + (lane & 7)) * C::kRowBytes + 16 * ((lane >> 3) & 1);
  // Per 16-dim step: q's terms and the chunk's K fragments first, then the mmas with the eight
  // accumulators interleaved (each accumulator's chain is still the step's terms, smallest first).
#pragma unroll 2
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[C::kTerms][4], b[C::kNTilesChunk / 2][4];
#pragma unroll
    for (int i = 0; i < C::kTerms; ++i) ldsm_x4(a[i], qa + i * C::kQBytes + 32 * kk);
#pragma unroll
    for (int n = 0; n < C::kNTilesChunk; n += 2)
      ldsm_x4(b[n / 2], kb + 8 * n * C::kRowBytes + 32 * kk);
#pragma unroll
    for (int i = C::kTerms - 1; i >= 0; --i)
#pragma unroll
      for (int n = 0; n < C::kNTilesChunk; n += 2) {
        mma16816<CT>(s_reg[n0 + n], a[i], b[n / 2][0], b[n / 2][1]);
        mma16816<CT>(s_reg[n0 + n + 1], a[i], b[n / 2][2], b[n / 2][3]);
      }
  }
  if (p.softcap > 0.0f) {  // one branch a chunk, not one a score
#pragma unroll
    for (int n = 0; n < C::kNTilesChunk; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = __fmul_rn(s_reg[n0 + n][e], p.scale);
        s_reg[n0 + n][e] = __fmul_rn(p.softcap, tanhf(__fdiv_rn(x, p.softcap)));
      }
  } else {
#pragma unroll
    for (int n = 0; n < C::kNTilesChunk; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s_reg[n0 + n][e] = __fmul_rn(s_reg[n0 + n][e], p.scale);
  }
}

// Row h's keys of split s: [kb, ke), empty when it has none there (or the row does not exist).
__device__ __forceinline__ void flash_row_keys(const FlashRows& rows, int h, int s, int& kb,
                                               int& ke) {
  kb = max(s * kSplit, rows.lo[h]);
  ke = rows.valid[h] ? min(s * kSplit + kSplit, rows.pos[h] + 1) : kb;
}

// The end of split s's scores: each row's m, its p (in place of the scores; 0 outside its keys)
// and l, in attention_mma.cuh's order (the file comment). mask_all: the masks on every split
// (AttnParams::mask_all, the A/B).
template <int D, typename CT>
__device__ __forceinline__ void flash_split_softmax(
    int s, const FlashRows& rows, float (&s_reg)[FlashConfig<D, CT>::kNTilesSplit][4], float* state,
    bool mask_all) {
  using C = FlashConfig<D, CT>;
  const int t = threadIdx.x % 4;
  // Whether every row of the warp has every key of the split (a causal prompt's splits but its
  // diagonal one, without a window): then no score is masked, and the compares and selects,
  // ~a third of the softmax's instructions, are left out (a warp-uniform branch; unless mask_all).
  bool full = !mask_all;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int kb, ke;
    flash_row_keys(rows, h, s, kb, ke);
    full = full && kb == s * kSplit && ke == s * kSplit + kSplit;
  }
  full = __all_sync(0xffffffffu, full);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Key 8 n + 2 t + e of the split is the row's when lo <= 8 n + e < hi (compile-time left
    // sides: two compares with immediates a score).
    int kb, ke;
    flash_row_keys(rows, h, s, kb, ke);
    const int lo = kb - s * kSplit - 2 * t, hi = ke - s * kSplit - 2 * t;
    const auto in = [&](int n, int e) { return 8 * n + e >= lo && 8 * n + e < hi; };
    // The scores outside the row's keys become -inf here, once: they never win the maximum, and
    // their weight below is e^-inf = +0 exactly, the 0 a select would give them (a row with no
    // key in the split gets NaN weights instead, which only its own accumulators see, and
    // flash_split_finish skips such a row). The maximum is exact whatever the order, so it is
    // taken as four chains (n-tiles n = i mod 4) joined at the end: a quarter of the latency.
    float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    if (full) {
#pragma unroll
      for (int n = 0; n < C::kNTilesSplit; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) m4[n % 4] = fmaxf(m4[n % 4], s_reg[n][2 * h + e]);
    } else {
#pragma unroll
      for (int n = 0; n < C::kNTilesSplit; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = s_reg[n][2 * h + e];
          v = in(n, e) ? v : -INFINITY;
          m4[n % 4] = fmaxf(m4[n % 4], v);
        }
    }
    float m = fmaxf(fmaxf(m4[0], m4[1]), fmaxf(m4[2], m4[3]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    // Lane sums: index i (0..7) is n-tile i of each 64-key block.
    float lane_sum[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) lane_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < C::kNTilesSplit / 8; ++c)
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = 8 * c + i;
          float& v = s_reg[n][2 * h + e];
          v = score_exp(__fsub_rn(v, m));
          lane_sum[i] = __fadd_rn(lane_sum[i], v);
        }
    float l4[4], l2[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) l4[i] = __fadd_rn(lane_sum[i], lane_sum[i + 4]);  // lanes xor 16
#pragma unroll
    for (int i = 0; i < 2; ++i) l2[i] = __fadd_rn(l4[i], l4[i + 2]);  // xor 8
    float l = __fadd_rn(l2[0], l2[1]);                                // xor 4
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
    state[(C::kSplitM + h) * kAttnThreads] = m;
    state[(C::kSplitL + h) * kAttnThreads] = l;
  }
}

// p . v over chunk CI's 16-key steps that hold keys of the run: acc += p (from the scores'
// registers, split into terms) times the chunk's V rows.
template <int D, typename CT, int CI>
__device__ __forceinline__ void flash_chunk_values(
    const Run& run, int s, const unsigned char* buf,
    const float (&s_reg)[FlashConfig<D, CT>::kNTilesSplit][4],
    float (&acc)[FlashConfig<D, CT>::kNTilesV][4]) {
  using C = FlashConfig<D, CT>;
  const int lane = threadIdx.x % 32;
  const int base = s * kSplit + CI * C::kChunk;
  const unsigned char* vb =
      buf + ((lane & 7) + 8 * ((lane >> 3) & 1)) * C::kRowBytes + 2 * 8 * (lane >> 4);
#pragma unroll
  for (int jj = 0; jj < C::kChunk / 16; ++jj) {
    if (base + 16 * jj >= run.hi || base + 16 * jj + 16 <= run.lo) continue;  // uniform
    constexpr int kStep0 = CI * C::kChunk / 16;
    const int j = kStep0 + jj;  // the split's 16-key step: n-tiles 2 j, 2 j + 1
    uint32_t a[C::kTerms][4];
    {
      uint16_t t0[C::kTerms], t1[C::kTerms];
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // a[.][r]: n-tile 2 j + r / 2, row g + 8 (r % 2)
        const float* v = s_reg[2 * j + r / 2] + 2 * (r % 2);
        split16<CT>(v[0], t0);
        split16<CT>(v[1], t1);
#pragma unroll
        for (int i = 0; i < C::kTerms; ++i) a[i][r] = t0[i] | uint32_t{t1[i]} << 16;
      }
    }
    // Eight value n-tiles' fragments at a time, then their mmas interleaved.
#pragma unroll
    for (int n8 = 0; n8 < C::kNTilesV; n8 += 8) {
      uint32_t b[4][4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ldsm_x4_t(b[k], vb + 16 * jj * C::kRowBytes + 2 * 8 * (n8 + 2 * k));
#pragma unroll
      for (int i = C::kTerms - 1; i >= 0; --i)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          mma16816<CT>(acc[n8 + 2 * k], a[i], b[k][0], b[k][1]);
          mma16816<CT>(acc[n8 + 2 * k + 1], a[i], b[k][2], b[k][3]);
        }
    }
  }
}

// Runs f.template operator()<CI>() for the runtime chunk index ci (the score registers are
// indexed by chunk at compile time only, so that they stay registers).
template <int N, class F>
__device__ __forceinline__ void with_chunk_index(int ci, F&& f) {
  if constexpr (N > 0) {
    if (ci == N - 1) return f(std::integral_constant<int, N - 1>{});
    with_chunk_index<N - 1>(ci, f);
  }
}

// The end of split s for this thread's rows: one_pass, the split's (m, l, acc) merged into the
// running state (the first split of a row starts it); split plan (one split a block), its
// partial to scratch as mma_split_finish writes it, for the combine. acc is left as it was.
template <int D, typename CT>
__device__ __forceinline__ void flash_split_finish(
    const AttnParams& p, const Run& run, int s, const FlashRows& rows, float* mine,
    const float (&acc)[FlashConfig<D, CT>::kNTilesV][4]) {
  using C = FlashConfig<D, CT>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int kb, ke;
    flash_row_keys(rows, h, s, kb, ke);
    if (kb >= ke) continue;
    const float m = mine[(C::kSplitM + h) * kAttnThreads];
    const float l = mine[(C::kSplitL + h) * kAttnThreads];
    if (!p.one_pass) {
      float* part = partial_row<D>(p, run, 16 * warp + g + 8 * h, s);
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n)
        *reinterpret_cast<float2*>(part + 8 * n + 2 * t) =
            make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
      if (t == 0) part[D] = m, part[D + 1] = l;
      continue;
    }
    float& M = mine[(C::kStateM + h) * kAttnThreads];
    float& L = mine[(C::kStateL + h) * kAttnThreads];
    if (s == rows.lo[h] / kSplit) {
      M = m, L = l;
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) mine[(4 * n + 2 * h + e) * kAttnThreads] = acc[n][2 * h + e];
    } else {
      float w_old, w_new;
      merge_weights(M, L, m, l, w_old, w_new);
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& o = mine[(4 * n + 2 * h + e) * kAttnThreads];
          o = merge_value(o, acc[n][2 * h + e], w_old, w_new);
        }
    }
  }
}

// Attention of one run (tokens [tb, te) of one sequence; one_pass, or the split plan's split
// blockIdx.y) for this block's kv head and heads: warp w owns rows [16 w, 16 w + 16) of the run.
template <int D, typename CT>
__device__ void flash_attend_run(const AttnParams& p, unsigned char* smem, int tb, int te, int seq,
                                 int kv_head, int h0, int n_h) {
  using C = FlashConfig<D, CT>;
  Run run;
  if (!make_run(p, tb, te, seq, kv_head, h0, n_h, C::kChunkShift, run)) return;
  unsigned char* q_terms = smem;
  float* state_all = reinterpret_cast<float*>(q_terms + C::kTerms * C::kQBytes);
  unsigned char* ring = reinterpret_cast<unsigned char*>(state_all) + C::kStateBytes;
  float* mine = state_all + threadIdx.x;

  const Cursor prod = start_ring<D, CT, C>(p, run, ring);
  if (p.q_loads_batched)
    stage_q_terms<D, CT, C, 8>(p, run, q_terms);
  else
    stage_q_terms<D, CT, C>(p, run, q_terms);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const bool warp_rows = 16 * warp < run.n_rows;  // uniform per warp
  FlashRows rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 16 * warp + g + 8 * h;
    rows.valid[h] = r < run.n_rows;
    const KeyRange kr = key_range(p.positions[tb + (rows.valid[h] ? r / n_h : 0)], p.window);
    rows.pos[h] = kr.pos, rows.lo[h] = kr.lo;
  }
  float s_reg[C::kNTilesSplit][4], acc[C::kNTilesV][4];
  stream_chunks<D, CT, C>(
      p, run, ring, prod,
      [&](const Cursor& c, const unsigned char* buf) {
        if (!warp_rows) return;
        with_chunk_index<C::kChunksPerSplit>(c.ci, [&](auto ci) {
          constexpr int CI = decltype(ci)::value;
          if (c.phase == 0) {
            flash_chunk_scores<D, CT, CI>(p, q_terms, buf, s_reg);
          } else {
            flash_chunk_values<D, CT, CI>(run, c.s, buf, s_reg, acc);
          }
        });
      },
      [&](int s) {
        if (!warp_rows) return;
        // Chunks of the split outside the run hold no scores: their keys are outside every
        // row's range, so only defined values need to be there.
        for (int ci = 0; ci < C::kChunksPerSplit; ++ci) {
          if (ci >= run.ci_first(s) && ci <= run.ci_last(s)) continue;
          with_chunk_index<C::kChunksPerSplit>(ci, [&](auto k) {
            constexpr int CI = decltype(k)::value;
#pragma unroll
            for (int n = 0; n < C::kNTilesChunk; ++n)
              s_reg[CI * C::kNTilesChunk + n][0] = s_reg[CI * C::kNTilesChunk + n][1] =
                  s_reg[CI * C::kNTilesChunk + n][2] = s_reg[CI * C::kNTilesChunk + n][3] = 0.0f;
          });
        }
        flash_split_softmax<D, CT>(s, rows, s_reg, mine, p.mask_all);
#pragma unroll
        for (int n = 0; n < C::kNTilesV; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
      },
      [&](int s) {
        if (warp_rows) flash_split_finish<D, CT>(p, run, s, rows, mine, acc);
      },
      !p.two_barriers);
  if (warp_rows && p.one_pass) {  // (the split plan's combine writes the output)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!rows.valid[h]) continue;
      const int r = 16 * warp + g + 8 * h;
      float* o = p.out + (int64_t{tb + r / n_h} * p.n_heads + h0 + r % n_h) * D + 2 * t;
      const float L = mine[(C::kStateL + h) * kAttnThreads];
#pragma unroll
      for (int n = 0; n < C::kNTilesV; ++n)
        *reinterpret_cast<float2*>(o + 8 * n) =
            make_float2(__fdiv_rn(mine[(4 * n + 2 * h) * kAttnThreads], L),
                        __fdiv_rn(mine[(4 * n + 2 * h + 1) * kAttnThreads], L));
    }
  }
  __syncthreads();  // shared memory is reused by the block's next run
}

}  // namespace memra::kernels::detail
