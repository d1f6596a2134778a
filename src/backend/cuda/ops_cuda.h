// The CUDA backend: one GPU (by ordinal), its stream, device memory for weights, activations, KV
// and per-step metadata, and the ops interface adapted to kernels/ launches. Nothing is global:
// several backends may drive several GPUs in one process.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/ops.h"

namespace memra::cuda {

struct CudaOpsOptions {
  int ordinal = 0;
  // false (`--deterministic off`): steps over 1,024 tokens (FastGemm's bound) may multiply by
  // cuBLASLt on f16 copies of the weights (fast_gemm.h), so a token's outputs depend on its step's
  // size.
  bool batch_invariant = true;
};

int ops_cuda_device_count();  // 0 when no driver or no GPU; never throws
// Throws Error naming the device and the CUDA error when the GPU cannot be used.
std::shared_ptr<Ops> ops_cuda_create(const CudaOpsOptions& options);
// Free and total bytes of the GPU behind `ops`; false when `ops` is not a CUDA backend.
bool ops_cuda_memory(const Ops& ops, uint64_t& free_bytes, uint64_t& total_bytes);

}  // namespace memra::cuda
