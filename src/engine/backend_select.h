// Picks and creates the backend a model runs on from a device name: "cpu", "cuda", "cuda:N" or
// "auto" (the first GPU when this build has CUDA and a GPU is present, else the CPU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace memra {

struct BackendChoice {
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  int n_threads = 0;            // CPU backend threads; 0 = all cores
  bool reference = false;       // CPU reference ops (the oracle)
  bool deterministic = true;    // false: CUDA may take non-batch-invariant paths (EngineOptions)
};

// Throws Error(invalid_argument) for an unknown device name and Error(unsupported) for "cuda"
// in a build without CUDA or on a machine without a GPU, naming which.
std::shared_ptr<Ops> backend_select(const BackendChoice& choice);

// Free and total bytes of the backend's device memory; false for host memory backends.
bool backend_memory(const Ops& ops, uint64_t& free_bytes, uint64_t& total_bytes);

// The GPU ordinal `device` selects by backend_select's rules, or -1 when it selects the CPU.
// Throws as backend_select does for a name it refuses.
int backend_gpu_ordinal(const std::string& device);

// One GPU described and its ceilings measured in place (backend/cuda/ceilings.h), for benchmarks
// that report figures as a percentage of them. Rates hold one value per timed run.
struct GpuCeilings {
  std::string name;
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0
  int runtime_version = 0;  // the CUDA runtime this binary links
  std::vector<double> copy_tb_s;
  std::vector<double> bf16_tflops;
};

// Throws Error(unsupported) in a build without CUDA.
GpuCeilings backend_gpu_ceilings(int ordinal, int runs);

}  // namespace memra
