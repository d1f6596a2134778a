// The decode kernels' merge of a token's split partials (private to attention.cu): the last of a
// token's blocks to finish (of its kv head and query heads) merges their partials itself, in the
// combine kernel's order with its arithmetic (merge_split), so that a one-token step's attention
// is one launch instead of two: the same bits, one kernel boundary and the combine's latency
// chain fewer a layer.
//
// How the last block knows it is last: every block of the grid arrives once at its token and
// heads' counter (AttnParams::arrivals, the first bytes of attention's scratch), after its
// threads have fenced their partial writes, the blocks without keys too; the block that brings
// the count to the grid's split groups finds every partial written and merges them, then resets
// the counter: the counters are zero between launches, as the scratch's contract (kernels.h)
// asks of them before the first.
//
// Why not always. The merging block reads all of its token's partials for its heads: ~3 splits at
// short contexts, where the combine is a launch and a chain of dependent reads for little work,
// but 64 at 16,384 tokens, where the combine's 32 blocks stage them side by side. The host takes
// it up to kMergeMaxSplits, and only for steps of a few tokens whose grid is one wave: at 64
// sequences (two waves) it measured 2-7% slower (attention.cu's MEMRA_DECODE_MERGE).
#pragma once

#include "kernels/attention/attention_split.cuh"

namespace memra::kernels::detail {

// Counters of the scratch's arrival region: one a (token, kv head and chunk) of a launch.
constexpr int kMaxArrivals = 16384;
constexpr size_t kArrivalBytes = size_t{kMaxArrivals} * sizeof(uint32_t);

// A decode block's place in its grid: (token, split group, kv head and chunk), or, the run
// sharings but floor, (token, kv head and chunk, split group).
struct DecodePlace {
  int t, group, heads_index;  // heads_index: kv head * n_chunks + chunk
  int groups, heads;          // the grid's extents of each
};
__device__ __forceinline__ DecodePlace decode_place(const AttnParams& p, bool runs) {
  const bool by_group = runs && p.decode_shares != RunShares::floor;
  DecodePlace at;
  at.t = static_cast<int>(blockIdx.x);
  at.group = static_cast<int>(by_group ? blockIdx.z : blockIdx.y);
  at.heads_index = static_cast<int>(by_group ? blockIdx.y : blockIdx.z);
  at.groups = static_cast<int>(by_group ? gridDim.z : gridDim.y);
  at.heads = static_cast<int>(by_group ? gridDim.y : gridDim.z);
  return at;
}

// Whether this block is the last of its token and heads' blocks to arrive. Every thread fences its
// own partial writes first; the last block's loads go to L2 (__ldcg), where the others' writes are.
__device__ __forceinline__ bool arrive_last(uint32_t* counter, int expected) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();  // every thread's writes fenced
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == static_cast<uint32_t>(expected - 1);
    if (last) {
      __threadfence();  // the others' arrivals (and their writes) before this block's reads
      *counter = 0;     // no other block of the launch touches it now
    }
  }
  __syncthreads();
  return last;
}

// The merge of token t's partials for heads [h0, h0 + n_h): each output dim as the combine kernel
// computes it (merge_split in increasing split order, then O / L), the loads of kBatch splits in
// flight at once.
template <int D>
__device__ __forceinline__ void merge_token_heads(const AttnParams& p, int t, int h0, int n_h) {
  constexpr int kBatch = 4;
  const KeyRange range = key_range(p.positions[t], p.window);
  for (int i = threadIdx.x; i < n_h * D; i += kAttnThreads) {
    const int h = h0 + i / D, d = i % D;
    float* o = p.out + (int64_t{t} * p.n_heads + h) * D + d;
    if (range.last >= p.n_splits) {  // a caller bug, as the combine kernel reports it
      *o = __int_as_float(0x7fffffff);
      continue;
    }
    const float* part = p.partials + (int64_t{t} * p.n_heads + h) * p.n_splits * (D + 2);
    float M = 0.0f, L = 1.0f, O = 0.0f;
    for (int s0 = range.first; s0 <= range.last; s0 += kBatch) {
      float m[kBatch], l[kBatch], v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (s0 + k > range.last) break;
        const float* ps = part + int64_t{s0 + k} * (D + 2);
        v[k] = __ldcg(ps + d), m[k] = __ldcg(ps + D), l[k] = __ldcg(ps + D + 1);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (s0 + k > range.last) break;
        merge_split(M, L, O, m[k], l[k], v[k], s0 + k == range.first);
      }
    }
    *o = __fdiv_rn(O, L);
  }
}

// A decode block's arrival (p.arrivals set: the host launches no combine), and the merge if it is
// the last of its token and heads' blocks. Every block of the grid calls it once, at its end.
template <int D>
__device__ __forceinline__ void decode_arrive(const AttnParams& p, bool runs) {
  if (p.arrivals == nullptr) return;
  const DecodePlace at = decode_place(p, runs);
  if (at.groups == 1) {  // the token's only block (a run of all its splits): no counter to count
    __threadfence();
    __syncthreads();  // every thread's partials written
  } else if (!arrive_last(p.arrivals + at.t * at.heads + at.heads_index, at.groups)) {
    return;
  }
  const int kv_head = at.heads_index / p.n_chunks, chunk = at.heads_index % p.n_chunks;
  merge_token_heads<D>(p, at.t, kv_head * p.group + chunk * p.hpb,
                       min(p.hpb, p.group - chunk * p.hpb));
}

}  // namespace memra::kernels::detail
