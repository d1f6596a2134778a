// Paged KV cache bookkeeping: fixed-size blocks, a free list, reference counts, and a prefix cache
// of full blocks keyed by a hash of their token ids chained with their parent block's hash. The
// model owns the KV memory; this class only decides which block ids a sequence may use.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace memra {

struct KvBlockStats {
  int32_t total = 0;
  int32_t used = 0;            // referenced by at least one sequence
  int32_t cached = 0;          // unreferenced but kept for prefix reuse (evictable, LRU)
  uint64_t prefix_hits = 0;    // blocks reused from the cache
  uint64_t prefix_misses = 0;  // lookups that stopped at a block not in the cache
  uint64_t evictions = 0;
};

// The hash a block carries in the prefix cache: its tokens chained with its parent's hash.
uint64_t kv_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens);
inline constexpr uint64_t kKvRootHash = 0x6d656d7261ull;  // the "parent" of a sequence's 1st block

class KvBlockManager {
 public:
  KvBlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks an allocation can obtain now (free plus evictable cached ones).
  int32_t n_available() const;
  KvBlockStats stats() const;

  // Appends n fresh blocks (ref 1) to `table`; false (and nothing changed) when too few exist.
  bool allocate(int32_t n, std::vector<int32_t>& table);
  // Drops one reference per block; unreferenced cached blocks become evictable (LRU order),
  // the others return to the free list.
  void release(std::span<const int32_t> table);

  // Longest run of cached full blocks matching tokens from the start, at most max_blocks, cut
  // back (when usable_end is set) to the longest run whose last block's hash it accepts: a
  // hybrid model resumes only where a recurrent-state snapshot exists. Each kept block gains a
  // reference and is appended to `table`; `hashes` receives their hashes. Returns the number of
  // blocks kept; run_blocks (when set) receives the length of the run before the cut.
  int32_t match_prefix(std::span<const int32_t> tokens, int32_t max_blocks,
                       std::vector<int32_t>& table, std::vector<uint64_t>& hashes,
                       const std::function<bool(uint64_t)>& usable_end = {},
                       int32_t* run_blocks = nullptr);
  bool is_cached(uint64_t hash) const { return by_hash_.count(hash) != 0; }
  // Called with a block's hash when eviction takes it out of the cache (the engine drops the
  // block's state snapshot then).
  void on_evict(std::function<void(uint64_t)> hook) { on_evict_ = std::move(hook); }
  // Registers a block the caller has filled completely with `tokens` (block_size of them) under
  // parent_hash; returns its hash. A block whose content is already cached elsewhere stays
  // private (the existing entry wins). Cached blocks are never written again: only full blocks
  // are shared and sequences write only past their last full block.
  uint64_t commit_full_block(int32_t block, uint64_t parent_hash, std::span<const int32_t> tokens);

 private:
  struct Block {
    int32_t ref = 0;
    bool cached = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;             // content, checked on lookup (hashes can collide)
    std::list<int32_t>::iterator lru_entry;  // valid while cached and ref == 0
  };

  int32_t take_block();
  void uncache(int32_t block);

  int32_t block_size_;
  bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // unreferenced, uncached
  std::list<int32_t> lru_;     // unreferenced, cached; front = least recently used
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::function<void(uint64_t)> on_evict_;
  int32_t used_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace memra
