// Paged causal GQA attention: the host launch (one dispatch point from runtime head_dim and
// cache dtype to the template kernel in attention_split.cuh, plan choice, scratch sizing) and the
// combine kernel that merges split partials in increasing split order.
#include <algorithm>
#include <atomic>
#include <utility>

#include <cstdint>

#include "core/env.h"
#include "kernels/attention/attention_decode.cuh"
#include "kernels/attention/attention_decode_ring.cuh"
#include "kernels/attention/attention_kernel.cuh"
#include "kernels/attention/decode_forms.cuh"
#include "kernels/attention/decode_switches.h"
#include "kernels/attention/split_groups.h"
#include "kernels/common.cuh"
#include "kernels/cuda_status.h"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/row_max.h"
#include "kernels/tensor_map.h"

namespace memra::kernels {

namespace {

using detail::AttnParams;
using detail::kSplit;
// The decode kernel's forms (decode_forms.cuh).
using detail::bulk_code_loaded;
using detail::decode_form_kernel;
using detail::encode_decode_maps;
using detail::kAsyncVariant, detail::kBulkVariant, detail::kChainsVariant, detail::kClusterVariant,
    detail::kPrologueVariant, detail::kStampsVariant, detail::kTensorVariant,
    detail::kTransposedVariant, detail::kVariants;
using detail::one_split_variant;
using detail::prologue_variant;

// The split plan's partials are capped at this many (token, head, split) rows: ~68 MB of scratch
// at head_dim 128, ~270 MB at 512. Steps above it run one_pass, which needs no scratch and has
// enough tokens to fill the GPU anyway.
constexpr int64_t kMaxPartialRows = int64_t{1} << 17;

int64_t n_splits_of(const StepDev& step) {
  return (int64_t{step.max_context} + kSplit - 1) / kSplit;
}

int64_t partial_rows(const StepDev& step, int n_heads) {
  return int64_t{step.n_tokens} * n_heads * n_splits_of(step);
}
// The partial rows of a step's single tokens (one launch for them: rows by sequence).
int64_t partial_rows_seqs(const StepDev& step, int n_heads) {
  return int64_t{step.n_seqs} * n_heads * n_splits_of(step);
}

// One thread per dim of one (token, head) (select 1: of the single token of sequence x, found by
// a scan; select 2: every token but single ones): M and L are recomputed by every thread in the
// same order, so all threads agree. The partials of up to kBatch splits are staged in shared memory
// first (all their loads in flight at once), then merged in increasing split order. A position
// past the step's max_context (a caller bug) yields NaN rather than an out-of-bounds read.
template <int D>
__global__ void attention_combine_kernel(const float* partials, const int32_t* positions,
                                         const int32_t* token_seq, int n_tokens, int select,
                                         int32_t window, int n_heads, int n_splits, float* out) {
  detail::wait_for_inputs();
  constexpr int kBatch = D <= 128 ? 64 : D <= 256 ? 32 : 16;  // <= 33 KiB of static shared memory
  __shared__ float staged[kBatch * (D + 2)];
  __shared__ int found;
  int t = blockIdx.x;
  const int h = blockIdx.y, d = threadIdx.x;
  if (select == 1) {  // block x = sequence x: its single token, if it has one
    if (d == 0) found = INT32_MAX;
    __syncthreads();
    for (int i = d; i < n_tokens; i += D)
      if (token_seq[i] == t && detail::is_single(token_seq, n_tokens, i)) atomicMin(&found, i);
    __syncthreads();
    if (found == INT32_MAX) return;
    t = found;
  } else if (select == 2 && detail::is_single(token_seq, n_tokens, t)) {
    return;
  }
  const detail::KeyRange range = detail::key_range(positions[t], window);
  float* o = out + (int64_t{t} * n_heads + h) * D + d;
  if (range.last >= n_splits) {
    *o = __int_as_float(0x7fffffff);
    return;
  }
  const int64_t prow = select == 1 ? blockIdx.x : t;  // the single launch's rows: sequences
  const float* part = partials + (prow * n_heads + h) * n_splits * (D + 2);
  float M = 0.0f, L = 1.0f, O = 0.0f;
  for (int s0 = range.first; s0 <= range.last; s0 += kBatch) {
    const int nb = min(kBatch, range.last + 1 - s0);
    const float* src = part + int64_t{s0} * (D + 2);
    __syncthreads();  // the previous batch is merged
    for (int i = d; i < nb * (D + 2); i += D) staged[i] = src[i];
    __syncthreads();
    for (int k = 0; k < nb; ++k) {
      const float* ps = staged + k * (D + 2);
      detail::merge_split(M, L, O, ps[D], ps[D + 1], ps[d], s0 + k == range.first);
    }
  }
  *o = __fdiv_rn(O, L);
}

void cuda_check(cudaError_t status, const char* what) {
  detail::check_cuda(status, "attention", what);
}

// The device's shared-memory limits and SM count, read once per device.
struct DeviceLimits {
  int smem_optin = 0;   // per block, opted in
  int smem_per_sm = 0;  // per SM
  int sms = 0;
};

DeviceLimits device_limits() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices][3] = {};
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  DeviceLimits lim;
  if (dev < kMaxDevices && cache[dev][2].load(std::memory_order_relaxed) > 0) {
    lim.smem_optin = cache[dev][0].load(std::memory_order_relaxed);
    lim.smem_per_sm = cache[dev][1].load(std::memory_order_relaxed);
    lim.sms = cache[dev][2].load(std::memory_order_relaxed);
    return lim;
  }
  cuda_check(cudaDeviceGetAttribute(&lim.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
             "cudaDeviceGetAttribute");
  cuda_check(
      cudaDeviceGetAttribute(&lim.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev),
      "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&lim.sms, cudaDevAttrMultiProcessorCount, dev),
             "cudaDeviceGetAttribute");
  if (dev < kMaxDevices) {
    cache[dev][0].store(lim.smem_optin, std::memory_order_relaxed);
    cache[dev][1].store(lim.smem_per_sm, std::memory_order_relaxed);
    cache[dev][2].store(lim.sms, std::memory_order_relaxed);
  }
  return lim;
}

// The split plan's second launch: the partials merged in split order.
template <int D>
void launch_combine(const AttnParams& p, cudaStream_t stream) {
  detail::launch(attention_combine_kernel<D>,
                 dim3(static_cast<unsigned>(p.select == 1 ? p.n_seqs : p.n_tokens),
                      static_cast<unsigned>(p.n_heads)),
                 D, 0, stream, p.partials, p.positions, p.token_seq, p.n_tokens, p.select, p.window,
                 p.n_heads, p.n_splits, p.out);
}

// The attention prologue (kernels.h's AttentionPrologue) while it has not run: the decode
// kernel's prologue form takes it into its launch, any other launch runs it first.
struct PendingPrologue {
  const AttentionPrologue* args = nullptr;  // null: none, or it has run
  const PagedKv* kv = nullptr;
  const StepDev* step = nullptr;
  int n_heads = 0;
  // qk_prologue's launch, if still pending.
  void run(cudaStream_t stream) {
    if (args == nullptr) return;
    const AttentionPrologue& a = *args;
    args = nullptr;
    qk_prologue(*kv, *step, a.q, a.k, a.v, n_heads, a.q_norm, a.k_norm, nullptr, a.eps, a.n_rot,
                a.neox, a.inv_freq, stream, a.angle_table);
  }
};
// What a launch may hand the o product after it (attention_part_max: at most cap partial maxima)
// and how many it wrote, and the prologue it must run or take.
struct Handoff {
  float* part_max = nullptr;
  int cap = 0, written = 0;
  PendingPrologue prologue;
};

// The decode kernel's form kShared (attention_decode.cuh) for a split plan's one-query launch,
// where its shared memory fits.
template <int D, typename CT, bool kShared>
bool launch_decode_form(const AttnParams& p, const DeviceLimits& lim, cudaStream_t stream,
                        Handoff& handoff) {
  using DC = detail::DecodeConfig<D, CT, kShared>;
  using detail::RunShares;
  if (DC::kBytes > lim.smem_optin) return false;
  AttnParams q = p;
  const int64_t heads = int64_t{p.n_kv_heads} * p.n_chunks;
  const int64_t wave = int64_t{DC::kBlocksPerSm} * lim.sms;
  const DecodeSplits mode = kShared ? decode_splits_mode() : DecodeSplits::one;
  int64_t groups = p.n_splits;
  if (mode == DecodeSplits::automatic)
    groups = std::clamp<int64_t>(wave / (int64_t{p.n_tokens} * heads), 1, p.n_splits);
  else if (mode == DecodeSplits::fill)
    groups = fill_groups_cached(int64_t{p.n_tokens} * heads, p.n_splits, wave);
  const bool runs = groups < p.n_splits;  // else a split a block: the straight-line form
  q.decode_groups = static_cast<int32_t>(groups);
  // fill: the longer runs first only where the grid is more than a wave. Within one wave the
  // order buys nothing, and floor's shares put the extra split on the last group, the one holding
  // the token's last, partial split (16 sequences of 512-576 keys, splits of 256, 256 and up to 64:
  // longer_first's longest run walks 512 keys, floor's 320; longer_first measured 2-6% slower on
  // the H100 there, fifty-fourth round).
  q.decode_shares = RunShares::floor;
  if (runs && mode == DecodeSplits::fill && int64_t{p.n_tokens} * heads * groups > wave)
    q.decode_shares = RunShares::longer_first;
  const bool by_group = q.decode_shares != RunShares::floor;
  const dim3 grid(static_cast<unsigned>(p.n_tokens),
                  static_cast<unsigned>(by_group ? heads : groups),
                  static_cast<unsigned>(by_group ? groups : heads));
  const bool one_wave = int64_t{p.n_tokens} * heads * groups <= wave;
  if (!decode_merges(p, heads, one_wave)) q.arrivals = nullptr;  // the combine merges
  if constexpr (kShared && detail::has_decode_ring<D, CT>()) {
    using RC = detail::DecodeRingConfig<D, CT>;
    const DecodeRing ring = decode_ring_mode();
    const bool ring_pays = p.n_tokens == 1 && runs && one_wave;  // auto's rule
    // (A split a block is a run of one: the ring form takes any grid.)
    if (p.hpb <= RC::kRows &&
        (ring == DecodeRing::on || (ring == DecodeRing::automatic && ring_pays))) {
      bool transposed = false;
      if constexpr (D == 128) transposed = decode_transposed_chunks_enabled();
      const auto kernel = transposed ? detail::decode_ring_kernel<D, CT, D == 128>
                                     : detail::decode_ring_kernel<D, CT, false>;
      static std::atomic<uint64_t> ring_set[2] = {};
      detail::allow_smem_once(kernel, RC::kBytes, ring_set[transposed]);
      handoff.prologue.run(stream);
      detail::launch(kernel, grid, detail::kAttnThreads, RC::kBytes, stream, q);
      if (q.arrivals == nullptr) launch_combine<D>(p, stream);
      return true;
    }
  }
  const bool pipe = !DC::kSeparateV && decode_pipe_enabled();
  int variant = 0;
  if (!kShared && D == 128 && !runs && !pipe) {
    variant = (decode_stamps_enabled() ? kStampsVariant : 0) |
              (decode_chains_enabled() ? kChainsVariant : 0);
    const DecodeBulk bulk = decode_bulk_mode();
    if (bulk != DecodeBulk::off) {
      const bool loaded = bulk_code_loaded(one_split_variant<CT, kBulkVariant>());
      if (!loaded && bulk == DecodeBulk::on)
        fail(ErrorCode::unsupported,
             "MEMRA_DECODE_BULK=1: this device runs no sm_90 code of the decode kernel (bulk "
             "copies are Hopper instructions)");
      if (loaded) variant |= kBulkVariant;
    }
    // The cluster merge: where this launch merges its own partials, a cluster a token's splits.
    if ((variant & kBulkVariant) && (variant & kChainsVariant) && q.arrivals != nullptr &&
        groups <= detail::kClusterMaxSplits && decode_cluster_merge_enabled())
      variant |= kClusterVariant;
    // One token's clusters hand the o product their shares' largest |out|, a block each.
    if ((variant & kClusterVariant) && p.n_tokens == 1 && handoff.part_max != nullptr &&
        heads * groups <= handoff.cap) {
      q.part_max = handoff.part_max;
      handoff.written = static_cast<int>(heads * groups);
    }
    // The transposed products: up to an n8 tile's columns of query rows.
    if ((variant & kBulkVariant) && (variant & kChainsVariant) &&
        p.hpb <= detail::kTransposedMaxRows && decode_transposed_enabled())
      variant |= kTransposedVariant;
    // The tensor copies: where the cache's maps can be encoded.
    if ((variant & kTransposedVariant) && decode_tensor_enabled() && encode_decode_maps(q)) {
      variant |= kTensorVariant;
      q.early_meta = decode_early_meta_enabled();  // (a split a block: this branch's forms)
      q.spread_copies = decode_tensor_spread_enabled();
      q.q_first = decode_q_first_enabled();
      q.v_after = decode_v_after();
      q.k_after_q = q.q_first && decode_k_after_q_enabled();  // (q's pair is what it waits on)
      q.early_barriers = q.early_meta && decode_early_barriers_enabled();  // (the run, early)
      if ((variant & kClusterVariant) && decode_cluster_merge_mode() == ClusterMerge::async)
        variant |= kAsyncVariant;
    }
  }
  // The transposed products in a split a chunk at a time: up to an n8 tile's columns of rows.
  const bool transposed =
      pipe && D == 128 && p.hpb <= detail::kTransposedMaxRows && decode_transposed_chunks_enabled();
  // The prologue in the blocks where this launch takes its variant (a one-token step: the host's
  // prologue_fusable), else its own launch first.
  bool fused = false;
  if constexpr (!kShared && D == 128)
    fused = handoff.prologue.args != nullptr && (variant & ~kStampsVariant) == kPrologueVariant;
  if (fused) {
    const AttentionPrologue& a = *handoff.prologue.args;
    q.pro = {a.k,   a.v,   a.q_norm, a.k_norm, a.angle_table, handoff.prologue.step->slots,
             a.eps, a.neox};
    handoff.prologue.args = nullptr;
  } else {
    handoff.prologue.run(stream);
  }
  const bool stamps = (variant & kStampsVariant) != 0;
  const auto kernel = fused ? prologue_variant<CT>(stamps)
                            : decode_form_kernel<D, CT, kShared>(runs, pipe, transposed, variant);
  const int smem = variant & kBulkVariant ? DC::kBulkBytes : DC::kBytes;
  // One flag a kernel this can launch: the runs, pipe and transposed forms', each variant's, then
  // the prologue variant's (with and without stamps).
  static std::atomic<uint64_t> smem_set[8 + kVariants + 2] = {};
  detail::allow_smem_once(kernel, smem,
                          smem_set[fused          ? 8 + kVariants + stamps
                                   : variant != 0 ? 8 + variant
                                                  : 4 * transposed + 2 * pipe + runs]);
  if (variant & kClusterVariant) {  // its blocks merge among themselves: no counter, no combine
    detail::launch_clustered(kernel, grid, detail::kAttnThreads, smem, stream,
                             dim3(1, static_cast<unsigned>(groups), 1), q);
    return true;
  }
  detail::launch(kernel, grid, detail::kAttnThreads, smem, stream, q);
  if (q.arrivals == nullptr) launch_combine<D>(p, stream);
  return true;
}

// The decode kernel for a split plan's one-query launch of `blocks` blocks, when it serves it:
// every token alone in its block (select 0) and power-of-two cache blocks (and, under
// MEMRA_DECODE_KERNEL=small, a grid the generic kernel would run at one block an SM).
template <int D, typename CT>
bool launch_decode(const AttnParams& p, int64_t blocks, const DeviceLimits& lim,
                   cudaStream_t stream, Handoff& handoff) {
  const DecodeKernel mode = decode_kernel_mode();
  if (mode == DecodeKernel::off || p.one_pass || p.select != 0 || p.bs_shift < 0 ||
      (mode == DecodeKernel::small_grids && blocks >= 2 * int64_t{lim.sms}))
    return false;
  if constexpr (D <= 128) {  // (at 256 V always takes K's rows: the two forms are one)
    // Grids over the SMs take the form where it fits more blocks an SM (head_dim 128; at 64 both
    // fit two, and V's loads need not wait for the scores).
    constexpr bool kMore = detail::DecodeConfig<D, CT, true>::kBlocksPerSm >
                           detail::DecodeConfig<D, CT, false>::kBlocksPerSm;
    const SharedRows shared = shared_rows_mode();
    if (shared == SharedRows::all || (kMore && shared == SharedRows::big_grids && blocks > lim.sms))
      return launch_decode_form<D, CT, true>(p, lim, stream, handoff);
  }
  return launch_decode_form<D, CT, false>(p, lim, stream, handoff);
}

// Blocks per SM the ring is sized for: two where the config allows it (C::kBlocksPerSm: one-query
// blocks, tensor-core query tiles up to head_dim 128) and the grid has enough blocks to fill the
// GPU twice (decode at long contexts or large batches: memory-bound, one block's compute overlaps
// the other's loads; tensor-core prefill: latency-bound), else one with the deepest ring (short
// decode: every chunk of a split in flight at once; CUDA-core prefill: the register-tiled block
// needs the SM).
template <int D, typename CT, bool MQ, bool kMma>
void launch_shape(AttnParams p, const DeviceLimits& lim, cudaStream_t stream, Handoff& handoff) {
  using C = typename detail::ConfigOf<D, CT, MQ, kMma>::type;
  const auto kernel = detail::attention_kernel<D, CT, MQ, kMma>;
  p.qt = MQ ? C::kRows / p.hpb : 1;
  p.n_tiles = p.select == 1 ? p.n_seqs : (p.n_tokens + p.qt - 1) / p.qt;
  const int64_t blocks =
      int64_t{p.n_tiles} * (p.one_pass ? 1 : p.n_splits) * p.n_kv_heads * p.n_chunks;
  if constexpr (!MQ && kMma && detail::has_decode_kernel<D, CT>()) {
    if (launch_decode<D, CT>(p, blocks, lim, stream, handoff)) return;
  }
  handoff.prologue.run(stream);
  const auto stages_for = [&](int budget) {  // 256 bytes left for the kernel's static smem
    return std::min(detail::kMaxStages, (budget - 256 - C::kFixedBytes) / C::kChunkBytes);
  };
  int stages = stages_for(lim.smem_optin);
  // The runtime reserves 1 KiB of shared memory a block. (An f32 cache at head_dim 256 has no
  // room for two blocks: it keeps one.)
  if (C::kBlocksPerSm == 2 && blocks >= 2 * int64_t{lim.sms} &&
      stages_for(lim.smem_per_sm / 2 - 1024) >= 1)
    stages = stages_for(lim.smem_per_sm / 2 - 1024);
  if (stages < 1)
    fail(ErrorCode::unsupported,
         "attention: head_dim {} needs {} bytes of shared memory, the device allows {}", D,
         C::kFixedBytes + C::kChunkBytes, lim.smem_optin);
  p.stages = stages;
  const int smem = C::kFixedBytes + stages * C::kChunkBytes;
  // The attribute is always the deepest ring's size, so that it never shrinks under a launch
  // (or a captured graph) that uses more; it is set once per device.
  const int smem_max = C::kFixedBytes + stages_for(lim.smem_optin) * C::kChunkBytes;
  static std::atomic<uint64_t> smem_set{0};
  detail::allow_smem_once(kernel, smem_max, smem_set);
  const dim3 grid(static_cast<unsigned>(p.n_tiles),
                  p.one_pass ? 1u : static_cast<unsigned>(p.n_splits),
                  static_cast<unsigned>(p.n_kv_heads * p.n_chunks));
  detail::launch(kernel, grid, detail::kAttnThreads, smem, stream, p);
  if (!p.one_pass) launch_combine<D>(p, stream);
}

// MEMRA_ATTENTION_FLASH: query tiles of 16-bit caches at head_dim 64 and 128 on the row-owning
// form (attention_flash.cuh): unset or auto, where flash_pays; 1, every query-tile launch it can
// serve (one_pass and the split plan, whatever the grid); 0, none (the 32-row tiles of
// attention_mma.cuh: the A/B, and kernel-check's coverage of that kernel's query tiles). The
// same bits either way.
enum class FlashMode { off, on, automatic };  // in env_choice's order
FlashMode flash_mode() {
  static const auto mode =
      static_cast<FlashMode>(env_choice("MEMRA_ATTENTION_FLASH", {"0", "1", "auto"}, 2));
  return mode;
}

// MEMRA_FLASH_MASKS: where the row-owning form's softmax applies the key masks. unset or edges,
// only on splits where some row of a warp lacks keys (a causal prompt's diagonal split, a
// window's first): a split every row has whole takes no compare or select a score; all, on every
// split (the A/B). The same bits either way: a mask on a key the row has changes nothing.
// Measured on the H200 (docs/PERFORMANCE.md, forty-third round; kernel-check ALL GREEN each way):
// prefill attention at 2,048 tokens, F16 cache, 479.3 -> 467.9 us.
bool flash_masks_all() {
  static const bool all = env_choice("MEMRA_FLASH_MASKS", {"edges", "all"}, 0) == 1;
  return all;
}

// MEMRA_FLASH_BARRIERS: the row-owning form's block barriers a chunk of keys. unset or 1, one:
// the barrier that says a chunk has landed also frees the chunk before it, whose buffer is
// refilled there (stream_chunks' one_barrier; the form's softmax and finish read only a thread's
// own registers and state); 2, two: a barrier once a chunk has landed and one after its
// arithmetic before its buffer is refilled, as the other forms need (the A/B). The same chunks in
// flight, the same bits. Measured (docs/PERFORMANCE.md, forty-fourth round, H100; kernel-check
// ALL GREEN): prefill attention at 2,048 tokens, BF16 cache, 530.3 us with two, 510.6 with one.
bool flash_two_barriers() {
  static const bool two = env_choice("MEMRA_FLASH_BARRIERS", {"1", "2"}, 0) == 1;
  return two;
}

// MEMRA_FLASH_Q_LOADS: the row-owning form's q staging, unset or 8 (eight pairs' loads issued a
// thread before any is converted) or 1 (a thread's pairs loaded and converted one at a time, each
// waiting on its load: the A/B). The same bits either way. Measured (forty-fourth round, H100;
// kernel-check ALL GREEN): prefill attention at 2,048 tokens, BF16 cache, 548.9 -> 510.6 us.
bool flash_q_loads_batched() {
  static const bool batched = env_choice("MEMRA_FLASH_Q_LOADS", {"1", "8"}, 1) == 1;
  return batched;
}

// Whether the row-owning form's launch of `blocks` 128-row blocks (split plan: every split
// counted) beats the 32-row tiles: its grid has at least 40% of a block an SM, since below that
// the 32-row tiles' four times as many blocks, two an SM, keep more SMs busy than the row-owning
// form's one block an SM gains; and a split-plan launch has at least two tiles' tokens (a tile
// with few rows leaves the row-owning form's other warps idle where the 32-row tiles split a
// chunk's keys over all eight). Measured at Qwen3-8B's shape (BF16 cache, H200, docs/
// PERFORMANCE.md thirty-fourth round): one_pass at 160 tokens, 30% of a block an SM, 41.4 us
// against the 32-row tiles' 36.0; at 256, 48%, 49.3 against 52.2; the split plan on a 64-token
// chunk after 3,584 keys (240 blocks) 116.5 against 143.4.
bool flash_pays(const AttnParams& p, int64_t blocks, const DeviceLimits& lim) {
  if (blocks * 100 < int64_t{40} * lim.sms) return false;
  return p.one_pass || p.n_tokens >= 2 * p.qt;
}

// A query-tile launch on the row-owning form: 128-row tiles, one block an SM, the ring in what
// the q terms and the rows' running state leave of the SM's shared memory. False where fewer than
// two chunks fit (an A100's 163 KB) or where flash_mode() leaves the launch to the 32-row tiles.
template <int D, typename CT>
bool launch_flash(AttnParams p, const DeviceLimits& lim, cudaStream_t stream) {
  using C = detail::FlashConfig<D, CT>;
  const auto kernel = detail::attention_flash_kernel<D, CT>;
  const int stages =
      std::min(detail::kMaxStages, (lim.smem_optin - 256 - C::kFixedBytes) / C::kChunkBytes);
  if (stages < 2) return false;
  p.stages = stages;
  p.mask_all = flash_masks_all();
  p.two_barriers = flash_two_barriers();
  p.q_loads_batched = flash_q_loads_batched();
  p.qt = C::kRows / p.hpb;
  p.n_tiles = (p.n_tokens + p.qt - 1) / p.qt;
  if (p.n_tiles > 65535) return false;  // the grid's z (for_each_run's kTilesOuter)
  const int64_t blocks =
      int64_t{p.n_tiles} * (p.one_pass ? 1 : p.n_splits) * p.n_kv_heads * p.n_chunks;
  if (flash_mode() == FlashMode::automatic && !flash_pays(p, blocks, lim)) return false;
  const int smem = C::kFixedBytes + stages * C::kChunkBytes;
  static std::atomic<uint64_t> smem_set{0};
  detail::allow_smem_once(kernel, smem, smem_set);
  const dim3 grid(static_cast<unsigned>(p.n_kv_heads * p.n_chunks),
                  p.one_pass ? 1u : static_cast<unsigned>(p.n_splits),
                  static_cast<unsigned>(p.n_tiles));
  detail::launch(kernel, grid, detail::kAttnThreads, smem, stream, p);
  if (!p.one_pass) launch_combine<D>(p, stream);
  return true;
}

// The tensor-core arithmetic where it exists (16-bit caches at head_dim 64, 128, 256) unless
// the caller asks for the CUDA-core one. F32 and fp8 caches always take the CUDA cores.
template <int D, typename CT>
void launch(const AttnParams& p, bool multi, bool tensor_cores, const DeviceLimits& lim,
            cudaStream_t stream, Handoff& handoff) {
  constexpr bool kHasMma = sizeof(CT) == 2 && (D == 64 || D == 128 || D == 256);
  if constexpr (kHasMma) {
    if (tensor_cores) {
      if constexpr (D <= 128) {
        if (multi && flash_mode() != FlashMode::off) {
          handoff.prologue.run(stream);
          if (launch_flash<D, CT>(p, lim, stream)) return;
        }
      }
      if (multi) return launch_shape<D, CT, true, true>(p, lim, stream, handoff);
      return launch_shape<D, CT, false, true>(p, lim, stream, handoff);
    }
  }
  if (multi) return launch_shape<D, CT, true, false>(p, lim, stream, handoff);
  launch_shape<D, CT, false, false>(p, lim, stream, handoff);
}

template <typename CT>
void dispatch_head_dim(const AttnParams& p, int head_dim, bool multi, bool tensor_cores,
                       const DeviceLimits& lim, cudaStream_t stream, Handoff& handoff) {
  switch (head_dim) {
    case 16:  // the tiny Gemma 4 fixture's sliding-window layers
      return launch<16, CT>(p, multi, tensor_cores, lim, stream, handoff);
    case 32:  // tiny test models (the gate fixtures)
      return launch<32, CT>(p, multi, tensor_cores, lim, stream, handoff);
    case 64:
      return launch<64, CT>(p, multi, tensor_cores, lim, stream, handoff);
    case 128:
      return launch<128, CT>(p, multi, tensor_cores, lim, stream, handoff);
    case 256:
      return launch<256, CT>(p, multi, tensor_cores, lim, stream, handoff);
    case 512:  // Gemma 4's full-attention layers
      if constexpr (sizeof(CT) == 4) {
        fail(ErrorCode::unsupported,
             "attention: head_dim 512 needs an F16, BF16 or F8_E4M3 KV cache on CUDA, not F32 (a "
             "chunk of 64 F32 keys of 512 dims is 129 KiB: shared memory holds one at most, no "
             "pipeline)");
      } else {
        return launch<512, CT>(p, multi, tensor_cores, lim, stream, handoff);
      }
    default:
      fail(ErrorCode::unsupported,
           "attention: head_dim {} is not supported on CUDA (16, 32, 64, 128, 256; 512 with an "
           "F16, BF16 or F8_E4M3 KV cache)",
           head_dim);
  }
}

}  // namespace

bool attention_supports_head_dim(int head_dim, DType cache) {
  const bool narrow = cache == DType::f16 || cache == DType::bf16 || cache == DType::f8_e4m3;
  switch (head_dim) {
    case 16:
    case 32:
    case 64:
    case 128:
    case 256:
      return narrow || cache == DType::f32;
    case 512:
      return narrow;
    default:
      return false;
  }
}

size_t attention_scratch_bytes(const StepDev& step, int n_heads, int head_dim) {
  int64_t rows = partial_rows(step, n_heads);
  if (rows > kMaxPartialRows) rows = partial_rows_seqs(step, n_heads);
  if (rows <= 0 || rows > kMaxPartialRows) return 0;
  return detail::kArrivalBytes +
         static_cast<size_t>(rows) * static_cast<size_t>(head_dim + 2) * sizeof(float);
}

size_t attention_scratch_bytes_max(int head_dim) {
  return detail::kArrivalBytes +
         static_cast<size_t>(kMaxPartialRows) * static_cast<size_t>(head_dim + 2) * sizeof(float);
}

void attention_scratch_clear(void* scratch, cudaStream_t stream) {
  if (scratch == nullptr) return;
  cuda_check(cudaMemsetAsync(scratch, 0, detail::kArrivalBytes, stream),
             "clearing the scratch's arrival counters");
}

int decode_phase_stamps(long long* out, int max_blocks, cudaStream_t stream) {
  int blocks = 0;
  cuda_check(cudaMemcpyFromSymbolAsync(&blocks, detail::g_decode_stamp_blocks, sizeof(int), 0,
                                       cudaMemcpyDeviceToHost, stream),
             "decode_phase_stamps");
  cuda_check(cudaStreamSynchronize(stream), "decode_phase_stamps");
  const int n = std::clamp(std::min(blocks, kDecodeStampBlocks), 0, std::max(max_blocks, 0));
  if (n > 0)
    cuda_check(cudaMemcpyFromSymbolAsync(out, detail::g_decode_stamps,
                                         sizeof(long long) * kDecodePhases * n, 0,
                                         cudaMemcpyDeviceToHost, stream),
               "decode_phase_stamps");
  // Read once: a later launch the stamped form does not take leaves nothing to read.
  const int none = 0;
  cuda_check(cudaMemcpyToSymbolAsync(detail::g_decode_stamp_blocks, &none, sizeof(int), 0,
                                     cudaMemcpyHostToDevice, stream),
             "decode_phase_stamps");
  cuda_check(cudaStreamSynchronize(stream), "decode_phase_stamps");
  return n;
}

namespace {

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// Whether the decode kernel's prologue form may take the prologue (decode_prologue.cuh): one
// token, qk_prologue_kernel4's heads (128 dims, every one rotated, the step's angle table), a
// 16-bit cache on the tensor cores, and every row and weight it reads four floats a lane 16-byte
// aligned. Whether the launch then takes that form is launch_decode_form's.
bool prologue_fusable(const AttentionPrologue& a, const PagedKv& kv, const StepDev& step,
                      const AttentionArgs& args) {
  return step.n_tokens == 1 && step.slots != nullptr && kv.head_dim == 128 && a.n_rot == 128 &&
         (kv.dtype == DType::f16 || kv.dtype == DType::bf16) && args.tensor_cores &&
         args.tile != AttentionTile::multi_query && a.angle_table != nullptr && aligned16(a.q) &&
         aligned16(a.k) && aligned16(a.v) && aligned16(a.q_norm) && aligned16(a.k_norm) &&
         aligned16(a.angle_table);
}

// attention() handing what `handoff` asks for where the launch's form can, with its prologue
// (`prologue`, or null) first or inside.
void attention_handing(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
                       const AttentionArgs& args, float* out, void* scratch, cudaStream_t stream,
                       Handoff& handoff, const AttentionPrologue* prologue) {
  if (step.n_tokens < 0 || step.n_seqs < 0)
    fail(ErrorCode::invalid_argument, "attention: {} tokens, {} sequences", step.n_tokens,
         step.n_seqs);
  if (prologue != nullptr) {
    if (prologue->q != q)
      fail(ErrorCode::invalid_argument, "attention: the prologue's q is not attention's q");
    if (ldq != int64_t{args.n_heads} * kv.head_dim)
      fail(ErrorCode::invalid_argument,
           "attention: a prologue needs packed q rows (stride {}, {} heads x {} dims)", ldq,
           args.n_heads, kv.head_dim);
    handoff.prologue = {prologue, &kv, &step, args.n_heads};
    if (!prologue_fusable(*prologue, kv, step, args)) handoff.prologue.run(stream);
  }
  if (step.n_tokens == 0) return;
  if (kv.n_kv_heads <= 0 || args.n_heads <= 0 || args.n_heads % kv.n_kv_heads != 0)
    fail(ErrorCode::invalid_argument,
         "attention: {} query heads are not a positive multiple of {} kv heads", args.n_heads,
         kv.n_kv_heads);
  if (kv.block_size <= 0 || step.max_blocks <= 0 || step.max_context <= 0)
    fail(ErrorCode::invalid_argument,
         "attention: block size {}, {} blocks per table, max context {} must be positive",
         kv.block_size, step.max_blocks, step.max_context);
  if (ldq < int64_t{args.n_heads} * kv.head_dim)
    fail(ErrorCode::invalid_argument, "attention: q row stride {} < {} heads x {} dims", ldq,
         args.n_heads, kv.head_dim);
  const int group = args.n_heads / kv.n_kv_heads;
  AttnParams p{};
  p.k = kv.k;
  p.v = kv.v;
  p.block_size = kv.block_size;
  p.bs_shift = -1;
  for (int s = 0; s < 31; ++s)
    if (kv.block_size == (1 << s)) p.bs_shift = s;
  p.n_kv_heads = kv.n_kv_heads;
  p.n_blocks = kv.n_blocks;
  p.positions = step.positions;
  p.token_seq = step.token_seq;
  p.block_tables = step.block_tables;
  p.max_blocks = step.max_blocks;
  p.q = q;
  p.ldq = ldq;
  p.n_heads = args.n_heads;
  p.group = group;
  p.hpb = std::min(group, detail::kMaxGroup);
  p.n_chunks = (group + p.hpb - 1) / p.hpb;
  p.scale = args.scale;
  p.softcap = args.softcap;
  p.window = args.window;
  p.out = out;
  // The scratch: the decode kernels' arrival counters, then the split partials.
  p.arrivals = static_cast<uint32_t*>(scratch);
  p.partials =
      scratch == nullptr
          ? nullptr
          : reinterpret_cast<float*>(static_cast<unsigned char*>(scratch) + detail::kArrivalBytes);
  p.n_splits = static_cast<int32_t>(n_splits_of(step));
  p.n_tokens = step.n_tokens;
  p.n_seqs = step.n_seqs;
  p.select = 0;
  const bool multi = args.tile == AttentionTile::automatic
                         ? int64_t{step.n_tokens} >= 4 * int64_t{std::max(step.n_seqs, 1)}
                         : args.tile == AttentionTile::multi_query;
  const DeviceLimits lim = device_limits();
  const bool fits = partial_rows(step, args.n_heads) <= kMaxPartialRows;
  const bool fits_seqs = partial_rows_seqs(step, args.n_heads) <= kMaxPartialRows;
  if (args.plan == AttentionPlan::split && (!fits || scratch == nullptr))
    fail(ErrorCode::invalid_argument,
         "attention: the split plan needs attention_scratch_bytes() of scratch ({} partial rows, "
         "cap {})",
         partial_rows(step, args.n_heads), kMaxPartialRows);
  if (int64_t{kv.n_kv_heads} * group > 65535 || p.n_splits > 65535 || args.n_heads > 65535)
    fail(ErrorCode::invalid_argument, "attention: {} kv heads or {} splits exceed the grid",
         kv.n_kv_heads, p.n_splits);
  // A step with query tiles and several sequences may mix decode tokens with prefill chunks:
  // the single tokens get their own one-query launch (one block per sequence), the tiles skip
  // them. Forced block shapes (tests) keep one launch.
  const bool two = multi && args.tile == AttentionTile::automatic && step.n_seqs > 1;
  const auto plan_for = [&](bool mq, bool singles, int64_t grid_x) {
    if (args.plan == AttentionPlan::split) return false;
    if (args.plan == AttentionPlan::one_pass || !(singles ? fits_seqs : fits) ||
        scratch == nullptr || p.n_splits == 1)
      return true;
    // Query tiles that fill the GPU by themselves skip the partials' round trip. One-query blocks
    // that fill it twice over may too (MEMRA_DECODE_ONE_PASS=1: each block walks its sequence's
    // splits, no combine runs): the kernel alone measured faster (64 x 640 keys 107 vs 118 us),
    // whole 8B Q4_K_M steps at 64 sequences not (3,974 vs 4,035 tok/s; PERFORMANCE.md, nineteenth
    // round), so they stay split by default.
    const int64_t blocks = grid_x * kv.n_kv_heads * p.n_chunks;
    return mq ? blocks >= lim.sms : blocks >= 2 * int64_t{lim.sms} && decode_one_pass_enabled();
  };
  const auto run = [&](AttnParams q_p, bool mq) {
    int64_t grid_x = q_p.select == 1 ? q_p.n_seqs : q_p.n_tokens;
    if (mq) {
      // As launch()'s kHasMma: 16-bit caches only.
      const bool mma = args.tensor_cores && (kv.dtype == DType::f16 || kv.dtype == DType::bf16) &&
                       (kv.head_dim == 64 || kv.head_dim == 128 || kv.head_dim == 256);
      const int qt = detail::tile_rows(kv.head_dim, mma) / q_p.hpb;
      grid_x = (int64_t{q_p.n_tokens} + qt - 1) / qt;
    }
    q_p.one_pass = plan_for(mq, q_p.select == 1, grid_x);
    if (!mq) {
      // One-query blocks of a small grid (short decode: a few sequences and splits) leave most
      // SMs idle while each block's compute is the latency: give each block fewer of the
      // group's heads (rows), down to one, while the grid stays within one block per SM. A
      // row's arithmetic does not depend on which other rows share its block.
      const int64_t blocks =
          grid_x * (q_p.one_pass ? 1 : q_p.n_splits) * kv.n_kv_heads * q_p.n_chunks;
      int f = 1;
      while (f * 2 <= q_p.hpb && blocks * f * 2 <= lim.sms) f *= 2;
      q_p.hpb = (q_p.hpb + f - 1) / f;
      q_p.n_chunks = (group + q_p.hpb - 1) / q_p.hpb;
    }
    detail::with_cache_type(kv.dtype, "attention", [&](auto tag) {
      dispatch_head_dim<decltype(tag)>(q_p, kv.head_dim, mq, args.tensor_cores, lim, stream,
                                       handoff);
    });
  };
  if (two) {
    AttnParams singles = p, tiles = p;
    singles.select = 1;
    tiles.select = 2;
    run(singles, false);
    run(tiles, true);
  } else {
    run(p, multi);
  }
  if (handoff.prologue.args != nullptr)  // every launch path runs or fuses it: a missed one
    fail(ErrorCode::internal, "attention: the prologue was neither run nor fused");
}

}  // namespace

void attention(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
               const AttentionArgs& args, float* out, void* scratch, cudaStream_t stream,
               const AttentionPrologue* prologue) {
  Handoff none;
  attention_handing(kv, step, q, ldq, args, out, scratch, stream, none, prologue);
}

int attention_part_max(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
                       const AttentionArgs& args, float* out, void* scratch, float* part_max,
                       int part_max_cap, cudaStream_t stream, const AttentionPrologue* prologue) {
  Handoff handoff;
  handoff.part_max = part_max;
  handoff.cap = part_max_cap;
  attention_handing(kv, step, q, ldq, args, out, scratch, stream, handoff, prologue);
  return handoff.written;
}

}  // namespace memra::kernels
