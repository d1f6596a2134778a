// The decode attention kernel's switches (private to attention.cu, which alone includes it, so
// the anonymous namespace is that file's): which form each one-query launch takes, read once from
// the environment. Each says what it selects, its default and the measurement that chose it;
// every choice gives the same bits. attention.cu keeps the launches' logic that reads them.
#pragma once

#include <cstdint>

#include "core/env.h"
#include "kernels/attention/attention_decode.cuh"

namespace memra::kernels {
namespace {

using detail::AttnParams;

bool decode_one_pass_enabled() {
  static const bool enabled = env_switch("MEMRA_DECODE_ONE_PASS", false);
  return enabled;
}

// MEMRA_DECODE_KERNEL: unset or all, the decode kernel (attention_decode.cuh) takes every
// split-plan one-query launch it can serve, any grid (the default since the H200 A/B of the
// twenty-fifth round, docs/PERFORMANCE.md: with its two-blocks form, 8B Q4_K_M at 64 sequences
// 4,058.6 -> 4,211.0 tok/s and at 16,384 tokens of context 209.6 -> 224.3); small, only grids under
// two blocks an SM (short contexts, few sequences: the default before); 0, never (the generic
// kernel, which kernel-check then covers). The same bits either way.
enum class DecodeKernel { off, small_grids, all };  // in env_choice's order
DecodeKernel decode_kernel_mode() {
  static const auto mode =
      static_cast<DecodeKernel>(env_choice("MEMRA_DECODE_KERNEL", {"0", "small", "all"}, 2));
  return mode;
}

// MEMRA_DECODE_SHARED_ROWS: the decode kernel's form with V in K's rows, two blocks an SM
// (DecodeConfig's kShared), for its grids of more blocks than SMs where that raises its blocks an
// SM (unset or 1: the default since the H200 A/B, docs/PERFORMANCE.md twenty-fifth round: 8B
// Q4_K_M at 8 sequences 1,802.8 -> 1,912.6 tok/s), for every grid it takes (all: kernel-check's
// coverage), or for none (0: the A/B). The same bits either way.
enum class SharedRows { off, big_grids, all };  // in env_choice's order
SharedRows shared_rows_mode() {
  static const auto mode =
      static_cast<SharedRows>(env_choice("MEMRA_DECODE_SHARED_ROWS", {"0", "1", "all"}, 1));
  return mode;
}

// MEMRA_DECODE_SPLITS: the decode kernel's splits a block in its two-blocks form (kShared). auto,
// where a split a block would be more than one wave (two blocks an SM), a run of splits
// a block: the grid's split groups a token are as many as make one wave (at least one), and each
// token's live splits are shared out among them (AttnParams::decode_groups); 1, a split a block
// on every grid (the A/B). Measured on the H200 (docs/PERFORMANCE.md, forty-second round):
// attention 64 x 4,096 keys 451.5 -> 429.8 us, 8B Q4_K_M at 16,384 tokens 236.3 -> 238.4 tok/s and
// at 64 sequences 4,719 -> 4,776; the form with V's own rows (one block an SM) grouped the same way
// was slower (16,384 keys 43.7 -> 60.0 us), so it always takes a split a block. The same partials
// either way: the same bits.
//
// unset or fill (the default since the fifty-fourth round; `gpu_check.sh groups` is its A/B against
// auto): the number of groups that finishes the grid soonest when the larger runs go first
// (RunShares::longer_first, on grids of more than a wave), by runs_makespan. Why: auto
// gives a token's kv head one group wherever the grid's tokens x heads exceed half a wave, so at
// 17-32 sequences (8B: 136-256 columns of ~3 splits on 264 slots) a block walks all three splits
// while up to half the slots sit idle, and at 34-66 sequences (272-528 columns) the columns past
// the first wave walk their three splits after it: 6 splits' time where the work is 3.1 to 6 (at 40
// sequences 3.6: fill's two groups take 4). The H100's decode attention at 64 sequences, 75 us a
// layer (fifty-third round), is ~6 such splits. Measured on the H100 against auto
// (docs/PERFORMANCE.md, fifty-fourth round): 8B Q4_K_M c20 +2.6%, c40 +5.6%, c48 +4.6%; 0.6B Q4_K_M
// c20 +6.7%, c40 +10.3%, c48 +9.3%; c64 the same grid.
//
// last (written in the fifty-fourth round, measured and removed in the fifty-fifth: fill's groups
// with the longer runs last in each token's splits, where its partial split is) gained nowhere on
// the H100 (8B Q4_K_M c40 -0.2%, c20 -0.9%, c48 -0.8%; 0.6B c40 +1.0%, c48 -2.8%): a split's time
// goes with its fixed phases more than with its live chunks.
enum class DecodeSplits { one, automatic, fill };  // in env_choice's order
DecodeSplits decode_splits_mode() {
  static const auto mode =
      static_cast<DecodeSplits>(env_choice("MEMRA_DECODE_SPLITS", {"1", "auto", "fill"}, 2));
  return mode;
}

// MEMRA_DECODE_PIPE: unset or 1, the decode kernel's forms with V in K's rows (the two-blocks
// form, and head_dim 256's) take a split a chunk at a time (attention_decode.cuh's kPipe: a
// chunk's V copies start under the other chunk's scores and the softmax, the next split's K under
// the values); 0, a phase at a time (the A/B). The default since the fifty-second round's H100
// A/B (docs/PERFORMANCE.md): 8B Q4_K_M at 16,384 tokens of context 226.2 -> 230.8 tok/s, c64
// 6,456 -> 6,521. The same bits either way.
bool decode_pipe_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_PIPE", true);
  return on;
}

// MEMRA_DECODE_BULK: the one-split form at head_dim 128 (short decode at a few sequences: one
// block an SM) lands its split's K and V rows by bulk copies, two a thread (decode_bulk.cuh),
// instead of 32 cp.async a thread. Unset or auto, wherever the device runs the kernel's sm_90
// code (else the cp.async form); 1, required (an error by name elsewhere); 0, never (the A/B).
// The default since the sixty-first round's H100 A/B (docs/PERFORMANCE.md; medians of four
// rounds, with MEMRA_DECODE_CHAINS on: 0.6B Q4_K_M c1 935.6 -> 946.1 tok/s, 8B Q4_K_M 329.2 ->
// 331.1, BF16 171.7 -> 172.1; at 512 keys, issuing the copies and staging q 8,266 -> 6,342
// cycles). The twenty-sixth round's bulk form (a warp's rows on its own mbarrier) measured no
// faster on the H200 and was removed; this one is a block's rows on two. The same bits either way.
enum class DecodeBulk { off, on, automatic };  // in env_choice's order
DecodeBulk decode_bulk_mode() {
  static const auto mode =
      static_cast<DecodeBulk>(env_choice("MEMRA_DECODE_BULK", {"0", "1", "auto"}, 2));
  return mode;
}

// MEMRA_DECODE_CHAINS: unset or 1, that form runs its scores and values in decode_chains.cuh's
// issue order (both chunks' chains side by side, operands a step ahead); 0, chunk by chunk in
// attention_mma.cuh's (the A/B). The default since the sixty-first round's H100 A/B (medians of
// four rounds, with bulk copies on: 0.6B Q4_K_M c1 933.1 -> 946.1 tok/s, 8B Q4_K_M 328.3 ->
// 331.1, BF16 171.4 -> 172.1; at 512 keys the scores 4,097 -> 2,741 cycles, the values 4,164 ->
// 3,849). The same bits either way.
bool decode_chains_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_CHAINS", true);
  return on;
}

// MEMRA_DECODE_CLUSTER_MERGE: unset or 1, the bulk form with short chains, where it merges its own
// partials (decode_merges) over at most kClusterMaxSplits splits a token, is launched in clusters
// of a token's splits that merge through their blocks' shared memory (decode_cluster.cuh) instead
// of the arrival counters and the last block's loads from L2; 0, the counters (the A/B). The
// default since the sixty-second round's H100 A/B (docs/PERFORMANCE.md; medians of two rounds:
// 0.6B Q4_K_M c1 943.6 -> 978.5 tok/s, 8B Q4_K_M 331.8 -> 334.9, BF16 172.7 -> 172.5; the kernel
// at 512 keys 10.8 -> 9.9 us, the partial and the merge 6,261 -> 4,542 cycles). The same bits
// either way. (The sixty-fifth round measured and removed a push form, each block storing its
// partial into the merging blocks' shared memory: 8B Q4_K_M c1 341.2 -> 335.6 tok/s, BF16 174.0
// -> 173.3, the 0.6B even.) Unset or async: the tensor form's clusters merge by asynchronous
// stores into each share's block (decode_cluster_async.cuh: no release fence, no second barrier),
// the other clustered forms as with 1; 1, every clustered form by the pull merge (the A/B). The
// default since the seventy-first round (H100, `gpu_check.sh qasync`, three runs of two rounds
// with MEMRA_DECODE_V_AFTER=q, the default beside it: 0.6B Q4_K_M c1 +0.0/+2.5/+0.7%, 8B
// +0.9/+0.2/+0.6%; the kernel at 512 keys 7.39 us stamped against the seventieth round's 7.90),
// once its wait for the peers' inboxes moved under K's landing: the release at cluster scope is
// what the pull merge's barrier pays (tools/probes/cluster_handoff.cu: ~1,450 cycles a hand-off
// with it, ~400 with a relaxed arrival). The same bits either way.
enum class ClusterMerge { off, pull, async };  // in env_choice's order
ClusterMerge decode_cluster_merge_mode() {
  static const auto mode =
      static_cast<ClusterMerge>(env_choice("MEMRA_DECODE_CLUSTER_MERGE", {"0", "1", "async"}, 2));
  return mode;
}
bool decode_cluster_merge_enabled() {
  return decode_cluster_merge_mode() != ClusterMerge::off;
}

// MEMRA_DECODE_TRANSPOSED: unset or 1, the bulk form with short chains, at most
// kTransposedMaxRows query rows a block, takes its scores and values with the mma operands
// transposed (decode_transposed.cuh: the keys or dims as A's rows, the query rows as B's columns,
// half the products); 0, the query rows as A's (the A/B). The default since the sixty-second
// round's H100 A/B (docs/PERFORMANCE.md; medians of two rounds: 0.6B Q4_K_M c1 947.6 -> 974.4
// tok/s, 8B Q4_K_M 331.5 -> 335.0, BF16 172.8 -> 173.6; at 512 keys the scores 2,687 -> 1,789
// cycles, the values 3,390 -> 2,723). The same bits either way (tools/probes/mma_transpose.cu,
// and kernel-check against the generic kernel).
bool decode_transposed_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_TRANSPOSED", true);
  return on;
}

// MEMRA_DECODE_TRANSPOSED_CHUNKS: unset or 1, the forms that take a split a chunk at a time (the
// pipe form, V in K's rows: many sequences, long contexts; and the ring form) take their scores
// and values with the mma operands transposed, as MEMRA_DECODE_TRANSPOSED does for the one-split
// form (decode_transposed.cuh: half the products), at head_dim 128 with at most
// kTransposedMaxRows query rows a block; 0, the query rows as A's (the A/B). The default since the
// sixty-fifth round's H100 A/B (docs/PERFORMANCE.md; medians of two rounds: 8B Q4_K_M c8 2,154.2
// -> 2,176.7 tok/s, c64 7,251.1 -> 7,246.5, at 16,384 tokens of context 244.3 -> 247.9; 0.6B c8
// 5,943.6 -> 6,096.4; the kernel at 1 x 16,384 keys 44.5 -> 43.5 us, 64 x 4,096 422.6 -> 414.7).
// The same bits either way.
bool decode_transposed_chunks_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_TRANSPOSED_CHUNKS", true);
  return on;
}

// MEMRA_DECODE_TENSOR: unset or 1, the transposed form lands its split's rows by tensor copies,
// two a cache block's half rows for K and V (decode_tensor.cuh: 64 copies for a split over blocks
// of 16 slots, against 512 bulk copies), where the cache's blocks are counted (PagedKv::n_blocks)
// and hold 8 to 256 slots; 0, by bulk copies (the A/B). The default since the sixty-fifth round's
// H100 A/B (docs/PERFORMANCE.md; medians of two rounds: 0.6B Q4_K_M c1 1,001.3 -> 1,019.0 tok/s,
// 8B Q4_K_M 341.1 -> 342.9, BF16 174.5 -> 175.2; the kernel at 512 keys 9.10 -> 8.75 us). The
// same bits either way.
bool decode_tensor_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_TENSOR", true);
  return on;
}

// MEMRA_DECODE_EARLY_META (=0 off): the tensor form's one-split blocks read their run (the token's
// position and sequence) and their copies' block-table entries before the kernel's wait, where
// they overlap the kernel before instead of opening the block's chain (attention_decode.cuh:
// early_decode_run, which says why the order is safe); 0, after it. The default since the
// sixty-seventh round: on an H100 (`gpu_check.sh earlymeta`, medians of two) the kernel at 512 keys
// 8.8 -> 8.5 us alone, 0.6B Q4_K_M c1 +1.1%, 8B Q4_K_M +0.7%, BF16 +0.3%. The same bits either way.
bool decode_early_meta_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_EARLY_META", true);
  return on;
}

// MEMRA_DECODE_TENSOR_SPREAD (=0 off): the tensor form issues a split's copies from all eight
// warps, a few a warp, instead of 32 a warp from two (decode_tensor.cuh: tensor_copy_index).
// MEMRA_DECODE_Q_FIRST (=0 off): its one-split blocks load their thread's first pair of q (the
// query row of the step's prologue) right after the kernel's wait, before the copies' issue, and
// stage it after it (attention_decode.cuh), with the row's key range from the run, instead of
// loading it after the copies. Why both: the sixty-seventh round's stamps at 512 keys (H100) put
// ~2,300 cycles on the copies' issue and ~1,560 on q's staging behind it, while K's rows had landed
// 140 cycles after. Spread alone moves the time (copies 2,468 -> 1,492 cycles, q 1,863 -> 2,470:
// q's L2 round trip waits behind the copies' data, the kernel 9.0 -> 9.1 us); with q first the
// chain to the scores is 4,471 -> 3,112 cycles and the kernel 9.0 -> 8.3 us (F16 8.7 -> 8.2). The
// defaults since the sixty-eighth round's H100 A/B (`gpu_check.sh spreadq`, medians of two against
// packed: spread and q first 0.6B Q4_K_M c1 +2.0%, 8B Q4_K_M +0.4%, BF16 +0.4%; spread alone +2.0%,
// -0.4%, +0.6%). The same bits each way.
bool decode_tensor_spread_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_TENSOR_SPREAD", true);
  return on;
}
bool decode_q_first_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_Q_FIRST", true);
  return on;
}

// MEMRA_DECODE_V_AFTER: when the tensor form's one-split blocks issue V's copies
// (decode_tensor.cuh: TensorV). copies, with K's; unset or q, once q is staged (the default since
// the seventy-first round, with the async merge: above); keys, once K's rows have landed. Why: the
// sixty-eighth round's stamps at 512 keys (H100) put K's landing last on the chain to the scores
// (764 cycles after q's staging), with V's 64 KB landing beside K's 64 KB through the same SM's
// intake, while the values start ~3,000 cycles after K lands. The same bits each way. Measured in
// the seventieth round (H100, `gpu_check.sh vasync`, one run): q, the kernel at 512 keys 7.90
// -> 7.78 us stamped (not run on whole steps); keys, K's landing 442 -> 1,551 cycles, 0.6B Q4_K_M
// c1 -2.8%; keys with the async merge +0.7%, 8B +0.5% (not understood beside keys alone). The
// seventy-first round's three runs (qasync) against the pull merge with V beside K: q with the
// async merge +1.1% on the 0.6B and +0.6% on the 8B on average, keys with it +1.2% and +0.6%, the
// async merge alone +0.8% and +0.3%; so q, the placement whose phases show why (K alone in the SM's
// intake while q stages).
detail::TensorV decode_v_after() {
  static const auto after =
      static_cast<detail::TensorV>(env_choice("MEMRA_DECODE_V_AFTER", {"copies", "q", "keys"}, 1));
  return after;
}

// MEMRA_DECODE_K_AFTER_Q=1: the tensor form's one-split blocks issue K's copies (and V's, unless
// MEMRA_DECODE_V_AFTER=keys) once q is staged instead of right after the kernel's wait. Why: at
// 512 keys (seventy-first and seventy-second rounds, H100) q's staging ends ~2,750 cycles after
// the wait though each thread's first pair of q is loaded before the copies' issue (an L2 round
// trip: ~600-800 cycles alone), and K lands ~400 cycles after it: q's load returning behind K's
// 64 KB through the SM's intake would put q's staging, not K's landing, on the chain to the
// scores. With K after q, the chain is q's round trip, then K's copies. Off by default (written in
// the seventy-second round, not yet measured: `gpu_check.sh kafterq`); the same rows land in the
// same places, so the same bits.
bool decode_k_after_q_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_K_AFTER_Q", false);
  return on;
}

// MEMRA_DECODE_EARLY_BARRIERS=1: the tensor form's one-split blocks, their run read before the
// kernel's wait (MEMRA_DECODE_EARLY_META), also initialize their copies' barriers (and the async
// merge's inbox, with their arrival at the cluster barrier that says so) before it, under the
// kernel before, instead of after it: the barriers' byte counts come from the run (the step's
// metadata), which no kernel writes. Why: at 512 keys (seventy-first round, H100) the copies'
// issue ends ~1,400 cycles after the wait, of which K's 32 copies are ~400; thread 0's
// initialization and the block barrier behind it are on every block's chain. Off by default
// (written in the seventy-second round, not yet measured: `gpu_check.sh earlybars`, with the
// stamps' barriers-set phase); the same copies complete on the same barriers, so the same bits.
bool decode_early_barriers_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_EARLY_BARRIERS", false);
  return on;
}

// MEMRA_DECODE_STAMPS=1: the one-split form at head_dim 128 records its phases (kernels.h:
// decode_phase_stamps). Off by default; the same bits either way.
bool decode_stamps_enabled() {
  static const bool on = env_switch("MEMRA_DECODE_STAMPS", false);
  return on;
}

// MEMRA_DECODE_RING: where the two-blocks form's launches of at most four query heads a block (the
// 8B's and the 0.6B's groups) take the ring form (attention_decode_ring.cuh: a split's four loads
// through three chunk slots, V's first chunk in flight from the split's start) instead of the pipe
// form. Unset or auto: one-token steps whose grid is runs of splits in one wave (a long context at
// one sequence: the 8B Q4_K_M at 16,384 tokens of context +2.5% to +3.6% in four H100 A/Bs,
// fifty-sixth round; at 4,096 tokens the grid is a split a block, no ring); 1, every such launch
// (kernel-check's coverage; c8 -0.7% to -1.3% in three A/Bs, its one-wave grid of runs of at most
// one live split, and c64 -0.5% to -1.0%, runs of three over two waves); 0, none (the A/B). The
// same bits either way.
enum class DecodeRing { off, on, automatic };  // in env_choice's order
DecodeRing decode_ring_mode() {
  static const auto mode =
      static_cast<DecodeRing>(env_choice("MEMRA_DECODE_RING", {"0", "1", "auto"}, 2));
  return mode;
}

// MEMRA_DECODE_MERGE: where the decode kernels merge a token's split partials themselves, the last
// of its blocks to finish (decode_merge.cuh), instead of a combine launch after them. Unset or
// auto: steps of at most kMergeMaxTokens tokens and kMergeMaxSplits splits (contexts up to 2,048
// keys) whose grid is one wave, where the combine is a launch and a latency chain for a few
// partials; 1, every decode kernel launch whose arrival counters fit (kernel-check's coverage of
// long contexts); 0, none. Measured on an H100 (docs/PERFORMANCE.md, fifty-seventh round, three
// alternated rounds, every step of at most 8 splits merging): 8B Q4_K_M c1 +0.4%, c8 +0.6%,
// 0.6B c1 +0.9%, c8 +0.4%, but c64 -2.2% and the 0.6B's c64 -6.9% (grids of two waves, where
// every block's merge tail is on the path; not understood, as memra-kernel-bench's 64 x 640 keys
// gained 2.7%): auto keeps the combine there, and at 9-32 tokens, which no A/B has run. The same
// bits either way (merge_split).
enum class DecodeMerge { off, on, automatic };  // in env_choice's order
DecodeMerge decode_merge_mode() {
  static const auto mode =
      static_cast<DecodeMerge>(env_choice("MEMRA_DECODE_MERGE", {"0", "1", "auto"}, 2));
  return mode;
}
constexpr int32_t kMergeMaxSplits = 8;
constexpr int32_t kMergeMaxTokens = 8;

// Whether a decode kernel launch of `heads` (kv heads x chunks) a token, its grid one wave or not,
// merges its own partials.
bool decode_merges(const AttnParams& p, int64_t heads, bool one_wave) {
  const DecodeMerge mode = decode_merge_mode();
  if (p.arrivals == nullptr || int64_t{p.n_tokens} * heads > detail::kMaxArrivals) return false;
  return mode == DecodeMerge::on ||
         (mode == DecodeMerge::automatic && p.n_splits <= kMergeMaxSplits &&
          p.n_tokens <= kMergeMaxTokens && one_wave);
}

}  // namespace
}  // namespace memra::kernels
