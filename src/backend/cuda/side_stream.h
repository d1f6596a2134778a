// The CUDA backend's second stream for a step's products that run beside each other
// (kernels::SideStream: a Q4_K_M layer's Q6_K v beside its Q4_K q and k), with the two events
// that fork it from the step's stream and join it back. Prefill steps (eager) use it always;
// decode steps, which are recorded as graphs (the fork and the join become a branch and its
// merge), unless MEMRA_DECODE_SIDE_STREAM=0 (kernels/matmul/matmul.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"

namespace memra::cuda {

class SideStreamOwner {
 public:
  SideStreamOwner();
  ~SideStreamOwner();
  SideStreamOwner(const SideStreamOwner&) = delete;
  SideStreamOwner& operator=(const SideStreamOwner&) = delete;
  const kernels::SideStream* get() const { return &side_; }

 private:
  kernels::SideStream side_;
};

// On unless MEMRA_PREFILL_SIDE_STREAM=0 (the A/B: every product on the step's stream; the same
// bits).
bool prefill_side_stream_enabled();

}  // namespace memra::cuda
