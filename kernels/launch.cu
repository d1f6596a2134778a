// Whether launches are programmatic (launch.cuh).
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

}  // namespace memra::kernels::detail
