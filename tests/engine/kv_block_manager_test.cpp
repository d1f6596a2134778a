// KvBlockManager: allocation and release, reference counts, prefix-cache hits on chained hashes,
// LRU eviction of unreferenced cached blocks only, and refusal when blocks run out.
#include "engine/kv_block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

namespace memra {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Fills a fresh table for `tokens` and commits its full blocks, as the scheduler does.
std::vector<int32_t> fill(KvBlockManager& kv, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> table;
  const int32_t bs = kv.block_size();
  EXPECT_TRUE(kv.allocate((static_cast<int32_t>(tokens.size()) + bs - 1) / bs, table));
  uint64_t parent = kKvRootHash;
  for (size_t b = 0; b < tokens.size() / bs; ++b)
    parent = kv.commit_full_block(table[b], parent, std::span(tokens).subspan(b * bs, bs));
  return table;
}

TEST(KvBlockManager, AllocateAndReleaseTrackUsage) {
  KvBlockManager kv(8, 4, true);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(kv.allocate(5, a));
  EXPECT_EQ(kv.stats().used, 5);
  EXPECT_FALSE(kv.allocate(4, b));  // only 3 left
  EXPECT_TRUE(b.empty());
  ASSERT_TRUE(kv.allocate(3, b));
  EXPECT_EQ(kv.n_available(), 0);
  kv.release(a);
  EXPECT_EQ(kv.n_available(), 5);
  EXPECT_EQ(kv.stats().used, 3);
  EXPECT_THROW(kv.release(a), Error);  // double release is a bug, caught
}

TEST(KvBlockManager, PrefixMatchReusesFullBlocksOnly) {
  KvBlockManager kv(16, 4, true);
  const auto prompt = iota_tokens(10);  // 2 full blocks + 2 tokens
  auto t1 = fill(kv, prompt);
  std::vector<int32_t> t2;
  std::vector<uint64_t> h2;
  EXPECT_EQ(kv.match_prefix(prompt, 100, t2, h2), 2);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_EQ(h2.size(), 2u);
  // The shared blocks stay in use after one holder releases them.
  kv.release(t1);
  EXPECT_EQ(kv.stats().used, 2);
  kv.release(t2);
  EXPECT_EQ(kv.stats().used, 0);
  EXPECT_EQ(kv.stats().cached, 2);
  EXPECT_EQ(kv.stats().prefix_hits, 2u);
}

TEST(KvBlockManager, PrefixMatchIsChainedNotPerBlock) {
  KvBlockManager kv(16, 4, true);
  auto t1 = fill(kv, iota_tokens(8));
  // Same second block content after a different first block: must not match.
  std::vector<int32_t> other = iota_tokens(8);
  other[0] = 99;
  std::vector<int32_t> t2;
  std::vector<uint64_t> h2;
  EXPECT_EQ(kv.match_prefix(other, 100, t2, h2), 0);
  // max_blocks caps the match.
  EXPECT_EQ(kv.match_prefix(iota_tokens(8), 1, t2, h2), 1);
}

TEST(KvBlockManager, EvictsLeastRecentlyUsedCachedBlocks) {
  KvBlockManager kv(4, 2, true);
  auto a = fill(kv, {1, 2});
  auto b = fill(kv, {3, 4});
  kv.release(a);  // a cached first: least recently used
  kv.release(b);
  std::vector<int32_t> fresh;
  ASSERT_TRUE(kv.allocate(3, fresh));  // 2 free + evicts one cached block
  EXPECT_EQ(kv.stats().evictions, 1u);
  std::vector<int32_t> t;
  std::vector<uint64_t> h;
  EXPECT_EQ(kv.match_prefix(std::vector<int32_t>{1, 2}, 1, t, h), 0);  // a was evicted
  EXPECT_EQ(kv.match_prefix(std::vector<int32_t>{3, 4}, 1, t, h), 1);  // b survived
  // Referenced blocks are never evicted: all 4 are in use now.
  EXPECT_EQ(kv.n_available(), 0);
  EXPECT_FALSE(kv.allocate(1, fresh));
}

TEST(KvBlockManager, DisabledCacheNeverMatches) {
  KvBlockManager kv(8, 2, false);
  auto a = fill(kv, {1, 2, 3, 4});
  kv.release(a);
  std::vector<int32_t> t;
  std::vector<uint64_t> h;
  EXPECT_EQ(kv.match_prefix(std::vector<int32_t>{1, 2, 3, 4}, 2, t, h), 0);
  EXPECT_EQ(kv.stats().cached, 0);
}

TEST(KvBlockManager, DuplicateContentKeepsFirstEntry) {
  KvBlockManager kv(8, 2, true);
  auto a = fill(kv, {5, 6});
  auto b = fill(kv, {5, 6});  // computed twice (e.g. admitted in the same step)
  kv.release(b);
  EXPECT_EQ(kv.stats().cached, 0);  // b stayed private and went back to the free list
  std::vector<int32_t> t;
  std::vector<uint64_t> h;
  EXPECT_EQ(kv.match_prefix(std::vector<int32_t>{5, 6}, 1, t, h), 1);
  EXPECT_EQ(t[0], a[0]);
}

TEST(KvBlockManager, RejectsBadGeometry) {
  EXPECT_THROW(KvBlockManager(0, 16, true), Error);
  EXPECT_THROW(KvBlockManager(4, 0, true), Error);
}

}  // namespace
}  // namespace memra
