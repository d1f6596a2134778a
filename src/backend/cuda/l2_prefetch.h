// The CUDA backend's L2 prefetcher (Ops::prefetch): weights a step reads soon, brought into L2 by
// a small kernel (kernels::l2_prefetch) on a stream of its own, forked from the step's stream where
// the hint is given, so that it runs beside the kernels that follow (in a recorded decode step, a
// branch of the graph). Nothing waits for it: the step's stream joins the branch back only before a
// recording ends (a graph must merge its branches), well after the prefetch kernels, which only
// issue requests, have finished. No result depends on it.
//
// MEMRA_L2_PREFETCH: off (the default until measured), bulk (cp.async.bulk.prefetch on sm_90) or
// lines (prefetch.global.L2 a 128-byte line). MEMRA_L2_PREFETCH_MB (1-256, default 32): the most
// bytes one hint asks for (its weights in order, the last cut short). MEMRA_L2_PREFETCH_TOKENS
// (1-4096, default 8): only steps of at most that many tokens take hints (past it the products
// are bound by arithmetic, not by their weights' round trips, and attention streams the cache).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/kernels.h"

namespace memra::cuda {

class L2Prefetcher {
 public:
  // The prefetcher MEMRA_L2_PREFETCH asks for, or null when it is off.
  static std::unique_ptr<L2Prefetcher> from_env();

  L2Prefetcher(kernels::L2PrefetchForm form, int64_t budget_bytes, int64_t max_tokens);
  ~L2Prefetcher();
  L2Prefetcher(const L2Prefetcher&) = delete;
  L2Prefetcher& operator=(const L2Prefetcher&) = delete;

  int64_t max_tokens() const { return max_tokens_; }
  // Prefetches `ranges` in order up to the byte budget, on the prefetcher's stream once the work
  // `main` holds so far has finished. capturing: `main` is being recorded.
  void hint(std::span<const kernels::L2Range> ranges, cudaStream_t main, bool capturing);
  // Before a recording of `main` ends: merges the branches forked during it.
  void join_recorded(cudaStream_t main);
  // After a recording ended (merged or abandoned): no branch of it is pending.
  void recording_ended() { pending_recorded_ = false; }

 private:
  kernels::L2PrefetchForm form_;
  int64_t budget_bytes_, max_tokens_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, done_ = nullptr;
  bool pending_recorded_ = false;  // branches forked during the current recording, not merged
};

}  // namespace memra::cuda
