// The one-query decode kernel of the tensor-core arithmetic (private to attention.cu): a block
// takes one query token, one split of kAttentionSplit keys (or a run of splits, one after
// another: p.decode_groups) and up to kMaxGroup of a kv head's query heads, the split plan's
// block (attention_kernel.cuh's one-query blocks), but stages the split's K and V in shared
// memory at once and runs the split as straight-line code.
//
// Why. At short contexts a decode step's attention is one split a block, and the generic kernel
// spends it on bookkeeping: Nsight at one sequence of ~576 keys (8B, eighteenth round) had 16.2 us
// a launch for 2.3 MB, 0.24 instructions issued a cycle per scheduler from 2 warps each, and
// ~2,000 instructions a warp, most of them the ring's cursor, per-row block-table and 64-bit
// address arithmetic for each 16-byte copy (recomputed for K and V), and the q tile's divisions.
// Here the split's keys are fixed by blockIdx, a key's cache slot is looked up once for its K
// and V copies, the two phases wait once each (K, then V behind the scores and softmax), and the
// chunk arithmetic is attention_mma.cuh's own functions on the same operands: the same bits
// (kernel-check compares this kernel with the generic one's one_pass plan and query tiles).
//
// Shared memory: the generic block's fixed part (q terms, scores, row state) and the split's K
// then V rows in the chunk layout (kChunk keys a chunk, padded rows), 165 KB at head_dim 128 with
// an f16 cache. At head_dim 256 K and V together would not fit: V's copies start into K's rows
// once the scores have read them, and land while the softmax runs. Grids of more blocks than SMs
// take that form at every head_dim, two blocks an SM (DecodeConfig's kShared).
//
// A run of splits (long contexts, many sequences: grids of several waves, the two-blocks form):
// a block takes several splits of its token one after another, the next split's K copied into
// K's rows once this split's values have read them, each split's arithmetic and partial as a
// block of its own would make them. The grid is then one wave, and the blocks' starts (q's
// terms, the key ranges) and the empty blocks of a graph bucket's splits are not paid for.
#pragma once

#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/decode_bulk.cuh"
#include "kernels/attention/decode_chains.cuh"
#include "kernels/attention/decode_cluster.cuh"
#include "kernels/attention/decode_cluster_async.cuh"
#include "kernels/attention/decode_merge.cuh"
#include "kernels/attention/decode_prologue.cuh"
#include "kernels/attention/decode_transposed.cuh"

namespace memra::kernels::detail {

// MEMRA_DECODE_STAMPS' records (kernels.h: decode_phase_stamps): a block's kDecodePhases clocks,
// and how many blocks the last stamped launch had.
__device__ long long g_decode_stamps[kDecodeStampBlocks * kDecodePhases];
__device__ int g_decode_stamp_blocks;

// kShared: V always lands in K's rows after the scores (the head_dim 256 form at any head_dim), so
// that two blocks fit an SM (~95 KB at head_dim 128): for grids of more blocks than SMs (a few
// sequences: 8B at 8 x ~576 keys is 192 blocks), which one block an SM runs in two waves. V's
// loads then wait for the scores, which a grid that fits the SMs once does not pay for.
template <int D, typename CT, bool kShared = false>
struct DecodeConfig {
  using C = MmaConfig<D, CT, false>;
  static constexpr int kChunks = kSplit / C::kChunk;  // a split's chunks (K or V)
  static constexpr int kRowsPerPass = kAttnThreads / C::kSegs;
  static constexpr int kPasses = kSplit / kRowsPerPass;  // a thread's keys of the split
  // V has rows of its own (else K's, after the scores).
  static constexpr bool kSeparateV = D <= 128 && !kShared;
  static constexpr int kBytes = C::kFixedBytes + (kSeparateV ? 2 : 1) * kChunks * C::kChunkBytes;
  // The bulk form's two mbarriers (K's rows, V's rows) after the rest.
  static constexpr int kBarOffset = (kBytes + 15) & ~15;
  static constexpr int kBulkBytes = kBarOffset + 2 * static_cast<int>(sizeof(uint64_t));
  // Blocks an SM (228 KB of shared memory, 1 KB of it the runtime's a block).
  static constexpr int kBlocksPerSm = 2 * (kBytes + 1024) <= 228 * 1024 ? 2 : 1;
  static_assert(kSplit % kRowsPerPass == 0 && C::kChunkBytes == C::kChunk * C::kRowBytes,
                "a thread's keys tile the split; chunks are contiguous rows");
};

// Whether the decode kernel serves head_dim D with cache type CT (its shared memory fits).
template <int D, typename CT>
constexpr bool has_decode_kernel() {
  return sizeof(CT) == 2 && (D == 64 || D == 128 || D == 256);
}

// This thread's keys of a split (key sbase + row0 + k kRowsPerPass, k < kPasses: one 16-byte
// segment of each row) with their offsets into a cache, the slot, kv head and segment applied,
// or -1 for keys outside [c0, c1): each key's slot is looked up once for its K and V copies.
template <int D, typename CT>
struct SplitKeys {
  using DC = DecodeConfig<D, CT>;  // the key layout is the same in both forms
  int64_t off[DC::kPasses];
  SplitKeys() = default;  // none looked up (the bulk form's)
  __device__ __forceinline__ SplitKeys(const AttnParams& p, const int32_t* table, int kv_head,
                                       int sbase, int c0, int c1) {
    const int seg = threadIdx.x % DC::C::kSegs, row0 = threadIdx.x / DC::C::kSegs;
    const int64_t slot_bytes = int64_t{p.n_kv_heads} * D * sizeof(CT);
    const int64_t head_off = int64_t{kv_head} * D * sizeof(CT) + seg * 16;
#pragma unroll
    for (int k = 0; k < DC::kPasses; ++k) {
      const int key = sbase + row0 + k * DC::kRowsPerPass;
      off[k] = key >= c0 && key < c1 ? (int64_t{__ldg(table + (key >> p.bs_shift))} * p.block_size +
                                        (key & (p.block_size - 1))) *
                                               slot_bytes +
                                           head_off
                                     : -1;
    }
  }
};

// The copies of a thread's passes [k0, k1) into rows `dst` (row o of the split at
// (o - kFirstRow) * kRowBytes) from `cache` (p.k, or p.v with `values`). V rows of keys outside
// the range are zeroed (the V steps multiply whole 16-key steps: p = 0 there, and 0 * a stale NaN
// is NaN).
template <int D, typename CT, int k0 = 0, int k1 = DecodeConfig<D, CT>::kPasses, int kFirstRow = 0>
__device__ __forceinline__ void copy_passes(const SplitKeys<D, CT>& keys, const void* cache,
                                            bool values, unsigned char* dst) {
  using DC = DecodeConfig<D, CT>;
  const int seg = threadIdx.x % DC::C::kSegs, row0 = threadIdx.x / DC::C::kSegs;
  const unsigned char* src = static_cast<const unsigned char*>(cache);
#pragma unroll
  for (int k = k0; k < k1; ++k) {
    unsigned char* to =
        dst + (row0 + k * DC::kRowsPerPass - kFirstRow) * DC::C::kRowBytes + seg * 16;
    if (keys.off[k] >= 0)
      cp_async16(to, src + keys.off[k]);
    else if (values)
      *reinterpret_cast<uint4*>(to) = uint4{0, 0, 0, 0};
  }
}

// One phase's copies (every key of the split), one commit group.
template <int D, typename CT>
__device__ __forceinline__ void copy_phase(const SplitKeys<D, CT>& keys, const void* cache,
                                           bool values, unsigned char* dst) {
  copy_passes<D, CT>(keys, cache, values, dst);
  cp_async_commit();
}

// Chunk ci's copies into `rows`, the chunk's own rows (its first key's row at `rows`: chunk ci of
// a split's rows, or a ring slot), one commit group, empty where `live` is false (the groups in
// flight are then counted the same on every split). Its kChunk keys are the passes [ci kPer,
// + kPer): a pass is kRowsPerPass consecutive keys.
template <int D, typename CT, int ci>
__device__ __forceinline__ void copy_chunk(const SplitKeys<D, CT>& keys, const void* cache,
                                           bool values, unsigned char* rows, bool live) {
  using DC = DecodeConfig<D, CT>;
  constexpr int kPer = DC::C::kChunk / DC::kRowsPerPass;
  if (live)
    copy_passes<D, CT, ci * kPer, (ci + 1) * kPer, ci * DC::C::kChunk>(keys, cache, values, rows);
  cp_async_commit();
}

// A decode block's run (its token, kv head and query heads) and its splits [s_first, s_last], from
// its place in the grid (decode_place). Split `group` (runs false), or the group's share of the
// token's live splits, shared out as evenly as whole splits allow (group_run). false: the block
// has none (it makes no reads).
__device__ __forceinline__ bool decode_block_run(const AttnParams& p, bool runs, int chunk_shift,
                                                 Run& run, int& s_first, int& s_last) {
  const DecodePlace at = decode_place(p, runs);
  const int t = at.t, group = at.group;
  const int kv_head = at.heads_index / p.n_chunks;
  const int chunk = at.heads_index % p.n_chunks;
  const int h0 = kv_head * p.group + chunk * p.hpb;
  const int n_h = min(p.hpb, p.group - chunk * p.hpb);
  const KeyRange range = key_range(p.positions[t], p.window);
  s_first = group, s_last = group;
  if (runs) {
    const SplitRun share =
        group_run(p.decode_shares, group, range.last - range.first + 1, p.decode_groups);
    s_first = range.first + static_cast<int>(share.first);
    s_last = s_first + static_cast<int>(share.count) - 1;
  }
  if (s_first < range.first || s_first > s_last || s_last > range.last) return false;
  run.tb = t;
  run.nq = 1;
  run.n_h = n_h;
  run.n_rows = n_h;
  run.h0 = h0;
  run.kv_head = kv_head;
  run.seq = p.token_seq[t];
  run.lo = range.lo;
  run.hi = range.pos + 1;
  run.chunk_shift = chunk_shift;
  run.s_begin = s_first;
  run.s_end = s_last + 1;
  run.table = p.block_tables + int64_t{run.seq} * p.max_blocks;
  return true;
}

// A one-split block's run (decode_block_run) and, for the tensor form, its thread's copy's cache
// block (tensor_split_entry), read before the kernel's wait where p.early_meta (kCan: the form
// takes it). Why that is safe: they come from the step's metadata only (positions, token_seq,
// block_tables and the kernel's parameters), which the host uploads (CudaOps::step_begin) before
// the step's first kernel starts, and which no kernel writes; every kernel of the step starts after
// that one (programmatic launch lets a kernel start early only behind another kernel). Why: at 512
// keys the block's chain opened with the run's read (~1,070 cycles on an H100) and the table's
// (most of the ~2,500 to the copies' issue), after the wait; before it they overlap the kernel
// before (MEMRA_DECODE_EARLY_META, the default since the sixty-seventh round: the run's read
// ~1,050 -> ~300 cycles, the kernel at 512 keys 8.8 -> 8.5 us alone on an H100). Thread 0 also
// prefetches the two tensor maps' descriptors (kernel parameters). loaded false: nothing read (the
// kernel reads them after its wait).
struct EarlyRun {
  Run run;
  int s_first, s_last;
  int32_t blk;
  bool has_keys, loaded;
};
template <bool kCan>
__device__ __forceinline__ EarlyRun early_decode_run(const AttnParams& p, int chunk_shift) {
  EarlyRun e{};
  if constexpr (kCan) {
    if (p.early_meta) {
#ifdef MEMRA_SM90_CODE
      if (threadIdx.x == 0) {  // the maps' descriptors, before the first copy names them
        prefetch_tensor_map(&p.k_map);
        prefetch_tensor_map(&p.v_map);
      }
#endif
      e.loaded = true;
      e.has_keys = decode_block_run(p, false, chunk_shift, e.run, e.s_first, e.s_last);
      e.blk = e.has_keys ? tensor_split_entry(p, e.run, e.s_first) : -1;
    }
  }
  return e;
}

// Where the decode kernel keeps its copies' barriers (K's and V's: the tensor and bulk forms'
// copies complete on them) and the async merge's inbox (past the tensor form's rows and their
// alignment), in its dynamic shared memory.
template <int D, typename CT, bool kShared>
struct DecodeBarriers {
  using DC = DecodeConfig<D, CT, kShared>;
  using C = typename DC::C;
  static constexpr int kInboxOffset = 2 * kSplit * 256 + 1024;
  uint64_t* bars;
  ClusterInbox<D> inbox;
  __device__ explicit DecodeBarriers(unsigned char* smem)
      : bars(reinterpret_cast<uint64_t*>(smem + DC::kBarOffset)),
        inbox(mma_smem<C>(smem).ring + kInboxOffset) {}
};

// The tensor form's split barriers (and, kAsync, the async merge's inbox), thread 0's behind a
// block barrier; the async merge's arrival at the cluster barrier that says the inbox is set
// (cluster_inbox_ready) is the caller's.
template <int D, bool kAsync, typename CT, bool kShared>
__device__ __forceinline__ void start_tensor_barriers(const AttnParams& p, const Run& run, int s,
                                                      const DecodeBarriers<D, CT, kShared>& at) {
  if (threadIdx.x == 0) {
    tensor_split_start(run, s, p.bs_shift, at.bars);
    if constexpr (kAsync)
      cluster_inbox_start<D>(at.inbox, merge_target_of(run), decode_place(p, false));
  }
  __syncthreads();  // the barriers, before any copy completes on them (or a peer's push)
}

// MEMRA_DECODE_EARLY_BARRIERS (p.early_barriers; kCan: early_decode_run's form): with the run read
// before the kernel's wait, the block's copies' barriers and inbox set (and, kAsync, its arrival
// at the cluster barrier) before it too, under the kernel before: they need only the run (the
// step's metadata, which no kernel writes) and touch only this block's shared memory. Whether
// they were (the kernel sets them after its wait where not).
template <int D, typename CT, bool kShared, bool kCan, bool kAsync>
__device__ __forceinline__ bool early_decode_barriers(const AttnParams& p, const EarlyRun& early) {
  if constexpr (kCan) {
    if (early.loaded && early.has_keys && p.early_barriers) {
      extern __shared__ __align__(16) unsigned char decode_smem_raw[];
      start_tensor_barriers<D, kAsync>(p, early.run, early.s_first,
                                       DecodeBarriers<D, CT, kShared>(decode_smem_raw));
      if constexpr (kAsync) cluster_inbox_ready();
      return true;
    }
  }
  return false;
}

// Split s's keys with keys of the run's token: [c0, c1) of [s * kSplit, + kSplit).
template <int D, typename CT>
__device__ __forceinline__ SplitKeys<D, CT> split_keys_of(const AttnParams& p, const Run& run,
                                                          int s) {
  return SplitKeys<D, CT>(p, run.table, run.kv_head, s * kSplit, max(s * kSplit, run.lo),
                          min(s * kSplit + kSplit, run.hi));
}

// grid: x = query token, y = split (kRun: split group), z = kv head * n_chunks + chunk
// (attention_kernel's, the split plan, select 0). kRun: a block takes its group's run of its
// token's splits (AttnParams::decode_groups), one after another, each as a block of one split
// would (the same partials, the same bits), the next split's K copied in V's place in K's rows
// (kShared) once this split's values have read them. Without kRun a block takes one split, in
// straight-line code. kPipe (V in K's rows only): the split's two chunks each a commit group of
// their own, so that a chunk's V copies start once its scores have read its K rows (under the
// other chunk's scores and the softmax), and the next split's first K chunk once the values have
// read chunk 0 (under chunk 1's values and the split's end); the same arithmetic in the same
// order: the same bits. The host launches it for power-of-two block sizes only (bs_shift >= 0).
// kStamps (the one-split form only): block thread 0 records its phases' ends (g_decode_stamps).
// kBulk and kChains (the one-split form with V's own rows only): the split's rows land by bulk
// copies (decode_bulk.cuh) and its scores and values take decode_chains.cuh's issue order; the
// same rows and the same mma sequences, so the same bits. kCluster (with kBulk and kChains): the
// launch's clusters are a token's splits, and their partials merge through the cluster's shared
// memory (decode_cluster.cuh) instead of the arrival counters or the combine: the same merge, the
// same bits. kTransposed (with kBulk and kChains, or with kPipe; at most kTransposedMaxRows query
// rows, head_dim 128): the scores and values with the mma operands transposed
// (decode_transposed.cuh): half the products, the same bits. kTensor (with kTransposed): the
// split's rows land by tensor copies, a cache block's half rows a copy (decode_tensor.cuh), in a
// swizzled layout the products' loads follow: the same rows, the same bits. kAsync (with kCluster
// and kTensor): the cluster merge by asynchronous stores into each share's block
// (decode_cluster_async.cuh): the same merge, the same bits. kPrologue (with kTensor, one
// token): the attention prologue in the blocks (decode_prologue.cuh, p.pro): the same bits as
// qk_prologue's launch before. p is a grid constant: the tensor copies read its maps in place.
template <int D, typename CT, bool kShared, bool kRun, bool kPipe = false, bool kStamps = false,
          bool kBulk = false, bool kChains = false, bool kCluster = false, bool kTransposed = false,
          bool kTensor = false, bool kAsync = false, bool kPrologue = false>
__global__ void __launch_bounds__(kAttnThreads, DecodeConfig<D, CT, kShared>::kBlocksPerSm)
    decode_attention_kernel(const __grid_constant__ AttnParams p) {
  using DC = DecodeConfig<D, CT, kShared>;
  using C = typename DC::C;
  const EarlyRun early = early_decode_run<(kTensor && !kRun && !kPipe)>(p, C::kChunkShift);
  const bool early_barriers =
      early_decode_barriers<D, CT, kShared, (kTensor && !kRun && !kPipe), kAsync>(p, early);
  detail::wait_for_inputs();
  static_assert(!kStamps || (!kRun && !kPipe), "stamps: the one-split form's phases");
  static_assert(!(kBulk || kChains) || (!kRun && !kPipe && DC::kSeparateV),
                "bulk copies and short chains: the one-split form with V's own rows");
  static_assert(!kCluster || (kBulk && kChains),
                "the cluster merge: the bulk and short-chain form");
  static_assert(!kTransposed || (kBulk && kChains) || kPipe,
                "transposed: the bulk and short-chain form, or a split a chunk at a time");
  static_assert(!kTensor || (kTransposed && kBulk && D == 128 && sizeof(CT) == 2),
                "tensor copies: the transposed bulk form's 256-byte rows");
  static_assert(!kAsync || (kCluster && kTensor), "the async merge: the tensor cluster form");
  static_assert(!kPrologue || kTensor, "the prologue: the tensor form's rows");
  [[maybe_unused]] const long long t_start = kStamps ? clock64() : 0;
  // Phase i's end as cycles since the wait returned (block thread 0; the first kDecodeStampBlocks
  // blocks of the grid), held in registers and stored at the block's end: a store to global memory
  // mid-kernel puts its L2 round trip on the cluster barrier's release, which must make it visible
  // first (the stamped kernel ran 8.51 us at 512 keys while it stored them, the plain one 8.05).
  [[maybe_unused]] const int stamp_block =
      static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  [[maybe_unused]] long long clocks[kDecodePhases] = {};
  const auto stamp = [&](int i) {
    if constexpr (kStamps) clocks[i] = clock64() - t_start;
  };
  // Thread 0 stores them (-1 each for a block without keys: no phases, the host leaves it out).
  const auto store_stamps = [&](bool live) {
    if constexpr (kStamps) {
      if (threadIdx.x != 0) return;
      if (stamp_block < kDecodeStampBlocks) {
#pragma unroll
        for (int i = 0; i < kDecodePhases; ++i)
          g_decode_stamps[stamp_block * kDecodePhases + i] = live ? clocks[i] : -1;
      }
      if (stamp_block == 0)
        g_decode_stamp_blocks = static_cast<int>(gridDim.x * gridDim.y * gridDim.z);
    }
  };
  // (Runs with V's own rows, the next split's K under this one's softmax and values, one block
  // an SM, measured slower: 16,384 keys 43.7 -> 60.0 us, forty-second round.)
  static_assert(!kRun || !DC::kSeparateV, "runs of splits land V in K's rows");
  static_assert(!kPipe || (!DC::kSeparateV && DC::kChunks == 2), "a split's two chunks in turn");
  extern __shared__ __align__(16) unsigned char decode_smem_raw[];
  const MmaSmem sm = mma_smem<C>(decode_smem_raw);
  const DecodeBarriers<D, CT, kShared> at_smem(decode_smem_raw);
  [[maybe_unused]] uint64_t* const bars = at_smem.bars;
  [[maybe_unused]] const ClusterInbox<D>& inbox = at_smem.inbox;
  static_assert(!kAsync || DecodeBarriers<D, CT, kShared>::kInboxOffset + ClusterInbox<D>::kBytes <=
                               2 * DC::kChunks * C::kChunkBytes,
                "the inbox fits past the rows");
  Run run;
  int s_first, s_last;
  bool has_keys;
  if (early.loaded) {
    run = early.run;
    s_first = early.s_first;
    s_last = early.s_last;
    has_keys = early.has_keys;
  } else {
    has_keys = decode_block_run(p, kRun, C::kChunkShift, run, s_first, s_last);
  }
  stamp(kPhaseRunRead);
  // The cluster form's partial values: in K's rows, which the scores are done with.
  [[maybe_unused]] float* const cluster_part = reinterpret_cast<float*>(sm.ring);
  if (!has_keys) {  // none: no reads
    if constexpr (kAsync) {
      const DecodePlace at = decode_place(p, kRun);
      const MergeTarget to = merge_target(p, at);
      if (threadIdx.x == 0) cluster_inbox_start<D>(inbox, to, at);
      __syncthreads();  // the inbox's barrier, before this block's arrival says so
      cluster_inbox_ready();
      cluster_merge_inbox<D>(p, at, to, inbox, false, [](int) {});
    } else if constexpr (kCluster)
      cluster_merge<D>(p, decode_place(p, kRun), sm, cluster_part, [](int) {});
    else
      decode_arrive<D>(p, kRun);
    store_stamps(false);
    return;
  }

  unsigned char* kb = sm.ring;
  unsigned char* vb = DC::kSeparateV ? sm.ring + DC::kChunks * C::kChunkBytes : sm.ring;
  if constexpr (kTensor) {  // dense 256-byte rows from a 1,024-byte aligned base (the swizzle's)
    static_assert(2 * kSplit * 256 + 1023 <= 2 * DC::kChunks * C::kChunkBytes, "the rows fit");
    kb += (1024 - (smem_addr(kb) & 1023)) & 1023;
    vb = kb + kSplit * 256;
  }
  const auto split_keys = [&](int s) { return split_keys_of<D, CT>(p, run, s); };
  // Whether chunk ci of split s holds keys of the token (each of a split's two, kPipe).
  const auto live = [&](int s, int ci) { return run.ci_first(s) <= ci && ci <= run.ci_last(s); };
  SplitKeys<D, CT> keys;
  // MEMRA_DECODE_Q_FIRST: this thread's first pair of q in flight under the copies' issue.
  [[maybe_unused]] float2 q_pair{};
  [[maybe_unused]] int32_t tensor_blk = -1;  // the cache block of this thread's tensor copy
  [[maybe_unused]] DecodePrologue pro{};
  if constexpr (kTensor) {
    if constexpr (kPrologue)
      pro = load_decode_prologue<CT>(p, run, s_first);
    else if (p.q_first)
      q_pair = load_q_pair<D>(p, run, threadIdx.x);
    if (!early_barriers) start_tensor_barriers<D, kAsync>(p, run, s_first, at_smem);
    stamp(kPhaseBarriersSet);
    tensor_blk = early.loaded ? early.blk : tensor_split_entry(p, run, s_first);
    // (p.k_after_q: none yet; K's, and V's unless they wait for K, once q is staged.)
    tensor_split_rows(p, run, s_first, kb, vb, bars, tensor_blk, !p.k_after_q,
                      !p.k_after_q && p.v_after == kVWithK);
    if constexpr (kAsync) {
      if (!early_barriers) cluster_inbox_ready();
    }
    stamp(kPhaseCopiesIssued);
  } else if constexpr (kBulk) {
    if (threadIdx.x == 0) bulk_split_start<D, CT>(run, s_first, bars);
    __syncthreads();  // the barriers, before any copy completes on them
    stamp(kPhaseBarriersSet);
    bulk_split_rows<D, CT, C::kRowBytes>(p, run, s_first, kb, vb, bars);
    stamp(kPhaseCopiesIssued);
  } else if constexpr (kPipe) {
    keys = split_keys(s_first);
    copy_chunk<D, CT, 0>(keys, p.k, false, kb, live(s_first, 0));
    copy_chunk<D, CT, 1>(keys, p.k, false, kb + C::kChunkBytes, live(s_first, 1));
  } else {
    stamp(kPhaseBarriersSet);  // (none)
    keys = split_keys(s_first);
    copy_phase(keys, p.k, false, kb);
    if constexpr (DC::kSeparateV) copy_phase(keys, p.v, true, vb);
    stamp(kPhaseCopiesIssued);
  }
  if constexpr (kPrologue) {
    stage_q_terms_prologue<CT>(p, run, sm, sm.q, pro);
  } else if (kTensor && p.q_first) {
    stage_q_terms_from<D, CT, C>(p, run, sm, sm.q, q_pair);
  } else {
    publish_key_ranges(p, run, sm);
    stage_q_terms<D, CT, C>(p, run, sm.q);  // one token: rows are its heads h0 .. h0 + n_h - 1
  }
  stamp(kPhaseQStaged);
  if (kTensor && (p.k_after_q || p.v_after == kVAfterQ))
    tensor_split_rows(p, run, s_first, kb, vb, bars, tensor_blk, p.k_after_q,
                      p.v_after != kVAfterK);
  stamp(kPhaseAfterQ);
  // Split s, and the next split's K copies behind it where `next`. Commit groups in flight at its
  // start: K(s), then V(s) where V has rows of its own.
  const auto split = [&](int s, bool next) {
    [[maybe_unused]] const int ci0 = run.ci_first(s), ci1 = run.ci_last(s);
    if constexpr (kBulk) {
      __syncthreads();  // q and the row's range published
      // The async merge: every block's inbox initialized before this block's first push, waited
      // for under K's landing instead of after the values (seventy-first round, H100: the values
      // and pushes 2,514 -> 2,455 cycles at 512 keys, K's landing no later; the seventy-second
      // round's 16-byte pushes, a quarter of the stores, took ~180 cycles off a hand-off alone,
      // tools/probes/cluster_push.cu, and nothing in this kernel: removed).
      if constexpr (kAsync) cluster_inboxes_ready_wait();
      if constexpr (kPrologue) prologue_key_rows<CT>(p, run, pro);  // (under K's landing)
      bulk_wait(bars);                                              // K's rows landed
      if constexpr (kPrologue) landed_key_row(pro, pro.k_bits, kb, p.bs_shift);
      if (kTensor && p.v_after == kVAfterK)
        tensor_split_rows(p, run, s, kb, vb, bars, tensor_blk, false, true);
    } else {
      cp_async_wait(DC::kSeparateV ? 1 : 0);  // this thread's K copies
      __syncthreads();  // everyone's; q and the row's range published (the previous split's done)
    }
    stamp(kPhaseKLanded);
    if constexpr (kTransposed) {
      decode_scores_t<D, CT, 0, DC::kChunks, C::kRows, kTensor>(p, run, s, sm, kb);
    } else if constexpr (kChains) {
      decode_split_scores<D, CT>(p, run, s, sm, kb);
    } else {
      for (int ci = ci0; ci <= ci1; ++ci)
        mma_chunk_scores<D, CT, false>(p, run, Cursor{s, 0, ci}, sm, kb + ci * C::kChunkBytes);
    }
    __syncthreads();  // the split's scores (and K's rows are free)
    stamp(kPhaseScores);
    if constexpr (!DC::kSeparateV) copy_phase(keys, p.v, true, vb);
    mma_split_softmax<D, CT, false>(run, s, sm);
    if constexpr (kBulk) {
      bulk_wait(bars + 1);  // V's rows landed
      if constexpr (kTensor) tensor_zero_v(run, s, p.bs_shift, vb);
      if constexpr (kPrologue) landed_key_row(pro, pro.v_bits, vb, p.bs_shift);
    } else
      cp_async_wait(0);  // this thread's V copies
    __syncthreads();     // everyone's (and the zeroed rows); p published
    stamp(kPhaseSoftmax);
    static_assert(
        !kCluster || C::kRows * cluster_part_stride<D>() * 4 <= DC::kChunks * C::kChunkBytes,
        "a block's partial fits K's rows");
    if constexpr (kTransposed) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      decode_values_t<D, CT, 0, DC::kChunks, C::kRows, kTensor>(run, s, sm, vb, acc, p.bs_shift);
      if constexpr (kAsync)
        cluster_push<D>(decode_place(p, kRun), merge_target_of(run), sm, inbox, acc);
      else
        decode_split_finish_t<D, kCluster>(p, run, s, sm, acc, cluster_part);
    } else {
      float acc[C::kMTiles][C::kNTilesV][4], O[C::kMTiles][C::kNTilesV][4];
      zero_tiles<C>(acc, O);
      if constexpr (kChains) {
        decode_split_values<D, CT>(run, s, sm, vb, acc);
      } else {
        for (int ci = ci0; ci <= ci1; ++ci)
          mma_chunk_values<D, CT, false>(run, Cursor{s, 1, ci}, sm, vb + ci * C::kChunkBytes, acc);
      }
      if constexpr (kCluster)
        cluster_store_partial<D, CT>(run, acc, cluster_part);
      else
        mma_split_finish<D, CT, false>(p, run, s, sm, acc, O);
    }
    stamp(kPhaseValues);
    if (next) {
      __syncthreads();  // V's rows (K's), the scores' rows and the statistics are free
      keys = split_keys(s + 1);
      copy_phase(keys, p.k, false, kb);
    }
  };
  // kPipe's split s: the same steps, a chunk at a time. Commit groups in flight at its start:
  // K(s) chunk 0, K(s) chunk 1 (either may be empty: a chunk without keys of the token).
  const auto split_pipe = [&](int s, bool next) {
    const bool live0 = live(s, 0), live1 = live(s, 1);
    unsigned char* const row0 = kb;
    unsigned char* const row1 = kb + C::kChunkBytes;
    cp_async_wait(1);  // this thread's chunk 0 of K
    __syncthreads();   // everyone's; q and the rows' ranges published (the previous split's done)
    if (live0) decode_chunk_scores<D, CT, kTransposed, 0>(p, run, s, sm, row0);
    cp_async_wait(0);  // chunk 1 of K
    __syncthreads();   // everyone's; chunk 0's K rows are free
    copy_chunk<D, CT, 0>(keys, p.v, true, kb, live0);
    if (live1) decode_chunk_scores<D, CT, kTransposed, 1>(p, run, s, sm, row1);
    __syncthreads();  // the split's scores; chunk 1's K rows are free
    copy_chunk<D, CT, 1>(keys, p.v, true, row1, live1);
    mma_split_softmax<D, CT, false>(run, s, sm);
    cp_async_wait(1);  // chunk 0 of V
    __syncthreads();   // everyone's; p published
    ChunkValues<D, CT, kTransposed> values;
    if (live0) values.template add<0>(run, s, sm, row0, p.bs_shift);
    cp_async_wait(0);  // chunk 1 of V
    __syncthreads();   // everyone's; chunk 0's V rows are free
    if (next) {
      keys = split_keys(s + 1);
      copy_chunk<D, CT, 0>(keys, p.k, false, kb, live(s + 1, 0));
    }
    if (live1) values.template add<1>(run, s, sm, row1, p.bs_shift);
    values.finish(p, run, s, sm);
    if (next) {
      __syncthreads();  // chunk 1's V rows, the scores' rows and the statistics are free
      copy_chunk<D, CT, 1>(keys, p.k, false, row1, live(s + 1, 1));
    }
  };
  const auto one_split = [&](int s, bool next) {
    if constexpr (kPipe)
      split_pipe(s, next);
    else
      split(s, next);
  };
  // (Without kRun, straight-line code: a loop of one split held ~5-35 more registers a thread.)
  if constexpr (kRun) {
    for (int s = s_first; s <= s_last; ++s) one_split(s, s < s_last);
  } else {
    one_split(s_first, false);
  }
  if constexpr (kAsync) {
    cluster_merge_inbox<D>(p, decode_place(p, kRun), merge_target_of(run), inbox, true, stamp);
  } else if constexpr (kCluster) {
    cluster_merge<D>(p, decode_place(p, kRun), sm, cluster_part, stamp);
  } else {
    decode_arrive<D>(p, kRun);
    stamp(kPhasePeers),
        stamp(kPhaseMerged);  // (the arrival and the last block's merge: the first's)
  }
  stamp(kPhaseEnd);
  store_stamps(true);
}

}  // namespace memra::kernels::detail
