// StatePool: a free list of slot ids with an in-use flag per slot, so a double release or a
// foreign id is caught rather than handing one slot to two sequences.
#include "engine/state_pool.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

StatePool::StatePool(int32_t n_slots) {
  if (n_slots < 0) fail(ErrorCode::invalid_argument, "state pool of {} slots", n_slots);
  in_use_.assign(static_cast<size_t>(n_slots), 0);
  for (int32_t s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

int32_t StatePool::allocate() {
  if (free_.empty()) return -1;
  const int32_t slot = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(slot)] = 1;
  return slot;
}

void StatePool::release(int32_t slot) {
  if (slot < 0 || slot >= n_slots() || !in_use_[static_cast<size_t>(slot)])
    fail(ErrorCode::internal, "state slot {} released but not in use ({} slots)", slot, n_slots());
  in_use_[static_cast<size_t>(slot)] = 0;
  // Keep the lowest free id at the back, so slot ids are reused in a fixed order.
  free_.insert(std::upper_bound(free_.begin(), free_.end(), slot, std::greater<>()), slot);
}

}  // namespace memra
