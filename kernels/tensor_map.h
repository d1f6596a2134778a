// Private to kernels/: the driver's tensor map encoder (cuTensorMapEncodeTiled), looked up once
// through the runtime, so the library does not link libcuda itself. Host code only; the maps it
// encodes are read by the Hopper tensor copies (bulk_copy.cuh).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace memra::kernels::detail {

// The encoder; Error(internal) where the driver has none.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

}  // namespace memra::kernels::detail
