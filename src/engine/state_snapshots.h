// Recurrent-state snapshots for the prefix cache of hybrid (linear-attention) models: cached KV
// blocks alone cannot resume such a sequence, because the state after the cached tokens is not
// in them. A snapshot slot (beside the running sequences' slots, same memory and layout) holds
// the state after exactly the tokens up to the end of one cached full block, keyed by that
// block's prefix hash (kv_block_hash chains every earlier block, so the hash names the whole
// prefix). This class only decides which slot ids hold which snapshot; the model's KvCache owns
// the memory and copies slots (KvCache::copy_state_slot).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace memra {

struct StateSnapshotStats {
  int32_t total = 0;             // snapshot slots
  int32_t used = 0;              // slots holding a snapshot
  uint64_t taken = 0;            // snapshots written
  uint64_t restored = 0;         // admissions that resumed from one
  uint64_t dropped_lru = 0;      // dropped for a newer snapshot (their blocks may stay cached)
  uint64_t dropped_evicted = 0;  // dropped because their block left the prefix cache
};

class StateSnapshots {
 public:
  // Slot ids first_slot .. first_slot + n_slots - 1 (the running sequences' slots come first).
  StateSnapshots(int32_t first_slot, int32_t n_slots);

  int32_t n_slots() const { return n_slots_; }
  bool enabled() const { return n_slots() > 0; }
  bool has(uint64_t block_hash) const { return by_hash_.count(block_hash) != 0; }
  StateSnapshotStats stats() const;

  // The slot holding the state after the prefix ending with the block of this hash, marked most
  // recently used and counted as restored; -1 when there is none.
  int32_t restore(uint64_t block_hash);
  // A slot to write the snapshot of block_hash into: a free one, else the least recently used
  // one (its snapshot dropped). -1 when block_hash already has one (nothing to copy) or there
  // are no snapshot slots.
  int32_t take(uint64_t block_hash);
  // The block of this hash left the prefix cache: its snapshot (if any) goes too, since a hybrid
  // model cannot resume from a state without the attention layers' KV.
  void drop(uint64_t block_hash);

 private:
  struct Entry {
    int32_t slot = -1;
    std::list<uint64_t>::iterator lru_entry;
  };

  void forget(uint64_t block_hash);

  int32_t first_slot_, n_slots_;
  std::vector<int32_t> free_;  // slot ids holding no snapshot
  std::list<uint64_t> lru_;    // held hashes; front = least recently used
  std::unordered_map<uint64_t, Entry> by_hash_;
  StateSnapshotStats counts_;
};

}  // namespace memra
