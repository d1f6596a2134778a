// BPE merge loop and word cache (see bpe_model.h).
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <queue>

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/unicode_text.h"

namespace memra {

namespace {

// The word cache: one per model, shared by every thread, allocated with the model and never grown.
// A server that encodes on a thread per connection gets hits across connections and no per-thread
// table (a table per short-lived thread cost a megabyte each, spread over glibc's arenas).
constexpr size_t kCacheSlots = 1 << 14;    // a collision just recomputes
constexpr size_t kCacheMaxWordBytes = 64;  // longer words are rare and would bloat every slot
constexpr size_t kCacheMaxIds = 16;        // words of more tokens are not cached
constexpr size_t kCacheLocks = 64;         // slot i is guarded by lock i % kCacheLocks

}  // namespace

struct BpeModel::WordCache {
  struct Slot {
    uint64_t hash = 0;
    uint8_t word_bytes = 0;  // 0: empty (empty words are never looked up)
    uint8_t n_ids = 0;
    std::array<char, kCacheMaxWordBytes> word;
    std::array<int32_t, kCacheMaxIds> ids;
  };
  std::unique_ptr<Slot[]> slots = std::make_unique<Slot[]>(kCacheSlots);
  std::array<std::mutex, kCacheLocks> locks;

  // Appends the cached ids of `word` to `out`; false when the slot holds another word.
  bool lookup(size_t hash, std::string_view word, std::vector<int32_t>& out) {
    const size_t i = hash & (kCacheSlots - 1);
    std::array<int32_t, kCacheMaxIds> ids;
    size_t n = 0;
    {
      std::lock_guard lock(locks[i % kCacheLocks]);
      const Slot& s = slots[i];
      if (s.hash != hash || s.word_bytes != word.size() ||
          std::memcmp(s.word.data(), word.data(), word.size()) != 0)
        return false;
      n = s.n_ids;
      std::copy_n(s.ids.begin(), n, ids.begin());
    }
    out.insert(out.end(), ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n));
    return true;
  }

  void store(size_t hash, std::string_view word, const std::vector<int32_t>& ids) {
    if (word.empty() || word.size() > kCacheMaxWordBytes || ids.size() > kCacheMaxIds) return;
    const size_t i = hash & (kCacheSlots - 1);
    std::lock_guard lock(locks[i % kCacheLocks]);
    Slot& s = slots[i];
    s.hash = hash;
    s.word_bytes = static_cast<uint8_t>(word.size());
    s.n_ids = static_cast<uint8_t>(ids.size());
    std::copy(word.begin(), word.end(), s.word.begin());
    std::copy(ids.begin(), ids.end(), s.ids.begin());
  }
};

size_t BpeModel::word_cache_bytes() {
  return kCacheSlots * sizeof(WordCache::Slot);
}

BpeModel::BpeModel(std::vector<std::string> tokens,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   const Options& options, const std::vector<std::array<int32_t, 3>>& merge_ids)
    : tokens_(std::move(tokens)), options_(options), cache_(std::make_unique<WordCache>()) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int32_t>(i));
  merges_.reserve(merges.size() + merge_ids.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t a = find(left);
    const int32_t b = find(right);
    const int32_t merged = find(left + right);
    if (a < 0 || b < 0 || merged < 0)
      fail(ErrorCode::malformed_file,
           "tokenizer merge {} ('{}' '{}') uses a token not in the vocabulary", rank, left, right);
    merges_.try_emplace(pair_key(a, b), Merge{static_cast<int32_t>(rank), merged});
  }
  const auto n = static_cast<int32_t>(tokens_.size());
  for (size_t k = 0; k < merge_ids.size(); ++k) {
    const auto [a, b, merged] = merge_ids[k];
    if (a < 0 || b < 0 || merged < 0 || a >= n || b >= n || merged >= n)
      fail(ErrorCode::malformed_file, "tokenizer merge {} has an id outside the vocabulary", k);
    merges_.try_emplace(pair_key(a, b), Merge{static_cast<int32_t>(merges.size() + k), merged});
  }
  for (int b = 0; b < 256; ++b) {
    byte_fallback_ids_[b] = find(fmt::format("<0x{:02X}>", b));
    if (options_.byte_level) {
      std::string mapped;
      text::utf8_append(mapped, text::byte_to_unicode()[b]);
      // A byte without a token becomes the unknown token, or is dropped as `tokenizers` does.
      byte_level_ids_[b] = find(mapped);
      if (byte_level_ids_[b] < 0) byte_level_ids_[b] = options_.unk_id;
    }
  }
  if (options_.byte_fallback)
    for (int b = 0; b < 256; ++b)
      if (byte_fallback_ids_[b] < 0)
        fail(ErrorCode::malformed_file, "byte_fallback is set but token <0x{:02X}> is missing", b);
}

BpeModel::~BpeModel() = default;

int32_t BpeModel::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

void BpeModel::initial_symbols(std::string_view word, bool mapped,
                               std::vector<int32_t>& symbols) const {
  if (options_.byte_level && !mapped) {
    for (char c : word)
      if (const int32_t id = byte_level_ids_[static_cast<uint8_t>(c)]; id >= 0)
        symbols.push_back(id);
    return;
  }
  size_t i = 0;
  bool previous_unk = false;
  while (i < word.size()) {
    size_t n = text::utf8_valid_length(word, i);
    if (n == 0) n = 1;  // cannot happen for repaired text; keep going byte by byte
    const int32_t id = find(word.substr(i, n));
    if (id >= 0) {
      symbols.push_back(id);
      previous_unk = false;
    } else if (options_.byte_fallback) {
      for (size_t k = 0; k < n; ++k)
        symbols.push_back(byte_fallback_ids_[static_cast<uint8_t>(word[i + k])]);
      previous_unk = false;
    } else if (options_.unk_id >= 0) {
      if (!(options_.fuse_unk && previous_unk)) symbols.push_back(options_.unk_id);
      previous_unk = true;
    }  // else: no token, no fallback, no unknown token: dropped, as `tokenizers` does
    i += n;
  }
}

void BpeModel::merge_symbols(std::vector<int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(pair_key(symbols[pos], symbols[next[pos]]));
    if (it != merges_.end()) queue.push({it->second.rank, pos, symbols[pos], symbols[next[pos]]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    // Stale entries: the left symbol was absorbed or either side changed since the push.
    if (symbols[c.pos] != c.left || next[c.pos] < 0 || symbols[next[c.pos]] != c.right) continue;
    const int right = next[c.pos];
    symbols[c.pos] = merges_.find(pair_key(c.left, c.right))->second.id;
    symbols[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void BpeModel::encode_word(std::string_view word, bool mapped, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  const size_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  if (cacheable && cache_->lookup(hash, word, out)) return;
  std::vector<int32_t> symbols;
  bool done = false;
  if (options_.ignore_merges) {
    std::string key;
    if (options_.byte_level && !mapped)
      for (char c : word) text::utf8_append(key, text::byte_to_unicode()[static_cast<uint8_t>(c)]);
    const int32_t id = find(options_.byte_level && !mapped ? std::string_view(key) : word);
    if (id >= 0) {
      symbols.push_back(id);
      done = true;
    }
  }
  if (!done) {
    symbols.reserve(word.size());
    initial_symbols(word, mapped, symbols);
    merge_symbols(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) cache_->store(hash, word, symbols);
}

std::vector<std::pair<int32_t, int32_t>> BpeModel::merges_in_rank_order() const {
  std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> ranked;
  ranked.reserve(merges_.size());
  for (const auto& [key, merge] : merges_)
    ranked.push_back(
        {merge.rank, {static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xFFFFFFFFu)}});
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(ranked.size());
  for (const auto& r : ranked) out.push_back(r.second);
  return out;
}

}  // namespace memra
