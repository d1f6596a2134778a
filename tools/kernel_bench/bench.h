// memra-kernel-bench internals shared between its timing (main.cpp) and self-check (check.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "core/dtype.h"

namespace memra::bench {

// Runs the small-shape correctness and batch-invariance check for each dtype; prints a line per
// case and returns true when all pass.
bool run_check(const std::vector<DType>& dtypes, cudaStream_t stream);

}  // namespace memra::bench
