// The tensor map through which the prefill kernels read x's rows form (matmul_launch.cuh:
// x_rows_offset, x_rows_map). Host code only (the encoder: kernels/tensor_map.h).
#include <cstring>

#include "core/error.h"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/tensor_map.h"

namespace memra::kernels::matmul_detail {

using detail::tensor_map_encoder;

CUtensorMap x_rows_map(const MatmulArgs& x, int box_tokens) {
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  if (!x.xp_rows) return map;
  // The encoder's own limits, named here rather than left to its error code: a 16-byte aligned
  // base, a row stride that is a multiple of 16 bytes, boxes of at most 256 per dimension, and
  // (the 128-byte swizzle) an inner box of 128 bytes.
  const auto base = reinterpret_cast<uintptr_t>(x.xp);
  if (base % 16 != 0 || x.n_in % kXRowsK != 0 || x.n_tokens <= 0 || box_tokens <= 0 ||
      box_tokens > 256)
    fail(ErrorCode::internal, "matmul: x rows of {} x {} for boxes of {} tokens at {:#x}",
         x.n_tokens, x.n_in, box_tokens, base);
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(x.n_in), static_cast<cuuint64_t>(x.n_tokens)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(x.n_in) * 2};  // bytes, of dims[1]
  const cuuint32_t box[2] = {kXRowsK, static_cast<cuuint32_t>(box_tokens)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<uint16_t*>(x.xp), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail(ErrorCode::internal, "matmul: cuTensorMapEncodeTiled refused x rows of {} x {} ({})",
         x.n_tokens, x.n_in, static_cast<int>(r));
  return map;
}

}  // namespace memra::kernels::matmul_detail
