// Private to the CUDA backend (ops_cuda.cpp): pinned staging memory, the fault-injection plan its
// error-path tests drive, how it names and classifies CUDA errors, and its weight-layout switch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_runtime.h"
#include "core/env.h"
#include "core/error.h"

namespace memra::cuda {

// Pinned host memory, for copies that overlap with the host's next work.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (data_) (void)cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void reserve(size_t bytes) {
    if (bytes <= size_) return;
    if (data_) check(cudaFreeHost(data_), "cudaFreeHost");
    data_ = nullptr;
    size_ = 0;
    check(cudaMallocHost(&data_, bytes), "cudaMallocHost");
    size_ = bytes;
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Fault injection for tests of the error paths (never set in production): MEMRA_CUDA_FAULT=
// alloc:N makes the N-th device allocation of the backend fail as out of memory; launch:N makes
// the N-th kernel launch (a graph replay counts as one) fail as a sticky error (the context is
// then treated as unusable); capture:N makes the N-th graph recording fail (that step shape then
// runs eagerly).
struct FaultPlan {
  int64_t alloc_at = 0;
  int64_t launch_at = 0;
  int64_t capture_at = 0;
  static FaultPlan from_env() {
    FaultPlan p;
    const char* v = std::getenv("MEMRA_CUDA_FAULT");
    if (!v) return p;
    const std::string s(v);
    const size_t colon = s.find(':');
    const std::string kind = s.substr(0, colon);
    const int64_t n = colon == std::string::npos ? 1 : std::atoll(s.c_str() + colon + 1);
    if (kind == "alloc")
      p.alloc_at = n;
    else if (kind == "launch")
      p.launch_at = n;
    else if (kind == "capture")
      p.capture_at = n;
    else
      fail(ErrorCode::invalid_argument, "MEMRA_CUDA_FAULT={} is not alloc:N, launch:N or capture:N",
           s);
    return p;
  }
};

// "what: <CUDA's description> (<its name>)".
inline std::string fmt_error(const char* what, cudaError_t status) {
  return std::string(what) + ": " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) +
         ")";
}

// Errors after which the CUDA context cannot be used again (the process must restart).
inline bool sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

// MEMRA_WEIGHT_LAYOUT: tiled (the default) or ggml (every weight in the file's layout: an A/B of
// the tiled matmul kernels, bit-identical outputs); anything else is refused by name.
inline bool tiled_weights_from_env() {
  return env_choice("MEMRA_WEIGHT_LAYOUT", {"tiled", "ggml"}, 0) == 0;
}

}  // namespace memra::cuda
