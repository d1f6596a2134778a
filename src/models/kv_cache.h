// The paged KV cache of a decoder model in backend memory: per layer, K and V of [n_blocks]
// [block_size][n_kv_heads][head_dim] in the cache dtype (f32 on the CPU, the oracle's precision;
// f16 by default on CUDA). Allocated by the model's backend, so it lives where attention runs.
// One block past the n_blocks the engine manages is the scratch block: the padding tokens of a
// graph-replayed decode step write and read it, and no sequence ever owns it.
#pragma once

#include <memory>
#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace memra {

// One layer's KV shape; a layer with n_kv_heads 0 keeps no KV (gemma4's KV-sharing layers read
// another layer's).
struct KvLayerShape {
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

class BackendKvCache final : public KvCache {
 public:
  // Throws invalid_argument for non-positive sizes or an overflowing total, and the backend's
  // resource_exhausted (naming bytes) when it cannot allocate.
  BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, int32_t n_layers, int32_t n_kv_heads,
                 int32_t head_dim, int32_t n_blocks, int32_t block_size);
  // Layers of different shapes (gemma4: per-layer head dims and kv heads, shared layers empty).
  BackendKvCache(std::shared_ptr<Ops> ops, DType dtype, std::vector<KvLayerShape> shapes,
                 int32_t n_blocks, int32_t block_size);
  // Recorded graphs point into this cache: the backend forgets them.
  ~BackendKvCache() override;
  BackendKvCache(const BackendKvCache&) = delete;
  BackendKvCache& operator=(const BackendKvCache&) = delete;

  int32_t block_size() const override { return block_size_; }
  int32_t n_blocks() const override { return n_blocks_; }
  uint64_t bytes() const override;  // of the n_blocks blocks (the scratch block not counted)
  void copy_block(int32_t src, int32_t dst) override;

  KvLayerView layer(int32_t il) const;  // its n_blocks counts the scratch block
  int32_t scratch_block() const { return n_blocks_; }
  const Ops* owner() const { return ops_.get(); }

  // Bytes one token slot takes across n_layers for K and V.
  static uint64_t bytes_per_token(DType dtype, int32_t n_layers, int32_t n_kv_heads,
                                  int32_t head_dim);
  static uint64_t bytes_per_token(DType dtype, const std::vector<KvLayerShape>& shapes);

 private:
  std::shared_ptr<Ops> ops_;
  DType dtype_;
  std::vector<KvLayerShape> shapes_;
  int32_t n_blocks_, block_size_;
  std::vector<uint64_t> block_bytes_;  // per layer: bytes per block for K (same for V)
  std::vector<Buffer> k_, v_;
};

}  // namespace memra
