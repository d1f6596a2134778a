// Whether launches are programmatic (launch.cuh).
#include <cstdlib>
#include <cstring>

#include "kernels/launch.cuh"

namespace memra::kernels::detail {
namespace {

bool pdl_allowed_by_env() {
  const char* v = std::getenv("MEMRA_PDL");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

bool programmatic_launch() {
  // The attribute query is a lookup in the runtime's device table, cheap beside a launch.
  static const bool env = pdl_allowed_by_env();
  int device = 0, major = 0;
  return env && cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

}  // namespace memra::kernels::detail
