// The cluster merge by asynchronous stores (private to attention.cu; the decode kernel's kAsync
// form, with kCluster and kTensor: MEMRA_DECODE_CLUSTER_MERGE=async): each block of a token's
// cluster pushes its split's partial, straight from the value accumulators' registers, into the
// shared memory of the block whose share of the token's outputs holds each value, with st.async
// stores that complete their bytes on that block's inbox mbarrier; each block waits for its inbox
// alone, merges its share from its own shared memory in the combine kernel's order with its
// arithmetic (merge_cluster_share: the same bits as decode_cluster.cuh's pull merge), and leaves.
//
// Why. The pull merge (decode_cluster.cuh) publishes the partials with a cluster barrier whose
// arrival has release semantics, loads the others' shared memory, and holds every block at a
// second barrier until all have read. The sixty-eighth round's stamps at 512 keys (H100) put
// ~1,430 cycles (max 1,567 of 64 blocks) between a block's values and that first barrier's end,
// with the two blocks' values ending within a few cycles of each other; with the stamps held in
// registers (no global stores for the release to wait on) the seventieth round still measured
// ~1,400 cycles in every block: the barrier's. Here no thread fences: an st.async's data and its
// completion travel together, and the only wait is the inbox's own. (The sixty-fifth round's push
// form stored with plain remote stores behind the same release barrier, and was no faster.)
//
// The inboxes need every block's barrier initialized before any push: each block initializes its
// barrier at its start and arrives (relaxed) at the cluster barrier, and a block waits on it while
// its K rows land (the decode kernel's split), by when every block has long arrived, so that the
// wait's own cost sits under the copies' latency rather than between the values and the pushes.
#pragma once

#include "kernels/attention/decode_cluster.cuh"
#include "kernels/attention/decode_transposed.cuh"
#include "kernels/bulk_copy.cuh"
#include "kernels/cluster.cuh"

namespace memra::kernels::detail {

// A block's inbox at `base` (16-byte aligned, the same offset in every block): its barrier, each
// pushing split's statistics of every row, then each pushing split's values of the block's share.
// Slots are by split relative to the token's first (k = s - range.first).
template <int D>
struct ClusterInbox {
  static constexpr int kStatsOffset = 16;
  static constexpr int kValuesOffset = kStatsOffset + kClusterMaxSplits * kTransposedMaxRows * 8;
  // groups x share values: at most the token's outputs plus a value a split of rounding up.
  static constexpr int kBytes = kValuesOffset + 4 * (kTransposedMaxRows * D + kClusterMaxSplits);
  uint64_t* bar;
  float2* stats;  // [k][row]: (m, l)
  float* values;  // [k][share]
  __device__ explicit ClusterInbox(unsigned char* base)
      : bar(reinterpret_cast<uint64_t*>(base)),
        stats(reinterpret_cast<float2*>(base + kStatsOffset)),
        values(reinterpret_cast<float*>(base + kValuesOffset)) {}
};

// The merge target of a block with keys, from its run (merge_target's, without the position's
// second read).
__device__ __forceinline__ MergeTarget merge_target_of(const Run& run) {
  const int32_t pos = run.hi - 1;
  return {run.h0, run.n_h, {pos, run.lo, run.lo / kSplit, pos / kSplit}};
}

// The splits that push into every inbox: the token's that the launch has (a range past the groups
// is a caller bug, which the merge reports; the splits it lacks push nothing).
__device__ __forceinline__ int pushing_splits(const KeyRange& range, int groups) {
  return max(0, min(range.last, groups - 1) - range.first + 1);
}

// The inboxes' accounting, for every shape the form takes (n_h query rows, `groups` splits, D
// dims): output i goes to block i / share (cluster_push), so block g receives outputs [g share,
// min(total, (g + 1) share)), exactly its merge_share (what cluster_inbox_start expects), as long
// as the last output's owner is a block of the cluster; and a block's inbox holds groups x share
// values. A miscount would leave a block waiting forever, or merging before its inbox is full.
constexpr bool inbox_counts_hold(int D) {
  for (int n_h = 1; n_h <= kTransposedMaxRows; ++n_h) {
    for (int groups = 1; groups <= kClusterMaxSplits; ++groups) {
      const int total = n_h * D, share = (total + groups - 1) / groups;
      if ((total - 1) / share >= groups) return false;
      if (groups * share > kTransposedMaxRows * D + kClusterMaxSplits) return false;  // kBytes
    }
  }
  return true;
}
static_assert(inbox_counts_hold(128), "the async merge's inbox accounting");

// Thread 0, at the block's start: the inbox's barrier, expecting every pushing split's statistics
// of every row and its values of this block's share. The caller then syncs the block, and every
// thread arrives at the cluster barrier (cluster_inbox_ready): the barrier's initialization,
// released to the cluster by the fence, is what the pushers' wait (cluster_inboxes_ready_wait)
// acquires.
template <int D>
__device__ __forceinline__ void cluster_inbox_start(const ClusterInbox<D>& in,
                                                    const MergeTarget& to, const DecodePlace& at) {
#ifdef MEMRA_SM90_CODE
  const MergeShare mine = merge_share(to.n_h * D, at.group, at.groups);
  const int values = max(0, mine.end - mine.begin);
  mbar_init(in.bar, 1);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  mbar_arrive_expect_tx(in.bar, pushing_splits(to.range, at.groups) * (to.n_h * 8 + values * 4));
#else
  (void)in, (void)to, (void)at;
  __trap();
#endif
}

// Every thread, once thread 0's cluster_inbox_start is behind a block barrier: this block's arrival
// at the cluster barrier that the pushers wait on (cluster_inboxes_ready_wait) before their first
// push.
__device__ __forceinline__ void cluster_inbox_ready() {
#ifdef MEMRA_SM90_CODE
  cluster_arrive_relaxed();
#else
  __trap();
#endif
}

// Every thread of a block with keys, once cluster_inbox_ready's arrival is behind it: waits until
// every block's inbox barrier is initialized (the cluster barrier's phase that cluster_inbox_ready
// arrived at). The decode kernel waits while its K rows land, before cluster_push.
__device__ __forceinline__ void cluster_inboxes_ready_wait() {
#ifdef MEMRA_SM90_CODE
  cluster_wait();
#else
  __trap();
#endif
}

// Every thread of a block with keys, after its values and cluster_inboxes_ready_wait: its split's
// partial into the inboxes. acc: decode_values_t's (this thread's rows 2 t + e at dims d and d + 8,
// as decode_split_finish_t stores them); the statistics: the softmax's (sm.split_m, sm.split_l,
// published by its barrier). Output i goes to the block whose share holds it, every row's
// statistics to every block.
template <int D>
__device__ __forceinline__ void cluster_push(const DecodePlace& at, const MergeTarget& to,
                                             const MmaSmem& sm, const ClusterInbox<D>& in,
                                             const float (&acc)[4]) {
#ifdef MEMRA_SM90_CODE
  const int k = at.group - to.range.first;
  const int share = merge_share(to.n_h * D, 0, at.groups).share;
  if (static_cast<int>(threadIdx.x) < to.n_h * at.groups) {
    const int r = threadIdx.x % to.n_h, g = threadIdx.x / to.n_h;
    store_async_f32x2(cluster_addr(in.stats + k * kTransposedMaxRows + r, g), sm.split_m[r],
                      sm.split_l[r], cluster_addr(in.bar, g));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
  const int d = warp * (D / kAttnWarps) + (lane >> 2);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = 2 * t + e;
    if (r >= to.n_h) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = r * D + d + 8 * h, g = i / share;
      store_async_f32(cluster_addr(in.values + k * share + (i - g * share), g), acc[2 * h + e],
                      cluster_addr(in.bar, g));
    }
  }
#else
  (void)at, (void)to, (void)sm, (void)in, (void)acc;
  __trap();
#endif
}

// Every block, at its end: once its inbox has every pushing split's share, its outputs merged
// from it (merge_cluster_share: the pull merge's order and arithmetic), and, where p.part_max is
// set, the largest |output| of its share written there. A block without keys waits on the cluster
// barrier first (it pushes nothing; every thread that arrived waits once). stamp(i): the decode
// kernel's phase stamps, kPhasePeers once the inbox is full and kPhaseMerged once the share is
// merged and written.
template <int D, typename Stamp>
__device__ __forceinline__ void cluster_merge_inbox(const AttnParams& p, const DecodePlace& at,
                                                    const MergeTarget& to,
                                                    const ClusterInbox<D>& in, bool pushed,
                                                    const Stamp& stamp) {
#ifdef MEMRA_SM90_CODE
  if (!pushed) cluster_wait();
  const MergeShare mine = merge_share(to.n_h * D, at.group, at.groups);
  mbar_wait_cluster(in.bar, 0);
  stamp(kPhasePeers);
  const float largest = merge_cluster_share<D>(
      p, at, to, mine, [&](int s, int r, int i, float& m, float& l, float& v) {
        const int k = s - to.range.first;
        const float2 ml = in.stats[k * kTransposedMaxRows + r];
        m = ml.x, l = ml.y;
        v = in.values[k * mine.share + (i - mine.begin)];
      });
  stamp(kPhaseMerged);
  if (p.part_max != nullptr)
    store_block_max(largest, p.part_max + at.heads_index * at.groups + at.group);
#else
  (void)p, (void)at, (void)to, (void)in, (void)pushed, (void)stamp;
  __trap();
#endif
}

}  // namespace memra::kernels::detail
