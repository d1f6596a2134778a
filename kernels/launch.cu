// Whether launches are programmatic, and which the MEMRA_DIAG_DROP instrument skips (launch.cuh).
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
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

namespace {

// MEMRA_DIAG_DROP's substrings (empty entries left out), read once.
std::vector<std::string> drop_list() {
  std::vector<std::string> out;
  const char* env = std::getenv("MEMRA_DIAG_DROP");
  if (env == nullptr) return out;
  std::string item;
  for (const char* c = env;; ++c) {
    if (*c == ',' || *c == '+' || *c == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  if (!out.empty())
    std::fprintf(stderr,
                 "memra: MEMRA_DIAG_DROP=%s: launches of those kernels are skipped, so every "
                 "output is wrong (a measuring instrument, not a mode to run)\n",
                 env);
  return out;
}

}  // namespace

bool dropped(const void* kernel) {
  static const std::vector<std::string> names = drop_list();
  if (names.empty()) return false;
  // Launches come from the engine's thread and, in tests and tools, others: one lock.
  static std::mutex mutex;
  static std::unordered_map<const void*, bool> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = seen.find(kernel); it != seen.end()) return it->second;
  const char* name = nullptr;
  bool drop = false;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr) {
    for (const std::string& n : names)
      drop = drop || std::string(name).find(n) != std::string::npos;
    if (drop) std::fprintf(stderr, "memra: MEMRA_DIAG_DROP skips %s\n", name);
  }
  seen.emplace(kernel, drop);
  return drop;
}

}  // namespace memra::kernels::detail
