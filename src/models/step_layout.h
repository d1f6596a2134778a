// Turns the engine's Batch (tokens grouped by sequence, one block-table vector per sequence) into
// the flat StepLayout backends consume, checking the batch against itself on the way.
#pragma once

#include "backend/step.h"
#include "models/batch.h"

namespace memra {

// Throws Error(invalid_argument) naming the problem for a batch whose sequences are not contiguous
// in token order, whose positions do not follow n_past, whose block tables do not cover its
// positions (or name blocks outside [0, n_blocks)), or whose logit tokens lie outside it.
void step_layout_build(const Batch& batch, int32_t block_size, int32_t n_blocks, StepLayout& out);

}  // namespace memra
