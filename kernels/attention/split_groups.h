// How many groups a decode launch's run form cuts a token's live splits into (the host's choice for
// MEMRA_DECODE_SPLITS=fill, attention.cu): the grouping whose runs finish the grid soonest on the
// GPU's block slots, by a list-scheduling estimate checked at compile time on the 8B's shapes.
// Host code only, private to attention.cu.
#pragma once

#include <cstdint>

namespace memra::kernels {

// The time, in splits, that `columns` (token, kv head) columns of `live` splits each take on
// `slots` block slots, cut into `groups` runs a column (the first live % groups one split longer),
// the longer runs issued first and each block taken by the slot that frees first: list scheduling
// over the slots' loads, kept as a few (load, slots) levels, lowest first. Every block lands on
// the lowest load, so the loads lie within one run (q + 1) of the lowest, at the lowest plus a
// multiple of q or of q + 1: a handful of levels, which that bound keeps far below kLevels (0
// where they would not fit; fill_groups then skips that grouping).
constexpr int64_t runs_makespan(int64_t columns, int64_t live, int64_t groups, int64_t slots) {
  constexpr int kLevels = 16;
  int64_t load[kLevels] = {}, count[kLevels] = {};
  int n = 1;
  count[0] = slots;
  const int64_t q = live / groups, r = live % groups;
  const int64_t sizes[2] = {q + 1, q}, blocks[2] = {columns * r, columns * (groups - r)};
  for (int c = 0; c < 2; ++c) {
    for (int64_t left = sizes[c] > 0 ? blocks[c] : 0; left > 0;) {
      const int64_t take = count[0] < left ? count[0] : left;
      const int64_t to = load[0] + sizes[c];
      left -= take;
      count[0] -= take;
      int at = 0;  // where `to` goes among the levels (sorted by load)
      while (at < n && load[at] < to) ++at;
      if (at < n && load[at] == to) {
        count[at] += take;
      } else {
        if (n == kLevels) return 0;
        for (int i = n; i > at; --i) load[i] = load[i - 1], count[i] = count[i - 1];
        load[at] = to;
        count[at] = take;
        ++n;
      }
      if (count[0] == 0) {
        for (int i = 0; i + 1 < n; ++i) load[i] = load[i + 1], count[i] = count[i + 1];
        --n;
      }
    }
  }
  return load[n - 1];
}

// The fewest groups (1 to live) whose runs_makespan is the least: only the fewest groups of each
// run length (ceil(live / k) for a run of k) are tried.
constexpr int64_t fill_groups(int64_t columns, int64_t live, int64_t slots) {
  int64_t best = 1, best_time = runs_makespan(columns, live, 1, slots);
  for (int64_t k = live - 1; k >= 1; --k) {
    const int64_t groups = (live + k - 1) / k;
    if ((live + groups - 2) / (groups - 1) == k) continue;  // fewer groups give runs of k too
    const int64_t time = runs_makespan(columns, live, groups, slots);
    if (time > 0 && time < best_time) best = groups, best_time = time;
  }
  return best;
}
// The 8B (8 kv heads) on 264 slots (two blocks an SM on 132 SMs), three splits a column: 16
// sequences two groups (as auto), 20 two (auto one: three splits' time instead of two), 24 and
// 32 one (as auto), 40 two (auto one: six splits' time instead of four), 64 one; one sequence
// at 16,384 tokens (64 splits) 32 groups, two splits each (auto: 33).
static_assert(fill_groups(16 * 8, 3, 264) == 2 && runs_makespan(16 * 8, 3, 2, 264) == 2);
static_assert(fill_groups(20 * 8, 3, 264) == 2 && runs_makespan(20 * 8, 3, 1, 264) == 3 &&
              runs_makespan(20 * 8, 3, 2, 264) == 2);
static_assert(fill_groups(24 * 8, 3, 264) == 1 && fill_groups(32 * 8, 3, 264) == 1);
static_assert(fill_groups(40 * 8, 3, 264) == 2 && runs_makespan(40 * 8, 3, 1, 264) == 6 &&
              runs_makespan(40 * 8, 3, 2, 264) == 4);
static_assert(fill_groups(64 * 8, 3, 264) == 1 && runs_makespan(64 * 8, 3, 1, 264) == 6);
static_assert(fill_groups(8, 64, 264) == 32 && runs_makespan(8, 64, 32, 264) == 2);

// fill_groups for a launch: a step's layers ask with the same arguments, so the last answer is
// kept (per host thread).
inline int64_t fill_groups_cached(int64_t columns, int64_t live, int64_t slots) {
  thread_local int64_t last[4] = {-1, -1, -1, 1};
  if (last[0] != columns || last[1] != live || last[2] != slots)
    last[0] = columns, last[1] = live, last[2] = slots, last[3] = fill_groups(columns, live, slots);
  return last[3];
}

}  // namespace memra::kernels
