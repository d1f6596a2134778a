// The attention kernel's entry points (private to attention.cu): block and run scheduling shared
// by the two arithmetics, the CUDA-core one (attention_split.cuh: every cache type and head
// size) and the tensor-core one (attention_mma.cuh: 16-bit caches at head_dim 64, 128, 256; its
// row-owning form attention_flash.cuh for one_pass query tiles at 64 and 128).
// They give different bits, so a model runs every step with one of them (attention() picks by
// head_dim, cache type and AttentionArgs::tensor_cores, never by the step's shape).
#pragma once

#include "kernels/attention/attention_flash.cuh"
#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/attention_split.cuh"

namespace memra::kernels::detail {

// Rows of a query tile (multi-query blocks) of each arithmetic.
__host__ __device__ constexpr int tile_rows(int d, bool mma) {
  return mma ? kMmaTileRows : multi_query_rows(d);
}

// The shared-memory layout's config of a block shape.
template <int D, typename CT, bool MQ, bool kMma>
struct ConfigOf {
  using type = AttnConfig<D, CT, MQ>;
};
template <int D, typename CT, bool MQ>
struct ConfigOf<D, CT, MQ, true> {
  using type = MmaConfig<D, CT, MQ>;
};

template <int D, typename CT, bool MQ, bool kMma>
__device__ __forceinline__ void attend(const AttnParams& p, unsigned char* smem, int tb, int te,
                                       int seq, int kv_head, int h0, int n_h) {
  if constexpr (kMma) {
    mma_attend_run<D, CT, MQ>(p, mma_smem<MmaConfig<D, CT, MQ>>(smem), tb, te, seq, kv_head, h0,
                              n_h);
  } else {
    attend_run<D, CT, MQ>(p, attn_smem<D, CT, MQ>(smem), tb, te, seq, kv_head, h0, n_h);
  }
}

// grid: x = query tile (in reverse, so the tiles with the longest contexts start first; select 1:
// the sequence), y = split (split plan) or 1 (one_pass), z = kv head * n_chunks + chunk. A tile
// holding tokens of several sequences runs them one after another (runs of equal token_seq):
// attend(tb, te, seq, kv_head, h0, n_h) for each. kSingles: the kernel serves select 1 (one-query
// blocks); a query-tile-only kernel leaves that path out (one inlined copy of attend, not two).
// kTilesOuter (query tiles only): x and z trade places, so blocks start in the order of their
// tiles' contexts, longest first, over every head (a causal grid of several waves then ends
// with its shortest tiles on all SMs instead of with a head's longest; the blocks and their bits
// are the same).
template <bool kSingles, bool kTilesOuter = false, class Attend>
__device__ __forceinline__ void for_each_run(const AttnParams& p, Attend&& attend) {
  static_assert(!(kSingles && kTilesOuter), "select 1 indexes sequences by blockIdx.x");
  const int tile_block = static_cast<int>(kTilesOuter ? blockIdx.z : blockIdx.x);
  const int head_block = static_cast<int>(kTilesOuter ? blockIdx.x : blockIdx.z);
  const int tile = p.n_tiles - 1 - tile_block;
  const int kv_head = head_block / p.n_chunks;
  const int chunk = head_block % p.n_chunks;
  const int h0 = kv_head * p.group + chunk * p.hpb;  // first query head of this block
  const int n_h = min(p.hpb, p.group - chunk * p.hpb);
  // Select 1: block x serves the single tokens of sequence x (normally 0 or 1).
  if (kSingles && p.select == 1) {
    __shared__ int found_first, found_count;
    const int seq = static_cast<int>(blockIdx.x);
    for (int after = -1;;) {
      if (threadIdx.x == 0) found_first = INT32_MAX, found_count = 0;
      __syncthreads();
      for (int t = after + 1 + threadIdx.x; t < p.n_tokens; t += kAttnThreads) {
        if (p.token_seq[t] == seq && is_single(p.token_seq, p.n_tokens, t)) {
          atomicMin(&found_first, t);
          atomicAdd(&found_count, 1);
        }
      }
      __syncthreads();
      const int t = found_first, n = found_count;
      __syncthreads();  // found_* are rewritten by the next scan
      if (n == 0) return;
      attend(t, t + 1, seq, kv_head, h0, n_h);
      if (n == 1) return;
      after = t;
    }
  }
  const int t_end = min(p.n_tokens, (tile + 1) * p.qt);
  for (int tb = tile * p.qt; tb < t_end;) {
    const int seq = p.token_seq[tb];
    int te = tb + 1;
    while (te < t_end && p.token_seq[te] == seq) ++te;
    if (p.select != 2 || te - tb > 1 || !is_single(p.token_seq, p.n_tokens, tb))
      attend(tb, te, seq, kv_head, h0, n_h);
    tb = te;
  }
}

// Blocks a SM: the config's kBlocksPerSm (registers; the host sizes the ring to match).
template <int D, typename CT, bool MQ, bool kMma>
__global__ void __launch_bounds__(kAttnThreads, ConfigOf<D, CT, MQ, kMma>::type::kBlocksPerSm)
    attention_kernel(const AttnParams p) {
  detail::wait_for_inputs();
  extern __shared__ __align__(16) unsigned char attn_smem_raw[];
  for_each_run<true>(p, [&](int tb, int te, int seq, int kv_head, int h0, int n_h) {
    attend<D, CT, MQ, kMma>(p, attn_smem_raw, tb, te, seq, kv_head, h0, n_h);
  });
}

// The row-owning tensor-core form (attention_flash.cuh): one_pass query tiles only.
template <int D, typename CT>
__global__ void __launch_bounds__(kAttnThreads, FlashConfig<D, CT>::kBlocksPerSm)
    attention_flash_kernel(const AttnParams p) {
  detail::wait_for_inputs();
  extern __shared__ __align__(16) unsigned char attn_smem_raw[];
  for_each_run<false, true>(p, [&](int tb, int te, int seq, int kv_head, int h0, int n_h) {
    flash_attend_run<D, CT>(p, attn_smem_raw, tb, te, seq, kv_head, h0, n_h);
  });
}

}  // namespace memra::kernels::detail
