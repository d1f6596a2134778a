// How the decode kernel's run form (attention_decode.cuh, kRun) shares a token's live splits
// among its split groups: which run of splits the block of each grid group index takes, for each
// sharing the host can pick (attention.cu's MEMRA_DECODE_SPLITS), and the compile-time proof that
// every sharing covers each split exactly once. Private to kernels/attention.
#pragma once

#include <cstdint>

namespace memra::kernels::detail {

// How the decode kernel's run form shares a token's n live splits among its G groups, by the
// block's group index in the grid (group_run). Any sharing gives the same partials (a split's
// arithmetic does not depend on its block): the same bits.
enum class RunShares : uint8_t {
  // group g: [g n / G, (g + 1) n / G); the grid (token, group, kv head and chunk). auto's.
  floor,
  // the first n % G runs one split longer, issued first (the grid group-major: every group-0
  // block before any group-1 block). fill's on grids of more than a wave.
  longer_first,
};

// The splits [first, first + count) of a token's n live splits (counted from its first) that the
// block of grid group index `grid_group` of `groups` takes (count 0: none).
struct SplitRun {
  int64_t first, count;
};
__host__ __device__ constexpr SplitRun group_run(RunShares shares, int64_t grid_group, int64_t n,
                                                 int64_t groups) {
  const int64_t q = n / groups, longer = n % groups;
  if (shares == RunShares::longer_first) {
    const int64_t g = grid_group;
    return {g * q + (g < longer ? g : longer), q + (g < longer ? 1 : 0)};
  }
  const int64_t first = grid_group * n / groups;
  return {first, (grid_group + 1) * n / groups - first};
}

// Every sharing of n <= n_max splits among groups <= g_max groups (groups <= n or not): the runs,
// in group order, tile [0, n) (each split in exactly one run), differ by at most one split, and
// (but floor) the longer ones come first in the grid.
constexpr bool group_runs_tile(RunShares shares, int64_t n_max, int64_t g_max) {
  for (int64_t n = 1; n <= n_max; ++n) {
    for (int64_t groups = 1; groups <= g_max; ++groups) {
      int64_t next = 0, shortest = n, longest = 0, last_count = n + 1;
      for (int64_t i = 0; i < groups; ++i) {
        const SplitRun run = group_run(shares, i, n, groups);
        if (run.first != next || run.count < 0) return false;
        if (shares != RunShares::floor && run.count > last_count) return false;
        next += run.count;
        last_count = run.count;
        shortest = run.count < shortest ? run.count : shortest;
        longest = run.count > longest ? run.count : longest;
      }
      if (next != n || longest - shortest > 1) return false;
    }
  }
  return true;
}
static_assert(group_runs_tile(RunShares::floor, 40, 48) &&
                  group_runs_tile(RunShares::longer_first, 40, 48),
              "a token's splits, each in exactly one group's run");
// Three splits in two groups (the 8B's columns after 512 tokens): longer_first's first group takes
// the first two, floor's the first alone (its second the last two, the partial one among them).
static_assert(group_run(RunShares::longer_first, 0, 3, 2).count == 2 &&
              group_run(RunShares::floor, 0, 3, 2).count == 1);

}  // namespace memra::kernels::detail
