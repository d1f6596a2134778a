// A one-split decode block's K and V rows by tensor copies (private to attention.cu; the decode
// kernel's kTensor form, MEMRA_DECODE_TENSOR): a cache block's keys of the block's kv head land
// by one copy per half row (two a cache block for K, two for V), through tensor maps of the
// caches (AttnParams::k_map, v_map: 64 dims x the kv heads' half rows x the cache's slots, boxes
// of 64 dims x 1 x block_size slots, a 128-byte swizzle), instead of two bulk copies a key. The
// rows' bytes are the same; only where each 16-byte chunk sits changes (key_chunk_offset), so the
// arithmetic after them is the same bits.
//
// Why. The sixty-second round's stamps at 512 keys (H100): with the products transposed, the
// block's longest phase is issuing its copies, ~4,400 cycles for 512 `cp.async.bulk` (~8.5 cycles
// each). Here a split of 256 keys over blocks of 16 slots is 64 copies.
//
// The layout: key o of the split (of cache block b = o / block_size, row r = o % block_size) has
// its half h (dims 64 h .. 64 h + 63) in region 2 b + h, block_size rows of 128 bytes, and its
// 16-byte chunk c of that half at chunk c ^ (r % 8) of the row (the copy engine's 128-byte
// swizzle, whose pattern follows address bits 7-9: the rows start at a 1,024-byte aligned base).
// Eight consecutive keys' same chunk then sit in eight different bank groups, which the padded
// rows of the other forms buy with 16 bytes a row. Blocks of 8 to 256 slots (a region of at least
// 1,024 bytes); head_dim 128 with a 16-bit cache (a 256-byte row).
#pragma once

#include "kernels/attention/attention_split.cuh"
#include "kernels/bulk_copy.cuh"

namespace memra::kernels::detail {

// Tensor copies are sm_90 instructions: the copy functions trap outside MEMRA_SM90_CODE's passes
// (the host takes the tensor form only where the kernel has sm_90 code).

// The byte offset of key o's 16-byte chunk c (of its 256-byte row) in a split's rows: rows of
// kRowBytes (kSwizzled false: the bulk and cp.async forms) or the tensor copies' layout above.
template <bool kSwizzled, int kRowBytes>
__device__ __forceinline__ int key_chunk_offset(int o, int c, int bs_shift) {
  if constexpr (!kSwizzled) {
    return o * kRowBytes + 16 * c;
  } else {
    const int r = o & ((1 << bs_shift) - 1);
    return (((o >> bs_shift) * 2 + (c >> 3)) << (bs_shift + 7)) + (r << 7) +
           (((c & 7) ^ (r & 7)) << 4);
  }
}

// Cache blocks [first, last] of split s that hold keys of the run (relative to the split's first).
struct SplitBlocks {
  int first, last;
};
__device__ __forceinline__ SplitBlocks split_blocks(const Run& run, int s, int bs_shift) {
  const int lo = max(s * kSplit, run.lo) - s * kSplit;
  const int hi = min(s * kSplit + kSplit, run.hi) - s * kSplit;  // > lo: the block has keys
  return {lo >> bs_shift, (hi - 1) >> bs_shift};
}

// Thread 0: split s's two barriers (K's rows, V's rows), each expecting its live blocks' bytes
// (zeros past the cache's slots count too). The caller syncs the block before any copy names them.
__device__ __forceinline__ void tensor_split_start(const Run& run, int s, int bs_shift,
                                                   uint64_t* bars) {
#ifdef MEMRA_SM90_CODE
  const SplitBlocks b = split_blocks(run, s, bs_shift);
  const int bytes = (b.last - b.first + 1) * 2 * (128 << bs_shift);
  mbar_init_stages(bars, 2);
  mbar_arrive_expect_tx(bars, bytes);
  mbar_arrive_expect_tx(bars + 1, bytes);
#else
  (void)run, (void)s, (void)bs_shift, (void)bars;
  __trap();
#endif
}

// Which of a split's up to 128 copies this thread issues: copy c is K (c < 64) or V, of cache
// block first + (c % 64) / 2 and half c % 2; -1 none. Packed (MEMRA_DECODE_TENSOR_SPREAD=0): thread
// c, so that a split of 16 cache blocks (256 keys over blocks of 16 slots: 32 copies each for K and
// V) issues them from two warps, 32 a warp, and a warp issues a tensor copy a lane at a time.
// Spread (p.spread_copies, the default since the sixty-eighth round): copy c from lane c / 8 of
// warp c % 8, so the same split issues them from all eight warps, 4 K and 4 V a warp (the copies'
// issue at 512 keys 2,468 -> 1,492 cycles on an H100). Only the issuing thread changes: the same
// rows land in the same places.
__host__ __device__ constexpr int tensor_copy_of(int t, bool spread) {
  if (spread) return t % 32 < 16 ? (t % 32) * 8 + t / 32 : -1;
  return t < 128 ? t : -1;
}
__device__ __forceinline__ int tensor_copy_index(const AttnParams& p) {
  return tensor_copy_of(static_cast<int>(threadIdx.x), p.spread_copies);
}

// Each mapping issues each of the 128 copies from exactly one thread of the block: a copy issued
// by none would leave its barrier's bytes short (the block waits forever), one issued twice would
// land more bytes than the barrier expects.
constexpr bool copies_issued_once(bool spread) {
  int issued[128] = {};
  for (int t = 0; t < kAttnThreads; ++t) {
    const int c = tensor_copy_of(t, spread);
    if (c >= 128 || (c >= 0 && issued[c]++ > 0)) return false;
  }
  for (const int n : issued)
    if (n != 1) return false;
  return true;
}
static_assert(copies_issued_once(false) && copies_issued_once(true),
              "the tensor form's copies: each from one thread");

// The cache block this thread's copy of split s reads (tensor_copy_index's), from the sequence's
// block table; -1 where the thread has no copy (a table's entries are blocks, never negative).
__device__ __forceinline__ int32_t tensor_split_entry(const AttnParams& p, const Run& run, int s) {
  const SplitBlocks blocks = split_blocks(run, s, p.bs_shift);
  const int c = tensor_copy_index(p);
  const int b = blocks.first + (c % 64) / 2;
  if (c < 0 || b > blocks.last) return -1;
  return __ldg(run.table + ((s * kSplit) >> p.bs_shift) + b);
}

// Where the tensor form issues V's copies (AttnParams::v_after, MEMRA_DECODE_V_AFTER): with K's,
// once q is staged, or once K's rows have landed (the scores need K first: the sixty-eighth
// round's stamps at 512 keys put K's landing, 764 cycles after q's staging, on the block's chain
// while V's copies shared the SM's intake with K's; the values need V only ~3,000 cycles later).
// Only when a copy is issued changes: the same rows land in the same places on the same barrier.
enum TensorV : uint8_t { kVWithK = 0, kVAfterQ = 1, kVAfterK = 2 };

// Split s's live blocks' copies, one a thread (tensor_split_entry's: blk, this thread's cache
// block, -1 none), those of K (keys), of V (values) or both. kb, vb: 1,024-byte aligned.
__device__ __forceinline__ void tensor_split_rows(const AttnParams& p, const Run& run, int s,
                                                  unsigned char* kb, unsigned char* vb,
                                                  uint64_t* bars, int32_t blk, bool keys,
                                                  bool values) {
  static_assert(kSplit / 8 * 2 <= 64, "two copies a cache block, K and V");
#ifdef MEMRA_SM90_CODE
  const int bs_shift = p.bs_shift;
  const SplitBlocks blocks = split_blocks(run, s, bs_shift);
  const int c = tensor_copy_index(p);  // >= 0 where blk is
  const int i = c % 64, b = blocks.first + i / 2, half = i % 2;
  const bool of_v = c >= 64;
  if (blk < 0 || !(of_v ? values : keys)) return;
  unsigned char* dst = (of_v ? vb : kb) + ((b * 2 + half) << (bs_shift + 7));
  tensor_copy_3d(dst, of_v ? &p.v_map : &p.k_map, 0, run.kv_head * 2 + half, blk << bs_shift,
                 bars + (of_v ? 1 : 0));
#else
  (void)p, (void)run, (void)s, (void)kb, (void)vb, (void)bars, (void)blk, (void)keys, (void)values;
  __trap();
#endif
}

// After V's rows have landed (this thread's wait): key threadIdx.x's V row zeroed where the key is
// outside the run (the V steps multiply whole 16-key steps: p = 0 there, and 0 * a stale NaN is
// NaN; a live block's other slots land whatever the cache holds). The caller syncs the block.
__device__ __forceinline__ void tensor_zero_v(const Run& run, int s, int bs_shift,
                                              unsigned char* vb) {
  static_assert(kAttnThreads == kSplit, "a thread a key");
  const int o = threadIdx.x, key = s * kSplit + o;
  if (key >= run.lo && key < run.hi) return;
  const int r = o & ((1 << bs_shift) - 1);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    auto* row =
        reinterpret_cast<uint4*>(vb + (((o >> bs_shift) * 2 + half) << (bs_shift + 7)) + (r << 7));
#pragma unroll
    for (int c = 0; c < 8; ++c) row[c] = uint4{0, 0, 0, 0};
  }
}

}  // namespace memra::kernels::detail
