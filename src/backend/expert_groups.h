// The (token, expert) pairs of a mixture-of-experts step grouped by expert on the host: what a
// backend that runs each expert's matrix over its gathered rows needs (the CPU always; CUDA for
// steps with more pairs than its one-launch kernel takes).
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace memra {

struct ExpertGroups {
  std::vector<int32_t> pairs;  // pair indices ordered by expert, increasing within an expert
  std::vector<int64_t> begin;  // [n_expert + 1]: expert e's pairs are pairs[begin[e], begin[e+1])
};

// Counting sort of ids[0, n_pairs) (each in [0, n_expert), else an error naming the pair) into g.
inline void expert_groups_build(const int32_t* ids, int64_t n_pairs, int64_t n_expert,
                                ExpertGroups& g) {
  g.begin.assign(static_cast<size_t>(n_expert) + 1, 0);
  for (int64_t p = 0; p < n_pairs; ++p) {
    if (ids[p] < 0 || ids[p] >= n_expert)
      fail(ErrorCode::internal, "mixture of experts: pair {} routes to expert {} of {}", p, ids[p],
           n_expert);
    ++g.begin[static_cast<size_t>(ids[p]) + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) g.begin[e + 1] += g.begin[e];
  g.pairs.resize(static_cast<size_t>(n_pairs));
  std::vector<int64_t> next(g.begin.begin(), g.begin.end() - 1);
  for (int64_t p = 0; p < n_pairs; ++p) g.pairs[next[ids[p]]++] = static_cast<int32_t>(p);
}

}  // namespace memra
