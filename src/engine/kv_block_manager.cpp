// KvBlockManager: free list + LRU of evictable cached blocks + hash index of full blocks.
// Invariant: every block is in exactly one of {referenced, free_, lru_}.
#include "engine/kv_block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

uint64_t kv_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and token ids, then a splitmix64 finalizer to spread the bits.
  uint64_t h = 0xcbf29ce484222325ull ^ parent_hash;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(parent_hash);
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

KvBlockManager::KvBlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache)
    : block_size_(block_size), prefix_cache_(prefix_cache) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "kv cache needs blocks > 0 and block size > 0 (got {}, {})",
         n_blocks, block_size);
  blocks_.resize(static_cast<size_t>(n_blocks));
  free_.reserve(blocks_.size());
  // Hand out low ids first (pop_back takes the last element).
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t KvBlockManager::n_available() const {
  return static_cast<int32_t>(free_.size() + lru_.size());
}

KvBlockStats KvBlockManager::stats() const {
  return {n_blocks(), used_, static_cast<int32_t>(lru_.size()), hits_, misses_, evictions_};
}

void KvBlockManager::uncache(int32_t block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  auto it = by_hash_.find(b.hash);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
  b.cached = false;
  b.tokens.clear();
}

int32_t KvBlockManager::take_block() {
  int32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = lru_.front();  // evict the least recently used cached block
    lru_.pop_front();
    const uint64_t hash = blocks_[static_cast<size_t>(id)].hash;
    uncache(id);
    ++evictions_;
    if (on_evict_) on_evict_(hash);
  }
  blocks_[static_cast<size_t>(id)].ref = 1;
  ++used_;
  return id;
}

bool KvBlockManager::allocate(int32_t n, std::vector<int32_t>& table) {
  if (n < 0 || n > n_available()) return false;
  for (int32_t i = 0; i < n; ++i) table.push_back(take_block());
  return true;
}

void KvBlockManager::release(std::span<const int32_t> table) {
  for (int32_t id : table) {
    Block& b = blocks_.at(static_cast<size_t>(id));
    if (b.ref <= 0) fail(ErrorCode::internal, "kv block {} released while unreferenced", id);
    if (--b.ref > 0) continue;
    --used_;
    if (b.cached) {
      b.lru_entry = lru_.insert(lru_.end(), id);
    } else {
      free_.push_back(id);
    }
  }
}

int32_t KvBlockManager::match_prefix(std::span<const int32_t> tokens, int32_t max_blocks,
                                     std::vector<int32_t>& table, std::vector<uint64_t>& hashes,
                                     const std::function<bool(uint64_t)>& usable_end,
                                     int32_t* run_blocks) {
  if (run_blocks) *run_blocks = 0;
  if (!prefix_cache_) return 0;
  const int32_t full = static_cast<int32_t>(tokens.size()) / block_size_;
  const int32_t limit = std::min(full, max_blocks);
  uint64_t parent = hashes.empty() ? kKvRootHash : hashes.back();
  // Look the run up first, taking no reference, so cutting it back leaves the LRU order alone.
  std::vector<int32_t> found;
  std::vector<uint64_t> found_hashes;
  for (int32_t i = 0; i < limit; ++i) {
    auto chunk = tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_);
    const uint64_t h = kv_block_hash(parent, chunk);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.parent_hash != parent || !std::equal(chunk.begin(), chunk.end(), b.tokens.begin()))
      break;  // a hash collision: treat as a miss
    found.push_back(it->second);
    found_hashes.push_back(h);
    parent = h;
  }
  const int32_t run = static_cast<int32_t>(found.size());
  if (run_blocks) *run_blocks = run;
  int32_t kept = run;
  if (usable_end)
    while (kept > 0 && !usable_end(found_hashes[static_cast<size_t>(kept - 1)])) --kept;
  for (int32_t i = 0; i < kept; ++i) {
    Block& b = blocks_[static_cast<size_t>(found[static_cast<size_t>(i)])];
    if (b.ref++ == 0) {
      lru_.erase(b.lru_entry);
      ++used_;
    }
    table.push_back(found[static_cast<size_t>(i)]);
    hashes.push_back(found_hashes[static_cast<size_t>(i)]);
  }
  hits_ += static_cast<uint64_t>(kept);
  if (run < limit) ++misses_;
  return kept;
}

uint64_t KvBlockManager::commit_full_block(int32_t block, uint64_t parent_hash,
                                           std::span<const int32_t> tokens) {
  if (static_cast<int32_t>(tokens.size()) != block_size_)
    fail(ErrorCode::internal, "kv block {} committed with {} tokens, block size {}", block,
         tokens.size(), block_size_);
  const uint64_t h = kv_block_hash(parent_hash, tokens);
  Block& b = blocks_.at(static_cast<size_t>(block));
  if (!prefix_cache_ || b.cached || by_hash_.count(h) != 0) return h;
  b.cached = true;
  b.hash = h;
  b.parent_hash = parent_hash;
  b.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(h, block);
  return h;
}

}  // namespace memra
