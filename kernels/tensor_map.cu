// The driver's tensor map encoder, looked up through the runtime (tensor_map.h).
#include "kernels/tensor_map.h"

#include <cuda_runtime.h>

#include "core/error.h"

namespace memra::kernels::detail {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t st = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                            cudaEnableDefault, &found);
    if (st != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
      (void)cudaGetLastError();
      fail(ErrorCode::internal, "the driver has no cuTensorMapEncodeTiled ({})",
           cudaGetErrorString(st));
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

}  // namespace memra::kernels::detail
