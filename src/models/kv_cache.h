// The paged KV cache of a decoder model in backend memory: per layer, K and V of [n_blocks]
// [block_size][n_kv_heads][head_dim] in the cache dtype (f32 on the CPU, the oracle's precision;
// f16 by default on CUDA). Allocated by the model's backend, so it lives where attention runs.
// One block past the n_blocks the engine manages is the scratch block: the padding tokens of a
// graph-replayed decode step write and read it, and no sequence ever owns it. Likewise one state
// slot past the n_state_slots the engine manages is the padding sequences' scratch state slot.
// Each layer has its own KV shape (KvLayerShape); an empty shape means the layer keeps no KV:
// a hybrid model's linear-attention layers (qwen35), which hold a fixed-size f32 state per state
// slot instead (ops.h StateLayerView: one slot per running sequence, then the prefix cache's
// snapshot slots), and gemma4's KV-sharing layers, which attend over an earlier layer's KV.
#pragma once

#include <memory>
#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace memra {

// One layer's KV shape; empty (n_kv_heads 0) where the layer keeps no KV.
struct KvLayerShape {
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;

  bool empty() const { return n_kv_heads == 0 || head_dim == 0; }
};

// The recurrent state of a hybrid model's linear-attention layers: which layers, the floats of
// one slot's conv and delta-rule state per layer, and the slot count.
struct RecurrentStateShape {
  std::vector<bool> layers;  // [n_layers] true where the layer keeps state (its KV shape empty)
  int64_t conv_floats = 0;
  int64_t ssm_floats = 0;
  int32_t n_slots = 0;

  // Bytes of one slot over every state layer.
  uint64_t bytes_per_slot() const;
};

class BackendKvCache final : public KvCache {
 public:
  // shapes: one per layer (its size is the layer count). Throws invalid_argument for non-positive
  // sizes or an overflowing total, internal where a state layer has a KV shape, and the
  // backend's resource_exhausted (naming bytes) when it cannot allocate.
  BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, std::vector<KvLayerShape> shapes,
                 int32_t n_blocks, int32_t block_size, const RecurrentStateShape& state = {});
  // Recorded graphs point into this cache: the backend forgets them.
  ~BackendKvCache() override;
  BackendKvCache(const BackendKvCache&) = delete;
  BackendKvCache& operator=(const BackendKvCache&) = delete;

  int32_t block_size() const override { return block_size_; }
  int32_t n_blocks() const override { return n_blocks_; }
  uint64_t bytes() const override;  // of the n_blocks blocks (the scratch block not counted)
  void copy_block(int32_t src, int32_t dst) override;

  int32_t n_state_slots() const override { return state_.n_slots; }  // the scratch not counted
  uint64_t state_bytes() const override { return state_.bytes_per_slot() * state_.n_slots; }
  // Backend to backend (CPU: memcpy; CUDA: device to device on the step stream, so it lands
  // after the step that wrote src and before the next step reads dst).
  void copy_state_slot(int32_t src, int32_t dst) override;

  KvLayerView layer(int32_t il) const;     // its n_blocks counts the scratch block
  StateLayerView state(int32_t il) const;  // a linear-attention layer's slots, the scratch's too
  int32_t scratch_block() const { return n_blocks_; }
  int32_t scratch_state_slot() const { return state_.n_slots > 0 ? state_.n_slots : -1; }
  const Ops* owner() const { return ops_.get(); }

  // Bytes one token slot takes for K and V across the layers (empty shapes take none).
  static uint64_t bytes_per_token(DType dtype, const std::vector<KvLayerShape>& shapes);

 private:
  std::shared_ptr<Ops> ops_;
  DType dtype_;
  std::vector<KvLayerShape> shapes_;  // [n_layers]
  int32_t n_blocks_, block_size_;
  std::vector<uint64_t> block_bytes_;  // [n_layers] bytes per block for K (same for V); 0 = no KV
  std::vector<Buffer> k_, v_;          // [n_layers]; empty where the layer keeps no KV
  RecurrentStateShape state_;
  std::vector<Buffer> conv_, ssm_;  // [n_layers] when any layer keeps state; empty elsewhere
};

}  // namespace memra
