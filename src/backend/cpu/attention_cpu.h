// Paged causal attention on the CPU: writing a step's keys and values into their cache slots and
// attending each query token over its sequence's cached positions (block tables and slots from the
// StepLayout). Split over (token, head) pairs on the thread pool, or (token, kv head) groups of
// query heads where a step has enough of them (the same bits either way).
#pragma once

#include "backend/cpu/thread_pool.h"
#include "backend/ops.h"

namespace memra::cpu {

void kv_store(const KvLayerView& kv, const StepLayout& step, const float* k, const float* v);

// reference: double accumulation for scores, softmax and the weighted sum.
void attention(ThreadPool& pool, const KvLayerView& kv, const StepLayout& step, const float* q,
               const AttentionParams& params, bool reference, float* out);

}  // namespace memra::cpu
