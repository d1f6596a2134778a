// CPU reference of the mixture-of-experts ops (ops.h): the softmax top-k routing, the weighted
// sum of a token's expert outputs and the shared expert's sigmoid gate. Per token the arithmetic
// depends only on its own row, so results do not change with batching or chunking.
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace memra::cpu {

void moe_route(const float* logits, int64_t n_tokens, const MoeRouteParams& p, int32_t* ids,
               float* weights);
void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                 float* out);
void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim);

}  // namespace memra::cpu
