// backend_select: the one place that knows which backends this build has (MEMRA_HAVE_CUDA is
// defined when memra_engine links the CUDA backend).
#include "engine/backend_select.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/ceilings.h"
#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/ops_cuda.h"
#endif

namespace memra {

namespace {

// -1 for "cuda", N for "cuda:N"; throws for anything else after "cuda".
int cuda_ordinal(const std::string& device) {
  if (device == "cuda") return -1;
  int n = -1;
  const char* first = device.data() + 5;
  const char* last = device.data() + device.size();
  const auto [end, ec] = std::from_chars(first, last, n);
  if (device.size() <= 5 || device[4] != ':' || ec != std::errc{} || end != last || n < 0)
    fail(ErrorCode::invalid_argument, "device '{}' is not one of auto, cpu, cuda, cuda:N", device);
  return n;
}

}  // namespace

std::shared_ptr<Ops> backend_select(const BackendChoice& choice) {
  const std::string& d = choice.device;
  if (d == "cpu") return ops_cpu_create({choice.n_threads, choice.reference});
  if (d != "auto" && !d.starts_with("cuda"))
    fail(ErrorCode::invalid_argument, "device '{}' is not one of auto, cpu, cuda, cuda:N", d);
#ifdef MEMRA_HAVE_CUDA
  if (d == "auto") {
    if (choice.reference || cuda::ops_cuda_device_count() == 0)
      return ops_cpu_create({choice.n_threads, choice.reference});
    return cuda::ops_cuda_create({0, choice.deterministic});
  }
  const int ordinal = cuda_ordinal(d);
  const int n = cuda::ops_cuda_device_count();
  if (n == 0) fail(ErrorCode::unsupported, "device '{}': no CUDA GPU is visible", d);
  if (ordinal >= n) fail(ErrorCode::invalid_argument, "device '{}': only {} GPU(s)", d, n);
  return cuda::ops_cuda_create({ordinal < 0 ? 0 : ordinal, choice.deterministic});
#else
  if (d == "auto") return ops_cpu_create({choice.n_threads, choice.reference});
  cuda_ordinal(d);  // a malformed name is still reported as such
  fail(ErrorCode::unsupported, "device '{}': this memra build has no CUDA backend", d);
#endif
}

bool backend_memory(const Ops& ops, uint64_t& free_bytes, uint64_t& total_bytes) {
#ifdef MEMRA_HAVE_CUDA
  return cuda::ops_cuda_memory(ops, free_bytes, total_bytes);
#else
  (void)ops;
  free_bytes = total_bytes = 0;
  return false;
#endif
}

int backend_gpu_ordinal(const std::string& d) {
  if (d == "cpu") return -1;
  if (d != "auto" && !d.starts_with("cuda"))
    fail(ErrorCode::invalid_argument, "device '{}' is not one of auto, cpu, cuda, cuda:N", d);
#ifdef MEMRA_HAVE_CUDA
  const int n = cuda::ops_cuda_device_count();
  if (d == "auto") return n > 0 ? 0 : -1;
  const int ordinal = cuda_ordinal(d);
  if (n == 0) fail(ErrorCode::unsupported, "device '{}': no CUDA GPU is visible", d);
  if (ordinal >= n) fail(ErrorCode::invalid_argument, "device '{}': only {} GPU(s)", d, n);
  return std::max(ordinal, 0);
#else
  if (d == "auto") return -1;
  cuda_ordinal(d);  // a malformed name is still reported as such
  fail(ErrorCode::unsupported, "device '{}': this memra build has no CUDA backend", d);
#endif
}

GpuCeilings backend_gpu_ceilings(int ordinal, int runs) {
#ifdef MEMRA_HAVE_CUDA
  GpuCeilings out;
  out.name = cuda::device_info(ordinal).name;
  out.driver_version = cuda::driver_version();
  out.runtime_version = cuda::runtime_version();
  out.copy_tb_s = cuda::measure_copy_tb_s(ordinal, runs);
  out.bf16_tflops = cuda::measure_bf16_tflops(ordinal, runs);
  return out;
#else
  (void)runs;
  fail(ErrorCode::unsupported, "GPU {}: this memra build has no CUDA backend", ordinal);
#endif
}

}  // namespace memra
