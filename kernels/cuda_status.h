// A CUDA runtime call's status as memra's error: the host side of the kernels' launchers, which
// query the device (limits, occupancy) and copy their plans; named after the operation so the
// message says where (kernels.h's functions report launch errors through the caller's next
// cudaGetLastError instead).
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace memra::kernels::detail {

inline void check_cuda(cudaError_t status, const char* op, const char* what) {
  if (status != cudaSuccess)
    fail(ErrorCode::internal, "{}: {}: {}", op, what, cudaGetErrorString(status));
}

}  // namespace memra::kernels::detail
