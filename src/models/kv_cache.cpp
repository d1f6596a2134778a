// BackendKvCache: sizes are checked before allocation (n_blocks and block_size come from the
// engine and, through it, from user flags).
#include "models/kv_cache.h"

#include <algorithm>

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

uint64_t RecurrentStateShape::bytes_per_slot() const {
  const uint64_t layers_with_state = std::count(layers.begin(), layers.end(), true);
  return layers_with_state * uint64_t(conv_floats + ssm_floats) * sizeof(float);
}

BackendKvCache::BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, int32_t n_layers,
                               int32_t n_kv_heads, int32_t head_dim, int32_t n_blocks,
                               int32_t block_size, const RecurrentStateShape& state)
    : ops_(std::move(ops)),
      dtype_(dtype),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      n_blocks_(n_blocks),
      block_size_(block_size),
      state_(state) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "KV cache needs positive n_blocks and block_size, got {}, {}",
         n_blocks, block_size);
  ops_->kv_dtype_check(dtype);
  block_bytes_ = checked_mul(
      checked_mul(checked_mul(block_size, n_kv_heads, "KV block"), head_dim, "KV block"),
      element_bytes(dtype), "KV block");
  const uint64_t layer_bytes = checked_mul(block_bytes_, int64_t{n_blocks} + 1, "KV cache size");
  checked_mul(checked_mul(layer_bytes, 2, "KV cache size"), n_layers, "KV cache size");
  if (!state_.layers.empty() && state_.layers.size() != static_cast<size_t>(n_layers))
    fail(ErrorCode::internal, "recurrent state shape names {} layers of {}", state_.layers.size(),
         n_layers);
  const bool any_state = std::count(state_.layers.begin(), state_.layers.end(), true) > 0;
  if (any_state && state_.n_slots <= 0)
    fail(ErrorCode::invalid_argument, "a model with linear-attention layers needs state slots");
  const uint64_t conv_bytes = checked_mul(checked_mul(state_.conv_floats, sizeof(float), "state"),
                                          std::max(state_.n_slots, 1), "state size");
  const uint64_t ssm_bytes = checked_mul(checked_mul(state_.ssm_floats, sizeof(float), "state"),
                                         std::max(state_.n_slots, 1), "state size");
  for (int32_t il = 0; il < n_layers; ++il) {
    if (!state_.layers.empty() && state_.layers[il]) {
      kv_index_.push_back(-1);
      state_index_.push_back(static_cast<int32_t>(conv_.size()));
      conv_.push_back(ops_->alloc(conv_bytes));
      ssm_.push_back(ops_->alloc(ssm_bytes));
      continue;
    }
    state_index_.push_back(-1);
    kv_index_.push_back(static_cast<int32_t>(k_.size()));
    k_.push_back(ops_->alloc(layer_bytes));
    v_.push_back(ops_->alloc(layer_bytes));
  }
  if (!any_state) state_.n_slots = 0;
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
  const int32_t i = kv_index_.at(static_cast<size_t>(il));
  if (i < 0) fail(ErrorCode::internal, "layer {} is a linear-attention layer: it has no KV", il);
  return {k_[i].data(), v_[i].data(), dtype_, n_blocks_ + 1, block_size_, n_kv_heads_, head_dim_};
}

StateLayerView BackendKvCache::state(int32_t il) const {
  const int32_t i = state_index_.at(static_cast<size_t>(il));
  if (i < 0) fail(ErrorCode::internal, "layer {} is an attention layer: it keeps no state", il);
  return {conv_[i].f32(), ssm_[i].f32(), state_.n_slots, state_.conv_floats, state_.ssm_floats};
}

}  // namespace memra
