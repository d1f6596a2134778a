// Turns the engine's Batch (tokens grouped by sequence, one block-table vector per sequence) into
// the flat StepLayout backends consume, checking the batch against itself on the way; and the
// host-side shape rules of graph-replayed decode steps (buckets and padding).
#pragma once

#include <vector>

#include "backend/step.h"
#include "models/batch.h"

namespace memra {

// Throws Error(invalid_argument) naming the problem for a batch whose sequences are not contiguous
// in token order, whose positions do not follow n_past, whose block tables do not cover its
// positions (or name blocks outside [0, n_blocks)), whose token ids lie outside [0, n_vocab),
// whose logit tokens lie outside it, or (n_state_slots > 0: a model with recurrent state) whose
// sequences' state slots lie outside [0, n_state_slots) (the scratch slot past them is the graph
// padding's). (Checked here, once per step, because a replayed graph runs no host code of the
// ops.)
void step_layout_build(const Batch& batch, int32_t block_size, int32_t n_blocks, int32_t n_vocab,
                       StepLayout& out, int32_t n_state_slots = 0);

// ---- graph-replayed decode steps
// A pure decode step (every sequence one token, every token a logit row) is padded up to a batch
// bucket and to a context capacity, so that a few recorded graphs serve every decode step.

// How finely decode steps' batch sizes are bucketed. A padded sequence costs its step the work of
// a real one (H100, 8B Q4_K_M: 5-7 sequences on 8's graph lost 2-7%, 9-12 on 16's ~9%;
// docs/PERFORMANCE.md, forty-seventh round); each bucket is a graph to record per context bucket.
//   coarse: 1, 2, 4, 8, then 16, 24, 32, 48, 64, 96, 128, ... (powers of two and their midpoints)
//   small:  every size to 8, then 12, 16, 24, 32, 48, ...
//   fine:   every size to 16, every fourth to 32, every eighth to 64, then 96, 128, 192, ... (the
//           engine's default, measured: forty-ninth round)
// The values are MEMRA_GRAPH_SMALL_BUCKETS' choices in order: 0, 1, fine (decoder.cpp).
enum class BucketGrain { coarse = 0, small = 1, fine = 2 };

// Batch buckets up to max_batch in that grain, and max_batch itself last; empty when
// max_batch < 1.
std::vector<int32_t> graph_batch_buckets(int32_t max_batch,
                                         BucketGrain grain = BucketGrain::coarse);
// The smallest bucket >= n, or 0 when n exceeds them all.
int32_t graph_batch_bucket(const std::vector<int32_t>& buckets, int32_t n);
// The context capacity a step of max_context is recorded for: the next power of two >= 4096 and
// >= max_context, capped at context_limit (the engine's context length); 0 when max_context
// exceeds context_limit.
int32_t graph_context_bucket(int32_t max_context, int32_t context_limit);
// True for a step graph_pad can pad: one token per sequence and every token a logit row.
bool step_is_pure_decode(const StepLayout& step);
// Pads a pure decode step in place to n tokens, sequences and logit rows, block-table stride
// max_blocks and max_context = context. Padding token i (n_tokens() <= i < n) is token id 0 at
// position 0 in a sequence of its own whose table is [scratch_block] (a KV block no sequence owns,
// written and read only by padding), its slot scratch_block * block_size, its recurrent state
// slot scratch_state_slot (a hybrid model's slot no sequence owns; -1 where the model keeps no
// state); padding logit rows come after the real ones and are never read. Throws
// Error(internal) if the step does not fit.
void graph_pad(StepLayout& step, int32_t n, int32_t max_blocks, int32_t context,
               int32_t scratch_block, int32_t scratch_state_slot = -1);

}  // namespace memra
