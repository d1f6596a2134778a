// The attention kernels' launch parameters and block constants (private to kernels/attention):
// one AttnParams per launch, passed by value (the decode kernel's as a grid constant, whose
// tensor maps its copies read in place).
#pragma once

#include <cuda.h>  // CUtensorMap (the type only)

#include <cstdint>

#include "kernels/attention/decode_runs.cuh"
#include "kernels/kernels.h"

namespace memra::kernels::detail {

// The attention prologue run inside the decode kernel at one token (kernels.h's
// AttentionPrologue, decode_prologue.cuh): k and v as the projections wrote them, the norms'
// weights (or null), the step's angle table and slots; the caches are AttnParams' k and v.
struct DecodePrologueArgs {
  const float* k;
  const float* v;
  const float* q_norm;
  const float* k_norm;
  const float* angles;
  const int32_t* slots;
  float eps;
  bool neox;
};

constexpr int kAttnThreads = 256;
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr int kMaxGroup = 8;  // query heads per block; larger GQA groups use several blocks
constexpr int kSplit = kAttentionSplit;
constexpr int kMaxStages = 8;          // ring buffers (cp.async.wait_group takes an immediate)
constexpr int kRowStateBytes = 8 * 4;  // a row's bytes of RowState (below)

struct AttnParams {
  const void* k;
  const void* v;
  int32_t block_size;
  int32_t bs_shift;  // log2(block_size) when it is a power of two, else -1
  int32_t n_kv_heads;
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  int32_t max_blocks;
  const float* q;
  int64_t ldq;
  int n_heads;
  int group;     // query heads per kv head
  int hpb;       // query heads per block (<= kMaxGroup)
  int n_chunks;  // blocks per kv head: ceil(group / hpb)
  float scale;
  float softcap;
  int32_t window;
  float* out;
  float* partials;  // split plan: [n_tokens (select 1: n_seqs)][n_heads][n_splits][D + 2]
  int32_t n_splits;
  int32_t n_tokens;
  int32_t qt;       // query tokens per tile
  int32_t n_tiles;  // ceil(n_tokens / qt): gridDim.x (the row-owning form: gridDim.z)
  int32_t stages;   // ring buffers, 1..kMaxStages
  int32_t n_seqs;
  // 0: every token. 1: only single tokens (the only token of their sequence's run, see
  // is_single), block x = sequence (one-query blocks). 2: every token but single ones (query
  // tiles). A mixed step (decodes + prefill chunks) runs 1 and 2 as two launches, so that decode
  // tokens never wait in a tile behind other sequences' runs.
  int32_t select;
  bool one_pass;
  // The decode kernel's run form (kRun): its grid's split groups a token and kv head (G, 1 to
  // n_splits). A group takes a run of its token's live splits (group_run), one after another, the
  // next split's copies in flight under the current one's arithmetic: the grouping follows each
  // token's own context, not the grid's capacity (a CUDA graph's grid is sized for the context
  // bucket it was captured for).
  int32_t decode_groups;
  RunShares decode_shares;  // and, where not floor, the grid (token, kv head and chunk, group)
  // The decode kernels' arrival counters (decode_merge.cuh): set, the last of a token's blocks
  // merges its partials into `out`, and no combine kernel runs; null, the combine merges them.
  uint32_t* arrivals;
  // The row-owning form's softmax masks every split, not only a warp's partial ones
  // (MEMRA_FLASH_MASKS, attention.cu; the same bits either way).
  bool mask_all;
  // The row-owning form's ring takes two block barriers a chunk (stream_chunks' one_barrier
  // false; MEMRA_FLASH_BARRIERS, attention.cu; the same bits either way).
  bool two_barriers;
  // The row-owning form stages q with eight pairs' loads a thread in flight (stage_q_terms'
  // kBatch; MEMRA_FLASH_Q_LOADS, attention.cu; the same bits either way).
  bool q_loads_batched;
  // The cache's blocks (PagedKv::n_blocks; 0: not said), and the decode kernel's tensor copies'
  // maps of the K and V caches (its kTensor form, decode_tensor.cuh: encoded on the host for
  // that form's launches only, else zero; read in the kernel's parameter space).
  int32_t n_blocks;
  CUtensorMap k_map, v_map;
  // The decode kernel's cluster form at one token: each block writes the largest |out| of the
  // share it merges at part_max[heads_index x groups + group] (kernels/row_max.h:
  // raw_x_attention_enabled); null: none. The host sets it for that launch only.
  float* part_max;
  // The one-split tensor form's switches (decode_switches.h): its run and copies' cache-block
  // entries read before its wait (attention_decode.cuh: early_decode_run), its copies from all
  // eight warps (decode_tensor.cuh: tensor_copy_index) with each thread's first pair of q loaded
  // before them, where V's copies are issued (TensorV: once q is staged by default) and, opt-in,
  // K's copies once q is staged and the copies' barriers set before the wait.
  bool early_meta, spread_copies, q_first;
  uint8_t v_after;
  bool k_after_q, early_barriers;
  // The decode kernel's prologue form's arguments (kPrologue: decode_prologue.cuh), set by the
  // host for that launch only.
  DecodePrologueArgs pro;
};

}  // namespace memra::kernels::detail
