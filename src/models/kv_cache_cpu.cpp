// CpuKvCache: sizes are checked before allocation (n_blocks and block_size come from the engine
// and, through it, from user flags).
#include "models/kv_cache_cpu.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"

namespace memra {

CpuKvCache::CpuKvCache(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t n_blocks,
                       int32_t block_size)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), n_blocks_(n_blocks), block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "KV cache needs positive n_blocks and block_size, got {}, {}",
         n_blocks, block_size);
  block_floats_ = static_cast<int64_t>(
      checked_mul(checked_mul(block_size, n_kv_heads, "KV block"), head_dim, "KV block"));
  const uint64_t layer_floats = checked_mul(block_floats_, n_blocks, "KV cache size");
  checked_mul(checked_mul(layer_floats, 2 * sizeof(float), "KV cache size"), n_layers,
              "KV cache size");
  k_.assign(n_layers, std::vector<float>(layer_floats));
  v_.assign(n_layers, std::vector<float>(layer_floats));
}

uint64_t CpuKvCache::bytes() const {
  return k_.size() * 2 * static_cast<uint64_t>(block_floats_) * n_blocks_ * sizeof(float);
}

void CpuKvCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    fail(ErrorCode::invalid_argument, "copy_block({}, {}) outside the cache's {} blocks", src, dst,
         n_blocks_);
  for (size_t il = 0; il < k_.size(); ++il) {
    for (auto* store : {&k_[il], &v_[il]}) {
      float* base = store->data();
      std::copy_n(base + src * block_floats_, block_floats_, base + dst * block_floats_);
    }
  }
}

KvLayerView CpuKvCache::layer(int32_t il) {
  return {k_[il].data(), v_[il].data(), n_blocks_, block_size_, n_kv_heads_, head_dim_};
}

}  // namespace memra
