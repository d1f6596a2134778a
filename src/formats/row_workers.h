// Runs a per-row job over a tensor's rows on a few threads (memra convert and memra synth fill
// tensors this way): [0, rows) is cut into contiguous ranges of at least 16 rows, one per
// worker, so the bytes written never depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace memra {

// Calls fill(first_row, last_row) for each range, the calling thread taking the first. An
// Error thrown by any worker is rethrown (the first in range order) with `what` prefixed.
void row_workers_run(uint64_t rows, int threads,
                     const std::function<void(uint64_t, uint64_t)>& fill, const std::string& what);

}  // namespace memra
