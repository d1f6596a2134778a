// L2 prefetch (kernels.h's l2_prefetch): asks the memory system to bring byte ranges into the
// device's L2 cache, then exits. Nothing waits for the data and nothing reads it here: a later
// kernel that loads those bytes finds them in L2 (or in flight there) instead of in DRAM. No
// output of any kernel depends on it.
//
// Why (docs/PERFORMANCE.md, fifty-ninth round): a one-token decode step leaves DRAM nearly idle
// while its small kernels run (the norms, the attention prologue, attention over a short context,
// the activation: ~30 us of an 8B layer's ~85 on an H100), and its products then stream their
// weights as a chain of DRAM round trips. A prefetch issued on a second stream as such a window
// opens (the backend's L2Prefetcher) moves the next product's first bytes off its critical path.
//
// Two forms, an A/B: `bulk` (sm_90: cp.async.bulk.prefetch.L2, one instruction a 16 KB slice, a
// warp's lanes a slice each, the copy engine of the block's SM walking it) and `lines` (any
// architecture: prefetch.global.L2, one instruction a 128-byte line, every thread of the grid).
#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kSlice = 16 * 1024;  // bytes of one bulk prefetch
constexpr int64_t kLine = 128;

struct Ranges {
  L2Range r[kMaxL2Ranges];
  int64_t units_before[kMaxL2Ranges + 1];  // units (slices or lines) of the ranges before i
  int n;
};

// Range i's unit u (slice or line): its address and bytes (the last slice may be shorter; bulk
// sizes are multiples of 16, the ranges' starts 16-byte aligned).
__device__ __forceinline__ void unit_of(const Ranges& rs, int64_t unit, int64_t unit_bytes,
                                        const char*& at, int64_t& bytes) {
  int i = 0;
  while (i + 1 < rs.n && unit >= rs.units_before[i + 1]) ++i;
  const int64_t off = (unit - rs.units_before[i]) * unit_bytes;
  at = static_cast<const char*>(rs.r[i].data) + off;
  bytes = min(unit_bytes, rs.r[i].bytes - off);
}

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const Ranges rs, bool bulk) {
  detail::wait_for_inputs();
  const int64_t total = rs.units_before[rs.n];
  const int64_t unit_bytes = bulk ? kSlice : kLine;
  for (int64_t u = int64_t{blockIdx.x} * kThreads + threadIdx.x; u < total;
       u += int64_t{gridDim.x} * kThreads) {
    const char* at;
    int64_t bytes;
    unit_of(rs, u, unit_bytes, at, bytes);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (bulk) {
      const auto n = static_cast<uint32_t>(bytes & ~int64_t{15});
      if (n > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(at), "r"(n));
      continue;
    }
#endif
    for (int64_t b = 0; b < bytes; b += kLine)  // one line, or (a bulk slice before sm_90) each
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at + b));
  }
}

}  // namespace

void l2_prefetch(const L2Range* ranges, int n, L2PrefetchForm form, cudaStream_t stream) {
  Ranges rs{};
  int64_t units = 0;
  const int64_t unit_bytes = form == L2PrefetchForm::bulk ? kSlice : kLine;
  rs.n = 0;
  for (int i = 0; i < n && rs.n < kMaxL2Ranges; ++i) {
    if (ranges[i].data == nullptr || ranges[i].bytes <= 0) continue;
    rs.r[rs.n] = ranges[i];
    rs.units_before[rs.n] = units;
    units += (ranges[i].bytes + unit_bytes - 1) / unit_bytes;
    ++rs.n;
  }
  rs.units_before[rs.n] = units;
  if (units == 0) return;
  // The issue spread over up to one block an SM (a bulk slice is walked by its SM's copy engine):
  // ~16 slices a block, or ~8 lines a thread; the grid stays small beside the step's kernels.
  const int64_t per_block = form == L2PrefetchForm::bulk ? 16 : 8 * kThreads;
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>((units + per_block - 1) / per_block, 1, 132));
  detail::launch(l2_prefetch_kernel, blocks, kThreads, 0, stream, rs, form == L2PrefetchForm::bulk);
}

}  // namespace memra::kernels
