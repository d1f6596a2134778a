// The recurrent-state pool beside the KV block pool: models with linear-attention layers keep a
// fixed-size state per sequence (the causal conv's last inputs and the delta-rule matrix) instead
// of paged KV. A running sequence owns one slot from admission until it finishes, is cancelled or
// is preempted (its state is recomputed on resume, as its KV is). The model owns the memory (its
// KvCache); this class only decides which slot ids a sequence may use.
#pragma once

#include <cstdint>
#include <vector>

namespace memra {

class StatePool {
 public:
  explicit StatePool(int32_t n_slots);  // 0: the model keeps no recurrent state

  int32_t n_slots() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t n_used() const { return n_slots() - static_cast<int32_t>(free_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  bool enabled() const { return !in_use_.empty(); }

  // A free slot (lowest id first), or -1 when every slot is taken.
  int32_t allocate();
  // Returns a slot taken by allocate(); throws Error(internal) for any other id.
  void release(int32_t slot);

 private:
  std::vector<uint8_t> in_use_;
  std::vector<int32_t> free_;  // kept sorted descending: back() is the lowest id
};

}  // namespace memra
