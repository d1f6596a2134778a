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

uint64_t BackendKvCache::bytes_per_token(DType dtype, const std::vector<KvLayerShape>& shapes) {
  uint64_t total = 0;
  for (const KvLayerShape& s : shapes)
    total += uint64_t{2} * element_bytes(dtype) * s.n_kv_heads * s.head_dim;
  return total;
}

BackendKvCache::BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, int32_t n_layers,
                               int32_t n_kv_heads, int32_t head_dim, int32_t n_blocks,
                               int32_t block_size)
    : BackendKvCache(std::move(ops), dtype,
                     std::vector<KvLayerShape>(n_layers > 0 ? n_layers : 0,
                                               KvLayerShape{n_kv_heads, head_dim}),
                     n_blocks, block_size) {}

BackendKvCache::BackendKvCache(std::shared_ptr<Ops> ops, DType dtype,
                               std::vector<KvLayerShape> shapes, int32_t n_blocks,
                               int32_t block_size)
    : ops_(std::move(ops)),
      dtype_(dtype),
      shapes_(std::move(shapes)),
      n_blocks_(n_blocks),
      block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "KV cache needs positive n_blocks and block_size, got {}, {}",
         n_blocks, block_size);
  ops_->kv_dtype_check(dtype);
  uint64_t total = 0;
  for (const KvLayerShape& s : shapes_) {
    const uint64_t block = checked_mul(
        checked_mul(checked_mul(block_size, s.n_kv_heads, "KV block"), s.head_dim, "KV block"),
        element_bytes(dtype), "KV block");
    block_bytes_.push_back(block);
    const uint64_t layer_bytes = checked_mul(block, int64_t{n_blocks} + 1, "KV cache size");
    total = checked_add(total, checked_mul(layer_bytes, 2, "KV cache size"), "KV cache size");
  }
  for (size_t il = 0; il < shapes_.size(); ++il) {
    const uint64_t layer_bytes = block_bytes_[il] * (uint64_t(n_blocks) + 1);
    k_.push_back(layer_bytes ? ops_->alloc(layer_bytes) : Buffer{});
    v_.push_back(layer_bytes ? ops_->alloc(layer_bytes) : Buffer{});
  }
}

BackendKvCache::~BackendKvCache() {
  ops_->graphs_drop();
}

uint64_t BackendKvCache::bytes() const {
  uint64_t total = 0;
  for (uint64_t b : block_bytes_) total += 2 * b * static_cast<uint64_t>(n_blocks_);
  return total;
}

void BackendKvCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    fail(ErrorCode::invalid_argument, "copy_block({}, {}) outside the cache's {} blocks", src, dst,
         n_blocks_);
  for (size_t il = 0; il < k_.size(); ++il) {
    if (block_bytes_[il] == 0) continue;
    const uint64_t b = block_bytes_[il];
    for (const Buffer* store : {&k_[il], &v_[il]}) {
      auto* base = static_cast<uint8_t*>(store->data());
      ops_->copy(base + dst * b, base + src * b, b);
    }
  }
}

KvLayerView BackendKvCache::layer(int32_t il) const {
  return {k_[il].data(),          v_[il].data(),       dtype_, n_blocks_ + 1, block_size_,
          shapes_[il].n_kv_heads, shapes_[il].head_dim};
}

}  // namespace memra
