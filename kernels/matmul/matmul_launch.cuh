// Private to kernels/matmul: the arguments the host dispatch (matmul.cu) hands to the decode and
// prefill kernels, and their launchers, instantiated once per weight dtype in their own .cu files
// so the two compile in parallel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace memra::kernels::matmul_detail {

struct MatmulArgs {
  const uint8_t* w = nullptr;  // n_out rows of row_bytes, 16-byte aligned base
  int64_t row_bytes = 0;
  int n_in = 0;
  int n_out = 0;
  // x as bf16 [n_tokens][n_in], each 16-element group stored in B-fragment order (matmul.cu):
  // positions 4t..4t+3 hold elements 2t, 2t+1, 2t+8, 2t+9.
  const uint16_t* xb = nullptr;
  int n_tokens = 0;
  float* y = nullptr;
  int64_t ldy = 0;
};

// The largest dynamic shared memory a block may opt into on sm_80 (A100); sm_90 allows 227 KB.
constexpr int kMaxSmem = 163 * 1024;

// Tokens the decode kernel covers (one mma n8 column each); more go to the prefill kernel.
constexpr int kDecodeTokens = 8;

template <DType D>
void launch_decode(const MatmulArgs& args, cudaStream_t stream);
template <DType D>
void launch_prefill(const MatmulArgs& args, cudaStream_t stream);

// clang-format off
#define MEMRA_MATMUL_FOR_EACH_MMA_TYPE(X) \
  X(DType::f16) X(DType::bf16) X(DType::q8_0) X(DType::q4_0) X(DType::q4_1) X(DType::q5_0) \
  X(DType::q5_1) X(DType::q4_k) X(DType::q5_k) X(DType::q6_k)
// clang-format on

}  // namespace memra::kernels::matmul_detail
