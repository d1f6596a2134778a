// Whether launches are programmatic (launch.cuh): decided once per device.
#include <atomic>
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
  // Two bits per device (known, programmatic) for the first 32 devices; later ones ask each time.
  static std::atomic<uint64_t> known{0};
  static const bool env = pdl_allowed_by_env();
  int device = 0;
  if (!env || cudaGetDevice(&device) != cudaSuccess) return false;
  const uint64_t known_bit = uint64_t{1} << (2 * (device & 31));
  const uint64_t on_bit = known_bit << 1;
  const uint64_t state = known.load(std::memory_order_acquire);
  if (device < 32 && (state & known_bit)) return (state & on_bit) != 0;
  int major = 0;
  const bool on =
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      major >= 9;
  if (device < 32) known.fetch_or(known_bit | (on ? on_bit : 0), std::memory_order_release);
  return on;
}

}  // namespace memra::kernels::detail
