// The backend ops interface the model code is written against (DESIGN.md principle 3). All
// activations are f32, row-major [n_tokens x dim]; weights are TensorViews in any dtype with ggml
// dims (ne[0] = input features, contiguous; ne[1] = output rows). The CPU implementation lives in
// backend/cpu/; a CUDA implementation adapts the same calls to kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace memra {

struct BatchSeq;

// How rotary embeddings pair the dimensions of a head: `neox` rotates (i, i + n_rot/2) (Qwen,
// Gemma, HF layout); `normal` rotates (2i, 2i+1) (GGUF's Llama layout, whose q/k rows are
// permuted so that it matches HF's neox result).
enum class RopeLayout { neox, normal };

struct RopeParams {
  RopeLayout layout = RopeLayout::neox;
  int n_rot = 0;                 // rotated dims per head (<= head_dim, even)
  std::vector<double> inv_freq;  // [n_rot / 2] radians per position, scaling already applied
};

// One layer's paged K or V storage: [n_blocks][block_size][n_kv_heads][head_dim] f32.
struct KvLayerView {
  float* k = nullptr;
  float* v = nullptr;
  int32_t n_blocks = 0;
  int32_t block_size = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

struct AttentionParams {
  int n_heads = 0;
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // tanh soft-capping of scores when > 0 (score = c * tanh(s / c))
  int32_t window = 0;    // sliding window in tokens (query sees keys p - window < j <= p); 0 = all
};

class Ops {
 public:
  virtual ~Ops() = default;

  // y[t][o] = sum_i w[o][i] * x[t][i]; x: [n_tokens x w.ne[0]], y: [n_tokens x w.ne[1]].
  virtual void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y) = 0;
  // out[r] = table row ids[r] as f32 (embedding lookup); ids are checked against table.ne[1].
  virtual void get_rows(const TensorView& table, std::span<const int32_t> ids, float* out) = 0;
  // y = x / rms(x) * w over each row of dim; w may be null (no weight). In place allowed.
  virtual void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps,
                        float* y) = 0;
  // Rotates x: [n_tokens x n_heads x head_dim] in place at the tokens' positions.
  virtual void rope(float* x, int64_t n_tokens, int n_heads, int head_dim,
                    std::span<const int32_t> positions, const RopeParams& params) = 0;
  // Writes k, v: [n_tokens x n_kv_heads x head_dim] of batch tokens into their cache slots.
  virtual void kv_store(const KvLayerView& kv, std::span<const BatchSeq> seqs, const float* k,
                        const float* v) = 0;
  // Causal attention of q: [n_tokens x n_heads x head_dim] over each sequence's cached keys and
  // values (which kv_store has already written for this step); GQA when n_heads > n_kv_heads.
  // out: [n_tokens x n_heads x head_dim].
  virtual void attention(const KvLayerView& kv, std::span<const BatchSeq> seqs, const float* q,
                         const AttentionParams& params, float* out) = 0;

  // Elementwise helpers over n values.
  virtual void add(float* y, const float* x, int64_t n) = 0;  // y += x
  // y[t][i] += b[i] for n_tokens rows of dim (bias).
  virtual void add_row(float* y, const float* b, int64_t n_tokens, int64_t dim) = 0;
  virtual void scale(float* y, float s, int64_t n) = 0;
  virtual void softcap(float* y, float cap, int64_t n) = 0;  // y = cap * tanh(y / cap)
  // out = act(gate) * up over n values; act = silu, or gelu with the tanh approximation.
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
  virtual void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
};

struct CpuOpsOptions {
  int n_threads = 0;       // 0 = hardware concurrency
  bool reference = false;  // plain loops: dequantize_row + double accumulation everywhere
};

// The CPU backend: a persistent thread pool splits matmul rows and attention heads. The fast
// path (reference = false) quantizes activations to 8-bit blocks for quantized weights and uses
// SIMD dot products; it is tested against the reference path (tests/models/ops_test.cpp).
std::unique_ptr<Ops> ops_cpu_create(const CpuOpsOptions& options);

}  // namespace memra
