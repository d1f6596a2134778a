#include "backend/cuda/side_stream.h"

#include "backend/cuda/cuda_runtime.h"
#include "core/env.h"

namespace memra::cuda {

SideStreamOwner::SideStreamOwner() {
  check(cudaStreamCreateWithFlags(&side_.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&side_.fork, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&side_.join, cudaEventDisableTiming), "cudaEventCreate");
}

SideStreamOwner::~SideStreamOwner() {
  if (side_.join) (void)cudaEventDestroy(side_.join);
  if (side_.fork) (void)cudaEventDestroy(side_.fork);
  if (side_.stream) (void)cudaStreamDestroy(side_.stream);
}

bool prefill_side_stream_enabled() {
  static const bool enabled = env_switch("MEMRA_PREFILL_SIDE_STREAM", true);
  return enabled;
}

}  // namespace memra::cuda
