// CUDA runtime RAII implementation.
#include "backend/cuda/cuda_runtime.h"

#include <utility>

#include "core/error.h"

namespace memra::cuda {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  const ErrorCode code =
      status == cudaErrorMemoryAllocation ? ErrorCode::resource_exhausted : ErrorCode::internal;
  fail(code, "{}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

DeviceInfo device_info(int ordinal) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  if (bytes > 0) check(cudaMalloc(&data_, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) (void)cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}
Stream::~Stream() {
  (void)cudaStreamDestroy(stream_);
}
void Stream::synchronize() const {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Event::Event() {
  check(cudaEventCreate(&event_), "cudaEventCreate");
}
Event::~Event() {
  (void)cudaEventDestroy(event_);
}
void Event::record(const Stream& stream) {
  check(cudaEventRecord(event_, stream.get()), "cudaEventRecord");
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  check(cudaEventSynchronize(end.event_), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start.event_, end.event_), "cudaEventElapsedTime");
  return ms;
}

int driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
}

int runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

}  // namespace memra::cuda
