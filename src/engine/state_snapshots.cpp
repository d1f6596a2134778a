// StateSnapshots: a free list of snapshot slots, a hash index and an LRU of the held snapshots.
// Invariant: every snapshot slot is either free or held by exactly one hash in by_hash_ / lru_.
#include "engine/state_snapshots.h"

#include "core/error.h"

namespace memra {

StateSnapshots::StateSnapshots(int32_t first_slot, int32_t n_slots)
    : first_slot_(first_slot), n_slots_(n_slots) {
  if (first_slot < 0 || n_slots < 0)
    fail(ErrorCode::invalid_argument, "state snapshots of {} slots from slot {}", n_slots,
         first_slot);
  for (int32_t i = n_slots - 1; i >= 0; --i) free_.push_back(first_slot + i);
}

StateSnapshotStats StateSnapshots::stats() const {
  StateSnapshotStats s = counts_;
  s.total = n_slots();
  s.used = static_cast<int32_t>(by_hash_.size());
  return s;
}

int32_t StateSnapshots::restore(uint64_t block_hash) {
  auto it = by_hash_.find(block_hash);
  if (it == by_hash_.end()) return -1;
  lru_.splice(lru_.end(), lru_, it->second.lru_entry);
  ++counts_.restored;
  return it->second.slot;
}

int32_t StateSnapshots::take(uint64_t block_hash) {
  if (!enabled() || has(block_hash)) return -1;
  if (free_.empty()) {
    forget(lru_.front());
    ++counts_.dropped_lru;
  }
  const int32_t slot = free_.back();
  free_.pop_back();
  by_hash_.emplace(block_hash, Entry{slot, lru_.insert(lru_.end(), block_hash)});
  ++counts_.taken;
  return slot;
}

void StateSnapshots::drop(uint64_t block_hash) {
  if (!has(block_hash)) return;
  forget(block_hash);
  ++counts_.dropped_evicted;
}

void StateSnapshots::forget(uint64_t block_hash) {
  auto it = by_hash_.find(block_hash);
  if (it == by_hash_.end())
    fail(ErrorCode::internal, "state snapshot {} forgotten twice", block_hash);
  lru_.erase(it->second.lru_entry);
  free_.push_back(it->second.slot);
  by_hash_.erase(it);
}

}  // namespace memra
