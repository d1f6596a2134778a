// A one-split decode block's K and V rows by bulk copies (private to attention.cu; the decode
// kernel's kBulk form, MEMRA_DECODE_BULK): the copy engine brings each key's 2D-byte row into the
// same shared rows cp.async would, completing on one mbarrier for K and one for V. The rows are
// the same bytes, so the arithmetic after them is the same bits.
//
// Why. MEMRA_DECODE_STAMPS at one sequence of 512 keys (sixty-first round, H100): a block spends
// ~8,200 cycles issuing its split's 32 16-byte cp.async a thread (K then V, 128 KB) and staging
// q, the same with 16 blocks as with 64, so the limit is the block's own issue (load-queue
// throttling), not L2 or DRAM. Here a thread issues two copies, one of a key's K row and one of its
// V row, and looks its key's cache slot up once.
#pragma once

#include "kernels/attention/attention_split.cuh"
#include "kernels/bulk_copy.cuh"

namespace memra::kernels::detail {

// Bulk copies and mbarrier waits are sm_90 instructions: these functions trap outside
// MEMRA_SM90_CODE's passes (the host takes the bulk form only where the kernel has sm_90 code:
// attention.cu).

// Thread 0: split s's two barriers (K's rows, V's rows), each expecting its live keys' bytes. The
// caller syncs the block before any copy names them.
template <int D, typename CT>
__device__ __forceinline__ void bulk_split_start(const Run& run, int s, uint64_t* bars) {
#ifdef MEMRA_SM90_CODE
  const int live = min(s * kSplit + kSplit, run.hi) - max(s * kSplit, run.lo);
  mbar_init_stages(bars, 2);
  mbar_arrive_expect_tx(bars, live * D * static_cast<int>(sizeof(CT)));
  mbar_arrive_expect_tx(bars + 1, live * D * static_cast<int>(sizeof(CT)));
#else
  __trap();
#endif
}

// Until the rows of barrier `bar` have landed (its first phase).
__device__ __forceinline__ void bulk_wait(uint64_t* bar) {
#ifdef MEMRA_SM90_CODE
  mbar_wait(bar, 0);
#else
  __trap();
#endif
}

// Split s's rows: key offset o's K row at kb + o kRowBytes and its V row at vb + o kRowBytes, or,
// for a key outside the run, zeros in its V row (the V steps multiply whole 16-key steps: p = 0
// there, and 0 * a stale NaN is NaN). Every thread takes keys threadIdx.x + k kAttnThreads.
template <int D, typename CT, int kRowBytes>
__device__ __forceinline__ void bulk_split_rows(const AttnParams& p, const Run& run, int s,
                                                unsigned char* kb, unsigned char* vb,
                                                uint64_t* bars) {
  constexpr int kRowData = D * static_cast<int>(sizeof(CT));
  static_assert(kRowData % 16 == 0 && kRowBytes % 16 == 0, "bulk copies of 16-byte multiples");
#ifdef MEMRA_SM90_CODE
  const auto* k = static_cast<const unsigned char*>(p.k);
  const auto* v = static_cast<const unsigned char*>(p.v);
  for (int o = threadIdx.x; o < kSplit; o += kAttnThreads) {
    const int key = s * kSplit + o;
    if (key >= run.lo && key < run.hi) {
      const int64_t slot = int64_t{__ldg(run.table + (key >> p.bs_shift))} * p.block_size +
                           (key & (p.block_size - 1));
      const int64_t off = (slot * p.n_kv_heads + run.kv_head) * kRowData;
      bulk_copy(kb + o * kRowBytes, k + off, kRowData, bars);
      bulk_copy(vb + o * kRowBytes, v + off, kRowData, bars + 1);
    } else {
      auto* row = reinterpret_cast<uint4*>(vb + o * kRowBytes);
#pragma unroll
      for (int i = 0; i < kRowData / 16; ++i) row[i] = uint4{0, 0, 0, 0};
    }
  }
#else
  __trap();
#endif
}

}  // namespace memra::kernels::detail
