// RAII owners for CUDA runtime objects and a check that turns a cudaError_t into memra::Error
// naming the call. Device memory is only allocated at load/setup time, never on the decode path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace memra::cuda {

// Throws Error(internal/resource_exhausted) naming `what` when status is not cudaSuccess.
void check(cudaError_t status, const char* what);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};

int device_count();  // 0 when no driver or no device, never throws
DeviceInfo device_info(int ordinal);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event for timing work on a stream (created with timing enabled).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(const Stream& stream);
  // Milliseconds between two recorded events; synchronizes on `end`.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

int driver_version();   // e.g. 13000 for CUDA 13.0; 0 when no driver
int runtime_version();  // the CUDA runtime this binary links

}  // namespace memra::cuda
