#include "backend/cuda/l2_prefetch.h"

#include <algorithm>
#include <array>

#include "backend/cuda/cuda_runtime.h"
#include "core/env.h"

namespace memra::cuda {

std::unique_ptr<L2Prefetcher> L2Prefetcher::from_env() {
  const int form = env_choice("MEMRA_L2_PREFETCH", {"off", "bulk", "lines"}, 0);
  if (form == 0) return nullptr;
  const int64_t mb = env_int("MEMRA_L2_PREFETCH_MB", 1, 256, 32);
  const int64_t tokens = env_int("MEMRA_L2_PREFETCH_TOKENS", 1, 4096, 8);
  return std::make_unique<L2Prefetcher>(
      form == 1 ? kernels::L2PrefetchForm::bulk : kernels::L2PrefetchForm::lines, mb << 20, tokens);
}

L2Prefetcher::L2Prefetcher(kernels::L2PrefetchForm form, int64_t budget_bytes, int64_t max_tokens)
    : form_(form), budget_bytes_(budget_bytes), max_tokens_(max_tokens) {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
}

L2Prefetcher::~L2Prefetcher() {
  if (done_) (void)cudaEventDestroy(done_);
  if (fork_) (void)cudaEventDestroy(fork_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void L2Prefetcher::hint(std::span<const kernels::L2Range> ranges, cudaStream_t main,
                        bool capturing) {
  std::array<kernels::L2Range, kernels::kMaxL2Ranges> cut{};
  int n = 0;
  int64_t left = budget_bytes_;
  for (const kernels::L2Range& r : ranges) {
    if (n == kernels::kMaxL2Ranges || left <= 0) break;
    if (r.data == nullptr || r.bytes <= 0) continue;
    cut[n] = {r.data, std::min(r.bytes, left)};
    left -= cut[n++].bytes;
  }
  if (n == 0) return;
  // The prefetcher's stream orders its kernels, so a recording's last one follows every earlier
  // one: the graph merges its branch once, at the end (a merge into the step's stream before a
  // product would give that product's launch a second dependency).
  check(cudaEventRecord(fork_, main), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, fork_, 0), "cudaStreamWaitEvent");
  kernels::l2_prefetch(cut.data(), n, form_, stream_);
  check(cudaGetLastError(), "l2_prefetch");
  check(cudaEventRecord(done_, stream_), "cudaEventRecord");
  pending_recorded_ = pending_recorded_ || capturing;
}

void L2Prefetcher::join_recorded(cudaStream_t main) {
  if (!pending_recorded_) return;
  check(cudaStreamWaitEvent(main, done_, 0), "cudaStreamWaitEvent");
  pending_recorded_ = false;
}

}  // namespace memra::cuda
