// The decode kernel's ring form (private to attention.cu): the two-blocks run form of
// attention_decode.cuh (a block takes a run of its token's splits, V in K's rows) with three chunk
// slots instead of two, for blocks of at most kRows query heads (the 8B's group of four, the
// 0.6B's two).
//
// What it does: a split's four loads (K chunk 0, K chunk 1, V chunk 0, V chunk 1) go through three
// slots in turn, load n + 3 asked for as soon as load n has been read: a split's V chunk 0 is in
// flight from its start, and two or three chunks are in flight while the block computes, against
// one or two in the pipe form (a chunk's V waits for that chunk's scores to free its rows).
//
// What it was measured to do (fifty-sixth round, H100s; docs/PERFORMANCE.md). Written for 64
// sequences, where decode attention reads the cache at ~68% of DRAM: there the kernel did not move
// (64 x 640 keys 80.7 -> 82.0 us; chunks in flight are not its limit) and whole steps lost ~1%. At
// one sequence of 16,384 tokens of context the model's decode gained 2.5-3.6% in four A/Bs (the
// kernel bench at 16,384 keys did not show it; not understood). So attention.cu's
// MEMRA_DECODE_RING takes it only there by default: one-token steps whose grid is runs in one wave.
//
// The room for a third slot: a block of kRows rows stages only those rows of q's terms and of
// the scores (attention_mma.cuh's staged_row: the m16 tile's other rows repeat them, their results
// unstored), ~6 KB against ~26 KB for a whole tile, so that two blocks of three 34 KB slots still
// fit an SM at head_dim 128 (~109 KB a block). The chunks' arithmetic is attention_mma.cuh's own
// functions on the same operands in the same order: the same bits as the other decode forms
// (kernel-check compares them).
#pragma once

#include "kernels/attention/attention_decode.cuh"

namespace memra::kernels::detail {

template <int D, typename CT>
struct DecodeRingConfig {
  using C = MmaConfig<D, CT, false>;
  static constexpr int kRows = 4;   // query heads a block (rows of the tile staged)
  static constexpr int kSlots = 3;  // chunk slots: a split's four loads in turn
  static constexpr int kQBytes = C::kTerms * kRows * C::kRowBytes;
  static constexpr int kScBytes = kRows * C::kScStride * 4;
  static constexpr int kBytes =
      kQBytes + kScBytes + kRows * kRowStateBytes + kSlots * C::kChunkBytes;
  // Two blocks an SM (228 KB of shared memory, 1 KB of it the runtime's a block).
  static constexpr bool kTwoBlocks = 2 * (kBytes + 1024) <= 228 * 1024;
  static_assert(kSplit == 2 * C::kChunk, "a split's two chunks of K, then of V");
  static_assert(kQBytes % 16 == 0 && kScBytes % 16 == 0 && kRows * kRowStateBytes % 16 == 0,
                "16-byte aligned rows for ldmatrix and cp.async");
};

// Whether the ring form serves head_dim D with cache type CT at two blocks an SM.
template <int D, typename CT>
constexpr bool has_decode_ring() {
  if constexpr (has_decode_kernel<D, CT>() && D <= 128)
    return DecodeRingConfig<D, CT>::kTwoBlocks;
  else
    return false;
}

// The ring form's shared memory: q's terms and the scores of kRows rows, the rows' state, then the
// slots.
template <class RC>
__device__ __forceinline__ MmaSmem decode_ring_smem(unsigned char* base) {
  MmaSmem m;
  m.q = base;
  m.sc = reinterpret_cast<float*>(base + RC::kQBytes);
  m.ring = carve_row_state(m, m.sc + RC::kRows * RC::C::kScStride, RC::kRows);
  return m;
}

// grid: as the run form's (decode_block_run with runs; AttnParams::decode_groups, decode_shares).
// The host launches it for p.hpb <= kRows and power-of-two block sizes only. kTransposed (head_dim
// 128): the scores and values with the mma operands transposed (decode_transposed.cuh), the same
// bits.
template <int D, typename CT, bool kTransposed = false>
__global__ void __launch_bounds__(kAttnThreads, 2) decode_ring_kernel(const AttnParams p) {
  using RC = DecodeRingConfig<D, CT>;
  using C = typename RC::C;
  detail::wait_for_inputs();
  constexpr int kRows = RC::kRows;
  extern __shared__ __align__(16) unsigned char decode_ring_raw[];
  Run run;
  int s_first, s_last;
  if (!decode_block_run(p, true, C::kChunkShift, run, s_first, s_last)) {  // none: no reads
    decode_arrive<D>(p, true);
    return;
  }

  const MmaSmem sm = decode_ring_smem<RC>(decode_ring_raw);
  // Load n of the block (split s_first + n / 4's K chunk 0, K chunk 1, V chunk 0, V chunk 1) lands
  // in slot n % 3; each is one commit group, empty where its chunk holds no key of the token or
  // the run has ended, so that load n is always waited for with two younger groups in flight.
  const auto slot = [&](int n) { return sm.ring + (n % RC::kSlots) * C::kChunkBytes; };
  const auto live = [&](int s, int ci) { return run.ci_first(s) <= ci && ci <= run.ci_last(s); };
  SplitKeys<D, CT> keys = split_keys_of<D, CT>(p, run, s_first);
  copy_chunk<D, CT, 0>(keys, p.k, false, slot(0), live(s_first, 0));
  copy_chunk<D, CT, 1>(keys, p.k, false, slot(1), live(s_first, 1));
  copy_chunk<D, CT, 0>(keys, p.v, true, slot(2), live(s_first, 0));
  publish_key_ranges(p, run, sm);
  stage_q_terms<D, CT, C, 1, kRows>(p, run, sm.q);  // one token: rows are its heads
  for (int s = s_first; s <= s_last; ++s) {
    const int n0 = 4 * (s - s_first);
    const bool live0 = live(s, 0), live1 = live(s, 1), next = s < s_last;
    // K chunk 0 (load n0), then V chunk 1 into its slot (load n0 + 3).
    cp_async_wait(2);
    __syncthreads();  // everyone's copies; q and the row's range published (the last split done)
    if (live0) decode_chunk_scores<D, CT, kTransposed, 0, kRows>(p, run, s, sm, slot(n0));
    __syncthreads();  // chunk 0's K rows are free
    copy_chunk<D, CT, 1>(keys, p.v, true, slot(n0 + 3), live1);
    // K chunk 1 (load n0 + 1), then the next split's K chunk 0 into its slot (load n0 + 4).
    cp_async_wait(2);
    __syncthreads();
    if (live1) decode_chunk_scores<D, CT, kTransposed, 1, kRows>(p, run, s, sm, slot(n0 + 1));
    __syncthreads();  // the split's scores; chunk 1's K rows are free
    if (next) keys = split_keys_of<D, CT>(p, run, s + 1);
    copy_chunk<D, CT, 0>(keys, p.k, false, slot(n0 + 4), next && live(s + 1, 0));
    mma_split_softmax<D, CT, false>(run, s, sm);
    // V chunk 0 (load n0 + 2), then the next split's K chunk 1 into its slot (load n0 + 5).
    cp_async_wait(2);
    __syncthreads();  // everyone's; p published
    ChunkValues<D, CT, kTransposed, kRows> values;
    if (live0) values.template add<0>(run, s, sm, slot(n0 + 2), p.bs_shift);
    __syncthreads();  // chunk 0's V rows are free
    copy_chunk<D, CT, 1>(keys, p.k, false, slot(n0 + 5), next && live(s + 1, 1));
    // V chunk 1 (load n0 + 3), then the next split's V chunk 0 into its slot (load n0 + 6).
    cp_async_wait(2);
    __syncthreads();
    if (live1) values.template add<1>(run, s, sm, slot(n0 + 3), p.bs_shift);
    values.finish(p, run, s, sm);
    if (next) {
      __syncthreads();  // chunk 1's V rows, the scores' rows and the statistics are free
      copy_chunk<D, CT, 0>(keys, p.v, true, slot(n0 + 6), live(s + 1, 0));
    }
  }
  decode_arrive<D>(p, true);
}

}  // namespace memra::kernels::detail
