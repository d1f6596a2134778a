// BackendKvCache: sizes are checked before allocation (n_blocks and block_size come from the
// engine and, through it, from user flags).
#include "models/kv_cache.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"

namespace memra {

namespace {

// Bytes of one K or V element: 4, 2, or 1 (F8_E4M3). Copies of blocks (prefix cache,
// preemption) move bytes and need nothing else per type.
uint64_t element_bytes(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f8_e4m3)
    fail(ErrorCode::unsupported, "KV cache dtype {} is not supported (F32, F16, BF16, F8_E4M3)",
         dtype_name(dtype));
  return dtype_traits(dtype).type_size;
}

}  // namespace

uint64_t BackendKvCache::bytes_per_token(DType dtype, const std::vector<KvLayerShape>& shapes) {
  uint64_t total = 0;
  for (const KvLayerShape& s : shapes)
    if (!s.empty()) total += uint64_t{2} * element_bytes(dtype) * s.n_kv_heads * s.head_dim;
  return total;
}

uint64_t RecurrentStateShape::bytes_per_slot() const {
  const uint64_t layers_with_state = std::count(layers.begin(), layers.end(), true);
  return layers_with_state * uint64_t(conv_floats + ssm_floats) * sizeof(float);
}

BackendKvCache::BackendKvCache(std::shared_ptr<Ops> ops, DType dtype,
                               std::vector<KvLayerShape> shapes, int32_t n_blocks,
                               int32_t block_size, const RecurrentStateShape& state)
    : ops_(std::move(ops)),
      dtype_(dtype),
      shapes_(std::move(shapes)),
      n_blocks_(n_blocks),
      block_size_(block_size),
      state_(state) {
  if (n_blocks <= 0 || block_size <= 0)
    fail(ErrorCode::invalid_argument, "KV cache needs positive n_blocks and block_size, got {}, {}",
         n_blocks, block_size);
  ops_->kv_dtype_check(dtype);
  const size_t n_layers = shapes_.size();
  if (!state_.layers.empty() && state_.layers.size() != n_layers)
    fail(ErrorCode::internal, "recurrent state shape names {} layers of {}", state_.layers.size(),
         n_layers);
  const bool any_state = std::count(state_.layers.begin(), state_.layers.end(), true) > 0;
  if (any_state && state_.n_slots <= 0)
    fail(ErrorCode::invalid_argument, "a model with linear-attention layers needs state slots");
  // Every size is checked before anything is allocated.
  uint64_t total = 0;
  for (size_t il = 0; il < n_layers; ++il) {
    const KvLayerShape& s = shapes_[il];
    if (s.n_kv_heads < 0 || s.head_dim < 0)
      fail(ErrorCode::internal, "layer {}: negative KV shape {} x {}", il, s.n_kv_heads,
           s.head_dim);
    if (any_state && state_.layers[il] && !s.empty())
      fail(ErrorCode::internal, "layer {} keeps a recurrent state and cannot also have KV", il);
    const uint64_t block =
        s.empty() ? 0
                  : checked_mul(checked_mul(checked_mul(block_size, s.n_kv_heads, "KV block"),
                                            s.head_dim, "KV block"),
                                element_bytes(dtype), "KV block");
    block_bytes_.push_back(block);
    const uint64_t layer_bytes = checked_mul(block, int64_t{n_blocks} + 1, "KV cache size");
    total = checked_add(total, checked_mul(layer_bytes, 2, "KV cache size"), "KV cache size");
  }
  // n_slots + 1: the last is the scratch slot (graph padding).
  const uint64_t conv_bytes = checked_mul(checked_mul(state_.conv_floats, sizeof(float), "state"),
                                          std::max(state_.n_slots, 1) + 1, "state size");
  const uint64_t ssm_bytes = checked_mul(checked_mul(state_.ssm_floats, sizeof(float), "state"),
                                         std::max(state_.n_slots, 1) + 1, "state size");
  for (size_t il = 0; il < n_layers; ++il) {
    const uint64_t layer_bytes = block_bytes_[il] * (uint64_t(n_blocks) + 1);
    k_.push_back(layer_bytes ? ops_->alloc(layer_bytes) : Buffer{});
    v_.push_back(layer_bytes ? ops_->alloc(layer_bytes) : Buffer{});
    if (!any_state) continue;
    const bool has_state = state_.layers[il];
    conv_.push_back(has_state ? ops_->alloc(conv_bytes) : Buffer{});
    ssm_.push_back(has_state ? ops_->alloc(ssm_bytes) : Buffer{});
  }
  if (!any_state) state_.n_slots = 0;
}

BackendKvCache::~BackendKvCache() {
  ops_->graphs_drop();
}

uint64_t BackendKvCache::bytes() const {
  uint64_t total = 0;
  for (const uint64_t b : block_bytes_) total += 2 * b * static_cast<uint64_t>(n_blocks_);
  return total;
}

void BackendKvCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    fail(ErrorCode::invalid_argument, "copy_block({}, {}) outside the cache's {} blocks", src, dst,
         n_blocks_);
  for (size_t il = 0; il < k_.size(); ++il) {
    const uint64_t b = block_bytes_[il];
    if (b == 0) continue;
    for (const Buffer* store : {&k_[il], &v_[il]}) {
      auto* base = static_cast<uint8_t*>(store->data());
      ops_->copy(base + dst * b, base + src * b, b);
    }
  }
}

void BackendKvCache::copy_state_slot(int32_t src, int32_t dst) {
  if (src < 0 || src >= state_.n_slots || dst < 0 || dst >= state_.n_slots)
    fail(ErrorCode::invalid_argument, "copy_state_slot({}, {}) outside the cache's {} state slots",
         src, dst, state_.n_slots);
  if (src == dst) return;
  const uint64_t conv = uint64_t(state_.conv_floats) * sizeof(float);
  const uint64_t ssm = uint64_t(state_.ssm_floats) * sizeof(float);
  for (size_t il = 0; il < conv_.size(); ++il) {
    if (!state_.layers[il]) continue;
    auto* c = static_cast<uint8_t*>(conv_[il].data());
    auto* m = static_cast<uint8_t*>(ssm_[il].data());
    ops_->copy(c + dst * conv, c + src * conv, conv);
    ops_->copy(m + dst * ssm, m + src * ssm, ssm);
  }
}

KvLayerView BackendKvCache::layer(int32_t il) const {
  const KvLayerShape& s = shapes_.at(static_cast<size_t>(il));
  if (s.empty())
    fail(ErrorCode::internal,
         "layer {} keeps no KV (a linear-attention layer, or one that reads another layer's)", il);
  return {k_[il].data(), v_[il].data(), dtype_,    n_blocks_ + 1,
          block_size_,   s.n_kv_heads,  s.head_dim};
}

StateLayerView BackendKvCache::state(int32_t il) const {
  if (conv_.empty() || !state_.layers.at(static_cast<size_t>(il)))
    fail(ErrorCode::internal, "layer {} is an attention layer: it keeps no state", il);
  return {conv_[il].f32(), ssm_[il].f32(), state_.n_slots + 1, state_.conv_floats,
          state_.ssm_floats};
}

}  // namespace memra
