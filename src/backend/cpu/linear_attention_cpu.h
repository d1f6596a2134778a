// CPU reference of the linear-attention ops (Qwen3.5's gated delta-net layers): the causal
// depthwise conv with its per-sequence state and the gated delta rule recurrence, token by token
// in each sequence's order. Per token the arithmetic depends only on its own sequence (its state
// slot and earlier tokens), so results do not change with batching or chunking.
#pragma once

#include "backend/cpu/thread_pool.h"
#include "backend/ops.h"
#include "backend/step.h"

namespace memra::cpu {

void ssm_conv(ThreadPool& pool, const StepLayout& step, const StateLayerView& state, const float* x,
              int64_t dim, int kernel, const float* w, float* y);

void gated_delta_rule(ThreadPool& pool, const StepLayout& step, const StateLayerView& state,
                      const float* qkv, const float* a, const float* b, const float* A,
                      const float* dt_bias, const DeltaNetParams& p, float* out);

void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                    float eps, float* y);

}  // namespace memra::cpu
