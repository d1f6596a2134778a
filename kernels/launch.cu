// Whether launches are programmatic, and the carveout every kernel asks for (launch.cuh).
#include <mutex>
#include <unordered_set>

#include "core/env.h"
#include "kernels/launch.cuh"

namespace memra::kernels::detail {

bool programmatic_launch() {
  // The attribute query is a lookup in the runtime's device table, cheap beside a launch.
  static const bool env = env_switch("MEMRA_PDL", true);
  int device = 0, major = 0;
  return env && cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

void prefer_uniform_carveout(const void* kernel) {
  static const bool enabled = env_switch("MEMRA_UNIFORM_CARVEOUT", false);
  if (!enabled) return;
  static std::mutex mutex;
  static std::unordered_set<const void*> done;
  const std::lock_guard<std::mutex> lock(mutex);
  // A preference, not a requirement: a failure leaves the driver's own choice (same bits).
  if (done.insert(kernel).second)
    (void)cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
}

}  // namespace memra::kernels::detail
