// The CPU backend's paged KV cache: per layer, K and V of [n_blocks][block_size][n_kv_heads]
// [head_dim] f32. f32 rather than f16 because the CPU backend is the oracle (the model gate
// compares against float32 transformers at 1e-4), and at CPU-served sizes the cache is small
// (Gemma 3 270M: 36 KiB per token).
#pragma once

#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace memra {

class CpuKvCache final : public KvCache {
 public:
  CpuKvCache(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t n_blocks,
             int32_t block_size);

  int32_t block_size() const override { return block_size_; }
  int32_t n_blocks() const override { return n_blocks_; }
  uint64_t bytes() const override;
  void copy_block(int32_t src, int32_t dst) override;

  KvLayerView layer(int32_t il);

 private:
  int32_t n_kv_heads_, head_dim_, n_blocks_, block_size_;
  int64_t block_floats_;                   // floats per block per layer for K (same for V)
  std::vector<std::vector<float>> k_, v_;  // [n_layers][n_blocks * block_floats_]
};

}  // namespace memra
