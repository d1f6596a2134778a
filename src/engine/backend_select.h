// Picks and creates the backend a model runs on from a device name: "cpu", "cuda", "cuda:N" or
// "auto" (the first GPU when this build has CUDA and a GPU is present, else the CPU).
#pragma once

#include <memory>
#include <string>

#include "backend/ops.h"

namespace memra {

struct BackendChoice {
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  int n_threads = 0;            // CPU backend threads; 0 = all cores
  bool reference = false;       // CPU reference ops (the oracle)
};

// Throws Error(invalid_argument) for an unknown device name and Error(unsupported) for "cuda"
// in a build without CUDA or on a machine without a GPU, naming which.
std::shared_ptr<Ops> backend_select(const BackendChoice& choice);

// Free and total bytes of the backend's device memory; false for host memory backends.
bool backend_memory(const Ops& ops, uint64_t& free_bytes, uint64_t& total_bytes);

}  // namespace memra
