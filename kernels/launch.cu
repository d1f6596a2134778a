// Whether launches are programmatic, and where a grid's last wave starts (launch.cuh).
#include <algorithm>
#include <climits>
#include <mutex>
#include <vector>

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

int last_wave_start(const void* kernel, int64_t blocks, int threads, size_t smem) {
  // 0: off; 1: grids of more than one wave; all: one-wave grids too (every block triggers at its
  // start: the early trigger launch.cuh's Trigger comment measured as a loss, measured again).
  static const int mode = env_choice("MEMRA_LAST_WAVE_TRIGGER", {"0", "1", "all"}, 1);
  if (mode == 0 || !programmatic_launch()) return INT_MAX;
  // The device's resident blocks for each (device, kernel, shape), asked once: an occupancy query
  // costs about a launch, and eager decode steps launch these kernels hundreds of times a step.
  struct Resident {
    int device;
    const void* kernel;
    int threads;
    size_t smem;
    int64_t blocks;
  };
  static std::mutex mutex;
  static std::vector<Resident> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return INT_MAX;
  int64_t resident = -1;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const Resident& r : known)
      if (r.device == device && r.kernel == kernel && r.threads == threads && r.smem == smem)
        resident = r.blocks;
    if (resident < 0) {
      int per_sm = 0, sms = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) !=
              cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return INT_MAX;
      }
      resident = int64_t{per_sm} * sms;
      known.push_back({device, kernel, threads, smem, resident});
    }
  }
  if (blocks <= resident && mode != 2) return INT_MAX;
  return static_cast<int>(std::clamp<int64_t>(blocks - resident, 0, INT_MAX));
}

}  // namespace memra::kernels::detail
