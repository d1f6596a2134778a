// memra-kernel-bench internals shared between its timing (main.cpp) and self-check (check.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "core/dtype.h"

namespace memra::bench {

// Runs the small-shape correctness and batch-invariance check for each dtype; prints a line per
// case and returns true when all pass.
bool run_check(const std::vector<DType>& dtypes, cudaStream_t stream);

// Times kernels::attention on the Qwen3-8B shape (attention.cpp); prints a line per case and
// returns the rows for the JSON receipt. copy_tbps: the device copy bandwidth of the same run.
nlohmann::json run_attention(const cuda::Stream& stream, double copy_tbps);

}  // namespace memra::bench
