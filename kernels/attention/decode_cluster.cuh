// A one-split decode launch's merge through its cluster's shared memory (private to attention.cu;
// the decode kernel's kCluster form, MEMRA_DECODE_CLUSTER_MERGE): a token's splits for one kv head
// and its query heads are one thread block cluster (grid y, the splits, is the cluster's extent),
// each block keeps its split's partial in its own shared memory, and after one cluster barrier
// every block merges a share of the token's outputs from the others' shared memory, in the combine
// kernel's order with its arithmetic (merge_split): the same bits as the combine and as
// decode_merge.cuh's last-block merge.
//
// Why. MEMRA_DECODE_STAMPS at one sequence of 512 keys (sixty-first round, H100): a block's
// arrival and the last block's merge take ~3,000 of its ~20,000 cycles: every thread's fence
// behind its partial writes, the counter's atomic round trip to L2, a second fence, then the last
// block's loads of every partial from L2 while the other blocks have left. Here the partial never
// leaves the SM, the barrier replaces the fences and the atomic, and the merge's loads are
// shared-memory loads of the cluster's blocks, spread over all of them.
//
// Which launches: the host takes it where the in-kernel merge is chosen (decode_merges) and a
// token's splits fit a portable cluster (at most kClusterMaxSplits: contexts up to 2,048 keys).
#pragma once

#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/decode_merge.cuh"
#include "kernels/cluster.cuh"

namespace memra::kernels::detail {

// Cluster barriers and distributed shared memory are sm_90 instructions: cluster_merge traps
// outside MEMRA_SM90_CODE's passes (the host takes the cluster form only where the kernel has
// sm_90 code).

// The most blocks a portable cluster holds: the most splits a clustered launch may have.
constexpr int kClusterMaxSplits = 8;

// A block's partial values in its shared memory: row r's dim d at r * stride + d (four floats of
// padding a row: the fragments' rows land on different banks).
template <int D>
constexpr int cluster_part_stride() {
  return D + 4;
}

// The split's partial values (the value accumulators, mma_split_finish's fragments) into `part`;
// the partial's statistics stay where the softmax left them (sm.split_m, sm.split_l). The block's
// rows all have keys of the split: a one-query block is one token's heads, and a block without
// keys of its token stores nothing.
template <int D, typename CT>
__device__ __forceinline__ void cluster_store_partial(
    const Run& run,
    const float (&acc)[MmaConfig<D, CT, false>::kMTiles][MmaConfig<D, CT, false>::kNTilesV][4],
    float* part) {
  for_value_pairs<MmaConfig<D, CT, false>>(run.n_rows, acc, [&](int r, int d, float x, float y) {
    *reinterpret_cast<float2*>(part + r * cluster_part_stride<D>() + d) = make_float2(x, y);
  });
}

// A block's share of its token's `total` outputs (n_h x D): [begin, end), `share` a block, the
// cluster's blocks in rank order.
struct MergeShare {
  int share, begin, end;
};
__device__ __forceinline__ MergeShare merge_share(int total, int group, int groups) {
  const int share = (total + groups - 1) / groups;
  return {share, group * share, min(total, (group + 1) * share)};
}

// The heads a cluster's merge writes (its kv head's chunk of query heads) and its token's keys.
struct MergeTarget {
  int h0, n_h;
  KeyRange range;
};
__device__ __forceinline__ MergeTarget merge_target(const AttnParams& p, const DecodePlace& at) {
  const int kv_head = at.heads_index / p.n_chunks, chunk = at.heads_index % p.n_chunks;
  return {kv_head * p.group + chunk * p.hpb, min(p.hpb, p.group - chunk * p.hpb),
          key_range(p.positions[at.t], p.window)};
}

// Outputs [mine.begin, mine.end) of token at.t (of to.n_h x D), each merged over the token's
// splits in order by merge_split (the combine kernel's order and arithmetic): load(s, r, i, m, l,
// v) gives split s's statistics of row r and its value of output i, all of an output's loaded
// before any is merged (independent loads in flight together). Returns the largest |output| this
// thread wrote (fmaxf's: a NaN is passed over, as x_to_f16's row maximum does).
template <int D, typename Load>
__device__ __forceinline__ float merge_cluster_share(const AttnParams& p, const DecodePlace& at,
                                                     const MergeTarget& to, const MergeShare& mine,
                                                     const Load& load) {
  float largest = 0.0f;
  for (int i = mine.begin + threadIdx.x; i < mine.end; i += kAttnThreads) {
    const int r = i / D, d = i % D;
    float* o = p.out + (int64_t{at.t} * p.n_heads + to.h0 + r) * D + d;
    if (to.range.last >= at.groups) {  // a caller bug, as the combine kernel reports it
      *o = __int_as_float(0x7fffffff);
      continue;
    }
    float m[kClusterMaxSplits], l[kClusterMaxSplits], v[kClusterMaxSplits];
#pragma unroll
    for (int k = 0; k < kClusterMaxSplits; ++k) {
      const int s = to.range.first + k;
      if (s > to.range.last) break;
      load(s, r, i, m[k], l[k], v[k]);
    }
    float M = 0.0f, L = 1.0f, O = 0.0f;
#pragma unroll
    for (int k = 0; k < kClusterMaxSplits; ++k) {
      if (to.range.first + k > to.range.last) break;
      merge_split(M, L, O, m[k], l[k], v[k], k == 0);
    }
    *o = __fdiv_rn(O, L);
    largest = fmaxf(largest, fabsf(*o));
  }
  return largest;
}

// The block's largest of its threads' m, written by thread 0 to *dst (every thread calls it).
__device__ __forceinline__ void store_block_max(float m, float* dst) {
  __shared__ float warp_max[kAttnWarps];
  m = block_max<kAttnThreads>(m, warp_max);
  if (threadIdx.x == 0) *dst = m;
}

// Every block of the cluster, at its end: publishes its partial (cluster barrier), merges its
// share of token at.t's outputs for heads [h0, h0 + n_h) from the partials of the token's splits
// (block s of the cluster holds split s's), each output as merge_token_heads computes it, then
// waits until every block has read what it needed before leaving (its shared memory must outlive
// the others' reads). `part`: where cluster_store_partial put this block's partial. Where
// p.part_max is set (one token), the block also writes the largest |output| of its share there,
// under that last wait. stamp(i): the decode kernel's phase stamps (MEMRA_DECODE_STAMPS),
// kPhasePeers once the peers' partials are published and kPhaseMerged once this block's share is
// merged and written.
template <int D, typename Stamp>
__device__ __forceinline__ void cluster_merge(const AttnParams& p, const DecodePlace& at,
                                              const MmaSmem& sm, const float* part,
                                              const Stamp& stamp) {
#ifdef MEMRA_SM90_CODE
  cluster_arrive();  // this thread's partial writes, released to the cluster
  const MergeTarget to = merge_target(p, at);
  const MergeShare mine = merge_share(to.n_h * D, at.group, at.groups);
  cluster_wait();  // every block's partial published
  stamp(kPhasePeers);
  const float largest = merge_cluster_share<D>(
      p, at, to, mine, [&](int s, int r, int i, float& m, float& l, float& v) {
        m = load_cluster_f32(sm.split_m + r, s);
        l = load_cluster_f32(sm.split_l + r, s);
        v = load_cluster_f32(part + r * cluster_part_stride<D>() + i % D, s);
      });
  stamp(kPhaseMerged);
  cluster_arrive_relaxed();  // this thread's reads of the others' shared memory are done
  if (p.part_max != nullptr)
    store_block_max(largest, p.part_max + at.heads_index * at.groups + at.group);
  cluster_wait();
#else
  (void)p, (void)at, (void)sm, (void)part, (void)stamp;
  __trap();
#endif
}

}  // namespace memra::kernels::detail
