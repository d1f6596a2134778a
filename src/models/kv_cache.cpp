// BackendKvCache: sizes are checked before allocation (n_blocks and block_size come from the
// engine and, through it, from user flags).
#include "models/kv_cache.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace memra {

namespace {

uint64_t element_bytes(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    fail(ErrorCode::unsupported, "KV cache dtype {} is not supported (F32, F16, BF16)",
         dtype_name(dtype));
  return dtype_traits(dtype).type_size;
}

}  // namespace

uint64_t BackendKvCache::bytes_per_token(DType dtype, int32_t n_layers, int32_t n_kv_heads,
                                         int32_t head_dim) {
  return uint64_t{2} * element_bytes(dtype) * n_layers * n_kv_heads * head_dim;
}

BackendKvCache::BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, int32_t n_layers,
                               int32_t n_kv_heads, int32_t head_dim, int32_t n_blocks,
                               int32_t block_size)
    : ops_(std::move(ops)),
      dtype_(dtype),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      n_blocks_(n_blocks),
      block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "KV cache needs positive n_blocks and block_size, got {}, {}",
         n_blocks, block_size);
  ops_->kv_dtype_check(dtype);
  block_bytes_ = checked_mul(
      checked_mul(checked_mul(block_size, n_kv_heads, "KV block"), head_dim, "KV block"),
      element_bytes(dtype), "KV block");
  const uint64_t layer_bytes = checked_mul(block_bytes_, int64_t{n_blocks} + 1, "KV cache size");
  checked_mul(checked_mul(layer_bytes, 2, "KV cache size"), n_layers, "KV cache size");
  for (int32_t il = 0; il < n_layers; ++il) {
    k_.push_back(ops_->alloc(layer_bytes));
    v_.push_back(ops_->alloc(layer_bytes));
  }
}

BackendKvCache::~BackendKvCache() {
  ops_->graphs_drop();
}

uint64_t BackendKvCache::bytes() const {
  return k_.size() * 2 * block_bytes_ * static_cast<uint64_t>(n_blocks_);
}

void BackendKvCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    fail(ErrorCode::invalid_argument, "copy_block({}, {}) outside the cache's {} blocks", src, dst,
         n_blocks_);
  for (size_t il = 0; il < k_.size(); ++il) {
    for (const Buffer* store : {&k_[il], &v_[il]}) {
      auto* base = static_cast<uint8_t*>(store->data());
      ops_->copy(base + dst * block_bytes_, base + src * block_bytes_, block_bytes_);
    }
  }
}

KvLayerView BackendKvCache::layer(int32_t il) const {
  return {k_[il].data(), v_[il].data(), dtype_, n_blocks_ + 1, block_size_, n_kv_heads_, head_dim_};
}

}  // namespace memra
