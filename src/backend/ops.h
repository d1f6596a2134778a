// The backend interface the model code is written against (DESIGN.md principle 3): memory that
// lives where the backend computes, per-step metadata handed over once, and the ops. All
// activations are f32, row-major [n_tokens x dim]; weights are TensorViews in any dtype with ggml
// dims (ne[0] = input features, contiguous; ne[1] = output rows). The CPU implementation lives in
// backend/cpu/; the CUDA one (backend/cuda/) adapts the same calls to kernels/.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/step.h"
#include "core/error.h"
#include "core/sampling_math.h"
#include "core/tensor.h"

namespace memra {

// How rotary embeddings pair the dimensions of a head: `neox` rotates (i, i + n_rot/2) (Qwen,
// Gemma, HF layout); `normal` rotates (2i, 2i+1) (GGUF's Llama layout, whose q/k rows are
// permuted so that it matches HF's neox result).
enum class RopeLayout { neox, normal };

struct RopeParams {
  RopeLayout layout = RopeLayout::neox;
  int n_rot = 0;                 // rotated dims per head (<= head_dim, even)
  std::vector<double> inv_freq;  // [n_rot / 2] radians per position, scaling already applied
};

// One layer's paged K and V storage in backend memory: [n_blocks][block_size][n_kv_heads]
// [head_dim] of dtype (f32 on the CPU; f16 by default on CUDA, bf16 or f32 on request).
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::f32;
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

// One linear-attention (gated delta-net) layer's recurrent state in backend memory, f32, per
// state slot (one per running sequence, StepLayout::state_slots): the causal conv's last
// (kernel - 1) inputs [n_slots][kernel - 1][conv_dim] (oldest first) and the delta-rule matrix
// [n_slots][n_v_heads][k_dim][v_dim]. A sequence's first token at position 0 resets its slot.
struct StateLayerView {
  float* conv = nullptr;
  float* ssm = nullptr;
  int32_t n_slots = 0;
  int64_t conv_floats = 0;  // per slot
  int64_t ssm_floats = 0;   // per slot
};

// The gated delta rule's shapes. V head h reads K head h % n_k_heads (llama.cpp's tiled order;
// HF's grouped order is permuted into it at load).
struct DeltaNetParams {
  int n_k_heads = 0;
  int n_v_heads = 0;
  int k_dim = 0;
  int v_dim = 0;
};

// How moe_route picks and weighs each token's experts (the softmax top-k routers of qwen3moe,
// qwen35moe and gemma4).
struct MoeRouteParams {
  int32_t n_expert = 0;
  int32_t k = 0;                 // experts per token, 1..n_expert
  bool normalize = true;         // divide the k probabilities by their sum
  const float* scale = nullptr;  // backend memory [n_expert]: a factor per expert, or null
};

// One matrix of every expert of a stacked weight (ggml dims [n_in, rows, n_expert], expert e's
// rows after expert e - 1's): rows [row_begin, row_begin + n_out) of each expert, so a stacked
// gate-and-up tensor (gemma4) gives its gate and its up half.
struct ExpertMatrix {
  const TensorView* stacked = nullptr;
  int64_t row_begin = 0;
  int64_t n_out = 0;
};

// Expert e's matrix of m as a plain 2-D view of ggml rows (backends whose weights keep the
// file's layout).
inline TensorView expert_view(const ExpertMatrix& m, int64_t e) {
  const TensorView& s = *m.stacked;
  TensorView v = s;
  const uint64_t row_bytes = s.n_bytes / (s.ne[1] * s.ne[2]);
  v.n_dims = 2;
  v.ne[1] = static_cast<uint64_t>(m.n_out);
  v.ne[2] = 1;
  v.n_bytes = static_cast<uint64_t>(m.n_out) * row_bytes;
  v.data = static_cast<const uint8_t*>(s.data) +
           (static_cast<uint64_t>(e) * s.ne[1] + static_cast<uint64_t>(m.row_begin)) * row_bytes;
  return v;
}

// What fixes the shape of a recorded step (Ops::graph_run): who records it (a model), the padded
// token count (= sequences = logit rows), the block-table stride, the context capacity the
// attention grid is sized for, and what the step ends with (logits, or the argmax of the first
// argmax_cols logits of each row when > 0).
struct GraphKey {
  const void* owner = nullptr;
  int32_t n_tokens = 0;
  int32_t max_blocks = 0;
  int32_t max_context = 0;
  int32_t argmax_cols = 0;
  auto operator<=>(const GraphKey&) const = default;
};

struct GraphStats {
  uint64_t recorded = 0;  // recordings made (again after a drop)
  uint64_t failed = 0;    // recordings that failed (those shapes run eagerly)
  uint64_t replays = 0;   // steps replayed from a recording
};

// One step's sampling parameters (Ops::sample_rows), host memory: a RowParams per row, whose
// ranges index the shared penalty, bias and grammar-mask lists.
struct SampleRows {
  std::span<const sampling::RowParams> params;
  std::span<const sampling::Penalty> penalties;
  std::span<const sampling::Bias> bias;
  std::span<const uint64_t> mask_words;
};

// Backend memory (host RAM for the CPU, device memory for CUDA), freed by its owner's deleter.
// Move-only; model code keeps these and passes data() to ops, never dereferencing it itself.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      release_ = std::move(o.release_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  void reset() {
    if (data_ && release_) release_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

// Which ops read a weight (flags).
enum class WeightUse : uint8_t { matmul = 1, rows = 2, matmul_and_rows = 3 };
inline bool reads(WeightUse use, WeightUse op) {
  return (static_cast<uint8_t>(use) & static_cast<uint8_t>(op)) != 0;
}

// A backend: one device (the CPU, or one GPU by ordinal), its memory and the ops model code is
// written against. Pointers passed to ops are backend memory (from alloc() or weight_upload()).
// Ops that need the step's positions, KV slots, block tables, token ids or logit rows read them
// from the last step_begin(), so per-step metadata crosses to the device once per step.
class Ops {
 public:
  virtual ~Ops() = default;

  // ---- device and memory
  virtual std::string name() const = 0;  // "cpu (2 threads)", "cuda:0 NVIDIA H200"
  virtual bool host_memory() const = 0;  // backend pointers are host pointers (the CPU)
  virtual DType kv_dtype_default() const = 0;
  // Refuses a KV dtype the backend's attention cannot read, by name.
  virtual void kv_dtype_check(DType dtype) const = 0;
  virtual Buffer alloc(size_t bytes) = 0;  // uninitialized; throws resource_exhausted naming bytes
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;    // host -> backend
  virtual void download(void* dst, const void* src, size_t bytes) = 0;  // backend -> host, done
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;      // backend -> backend
  // The backend-resident form of a weight in its file dtype (same name, dtype and dims). The CPU
  // reads the archive in place; CUDA uploads a copy it owns for its lifetime, and refuses a dtype
  // it has no kernel for, by name. `use` says which ops will read it: a weight only matmul reads
  // may be stored in a layout of the backend's own (CUDA: tiled K-quant matrices), one that
  // embed reads keeps the file's rows.
  virtual TensorView weight_upload(const TensorView& host, WeightUse use) = 0;

  // Non-empty once the device is unusable (a sticky CUDA error): the reason. Every later step
  // fails; the engine stops serving rather than return wrong tokens.
  virtual std::string fatal_error() const { return {}; }

  // ---- per step
  virtual void step_begin(const StepLayout& step) = 0;

  // ---- graphs: a step replayed as one recorded launch (CUDA graphs on the GPU)
  // True when graph_run() can record and replay (the CPU never does; CUDA unless turned off).
  virtual bool graphs_supported() const { return false; }
  // Runs `forward` (ops only: no host reads or waits) for the step just begun, whose layout is
  // fixed by `key`: every kernel argument, buffer address and metadata offset that `forward`
  // uses must be a function of the key. The first time a key is seen, forward runs eagerly and
  // is then recorded; later steps with that key replay the recording. A recording that fails
  // (any device error, out of memory) leaves that key eager, with one logged line.
  virtual void graph_run(const GraphKey& key, const std::function<void()>& forward) {
    (void)key;
    forward();
  }
  // Forgets every recording: a buffer one of them reads is about to be freed or moved.
  virtual void graphs_drop() {}
  // Counters since the backend was created (all 0 where nothing is recorded).
  virtual GraphStats graph_stats() const { return {}; }

  // ---- ops
  // y[t][o] = sum_i w[o][i] * x[t][i]; x: [n_tokens x w.ne[0]], y: [n_tokens x w.ne[1]].
  virtual void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y) = 0;
  // ys[i] = ws[i] x for several weights over the same x (q/k/v of one input; gate and up), each
  // exactly as matmul() computes it: a backend may prepare x once for all of them.
  virtual void matmul_shared(std::span<const TensorView* const> ws, const float* x,
                             int64_t n_tokens, std::span<float* const> ys) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, n_tokens, ys[i]);
  }
  // out[t] = table row step.tokens[t] as f32, times scale (embedding lookup).
  virtual void embed(const TensorView& table, float scale, float* out) = 0;
  // y = x / rms(x) * w over each row of dim; w may be null (no weight). In place allowed.
  virtual void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps,
                        float* y) = 0;
  // Residual add then norm: x += d; y = rms_norm(x) * w. Fused where the backend can.
  virtual void add_rms_norm(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                            float eps, float* y) {
    add(x, d, n_rows * dim);
    rms_norm(x, w, n_rows, dim, eps, y);
  }
  // Gemma's sandwich norms between two blocks: the block output's post-norm, the residual add, a
  // scale of the residual, the next block's pre-norm: d = rms_norm(d) * w_post (in place);
  // x += d; x *= x_scale unless it is 1; y = rms_norm(x) * w_pre when y is not null. Exactly the
  // plain ops in that order (the default, which the CPU keeps); a backend may fuse them.
  virtual void post_norm_add_norm(float* d, const float* w_post, float* x, float x_scale,
                                  const float* w_pre, float* y, int64_t n_rows, int64_t dim,
                                  float eps) {
    rms_norm(d, w_post, n_rows, dim, eps, d);
    add(x, d, n_rows * dim);
    if (x_scale != 1.0f) scale(x, x_scale, n_rows * dim);
    if (y) rms_norm(x, w_pre, n_rows, dim, eps, y);
  }
  // Two norms of the same rows (Gemma 4's router input and its experts' input): y1 = rms_norm(x) *
  // w1, then y1 *= s1; y2 = rms_norm(x) * w2. Exactly those plain ops (the default); a backend
  // may share the reduction. y1 is what the next op reads (a backend may prepare it for a matmul).
  virtual void rms_norm_dual(const float* x, const float* w1, float s1, float* y1, const float* w2,
                             float* y2, int64_t n_rows, int64_t dim, float eps) {
    rms_norm(x, w1, n_rows, dim, eps, y1);
    scale(y1, s1, n_rows * dim);
    rms_norm(x, w2, n_rows, dim, eps, y2);
  }
  // Rotates x: [step tokens x n_heads x head_dim] in place at the step's positions.
  virtual void rope(float* x, int n_heads, int head_dim, const RopeParams& params) = 0;
  // Writes k, v: [step tokens x n_kv_heads x head_dim] into the step's cache slots.
  virtual void kv_store(const KvLayerView& kv, const float* k, const float* v) = 0;
  // The attention block's prologue: per-head RMS norm of v (v_norm: Gemma 4's), q (q_norm) and k
  // (k_norm), each skipped when null and done in place, rope of q and k at the step's positions,
  // then k and v into the step's cache slots. q: [n_tokens x n_heads x kv.head_dim]; k, v:
  // [n_tokens x kv.n_kv_heads x kv.head_dim]. Exactly the plain ops in that order (the default,
  // which the CPU keeps); a backend may fuse them.
  virtual void qk_norm_rope_store(const KvLayerView& kv, int64_t n_tokens, int n_heads, float* q,
                                  float* k, float* v, const float* q_norm, const float* k_norm,
                                  const float* v_norm, float eps, const RopeParams& params) {
    const int hd = kv.head_dim;
    if (v_norm) rms_norm(v, v_norm, n_tokens * kv.n_kv_heads, hd, eps, v);
    if (q_norm) rms_norm(q, q_norm, n_tokens * n_heads, hd, eps, q);
    if (k_norm) rms_norm(k, k_norm, n_tokens * kv.n_kv_heads, hd, eps, k);
    rope(q, n_heads, hd, params);
    rope(k, kv.n_kv_heads, hd, params);
    kv_store(kv, k, v);
  }
  // Causal attention of q: [step tokens x n_heads x head_dim] over each token's sequence's cached
  // keys and values (which kv_store has already written for this step), through the step's block
  // tables; GQA when n_heads > n_kv_heads. out: [step tokens x n_heads x head_dim].
  virtual void attention(const KvLayerView& kv, const float* q, const AttentionParams& params,
                         float* out) = 0;
  // The prologue (without a v norm) then attention: qk_norm_rope_store(kv, n_tokens, n_heads, q,
  // k, v, q_norm, k_norm, nullptr, eps, rope), then attention(kv, q, params, out) (the default). A
  // backend may run the prologue inside attention's kernel (out and the cache the same bits), and
  // q and k are then left as the caller wrote them: a caller reads only out and the cache after it.
  virtual void qk_prologue_attention(const KvLayerView& kv, int64_t n_tokens, int n_heads, float* q,
                                     float* k, float* v, const float* q_norm, const float* k_norm,
                                     float eps, const RopeParams& rope,
                                     const AttentionParams& params, float* out) {
    qk_norm_rope_store(kv, n_tokens, n_heads, q, k, v, q_norm, k_norm, nullptr, eps, rope);
    attention(kv, q, params, out);
  }
  // Whether attention() has a kernel for this head size with a KV cache of this dtype (the CPU:
  // any). A model with a layer it cannot run is refused at load, naming the size, before any
  // weight moves.
  virtual bool attention_head_dim_supported(int head_dim, DType cache) const {
    (void)head_dim;
    (void)cache;
    return true;
  }
  // out[r] = x[step.logit_rows[r]] over rows of dim: the rows whose logits are wanted.
  virtual void gather_logit_rows(const float* x, int64_t dim, float* out) = 0;
  // ids[r] = the greedy token of row r of x (n_rows rows of stride ld): the first index of the
  // largest of its first n_cols values, as std::max_element over operator< (the CPU sampler's
  // argmax) picks it: NaN never wins, except that a NaN first value makes index 0 the answer.
  // ids: n_rows int32 in backend memory.
  virtual void argmax_rows(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld,
                           int32_t* ids) = 0;

  // The sampling chain for n_rows logit rows (stride ld floats, the first n_cols of each):
  // penalties, bias, grammar mask, temperature, top-k, top-p, min-p and the draw with each row's
  // own uniform, as backend/cpu/sample_chain.h defines it bit for bit. out[r]: the token and the
  // raw statistics for logprobs, in host memory; a backend may set kRowDeferred for a row it
  // leaves to the host chain (the CPU never does). logits: backend memory; rows: host memory.
  virtual bool sample_rows_supported(int64_t n_cols) const {
    (void)n_cols;
    return host_memory();
  }
  virtual void sample_rows(const float* logits, int64_t n_rows, int64_t n_cols, int64_t ld,
                           const SampleRows& rows, std::span<sampling::RowResult> out) {
    (void)logits, (void)n_rows, (void)n_cols, (void)ld, (void)rows, (void)out;
    fail(ErrorCode::unsupported, "the {} backend has no sample_rows op", name());
  }

  // Elementwise helpers over n values.
  virtual void add(float* y, const float* x, int64_t n) = 0;  // y += x
  // y[t][i] += b[i] for n_tokens rows of dim (bias).
  virtual void add_row(float* y, const float* b, int64_t n_tokens, int64_t dim) = 0;
  virtual void scale(float* y, float s, int64_t n) = 0;
  virtual void softcap(float* y, float cap, int64_t n) = 0;  // y = cap * tanh(y / cap)
  // out = act(gate) * up over n_rows dense rows of n_cols; act = silu, or gelu with the tanh
  // approximation. out may be gate. The values are elementwise; the rows say what the next matmul
  // reads, for a backend that would prepare its input here (none does: CUDA's one-block-a-row
  // version measured slower, and so did a cluster of 8 blocks a row, docs/PERFORMANCE.md seventh
  // and twenty-ninth rounds).
  virtual void silu_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                        float* out) = 0;
  virtual void gelu_tanh_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                             float* out) = 0;

  // ---- linear attention (Qwen3.5's gated delta-net layers) and gated attention output
  // True when the four ops below are implemented (the CPU and CUDA backends); a model that needs
  // them refuses a backend without them at load, naming them. Their defaults refuse by name.
  virtual bool linear_attention_supported() const { return false; }
  // Whether gated_delta_rule() has a kernel for key heads of k_dim (the CPU: any); checked at load
  // with the above.
  virtual bool delta_rule_k_dim_supported(int k_dim) const {
    (void)k_dim;
    return true;
  }
  // Causal depthwise conv over each sequence's tokens, then SiLU: y[t][c] = silu(sum_j
  // w[c][j] * x[t - (kernel - 1) + j][c]), earlier inputs from the slot's conv state (zeros
  // before position 0), which then holds the last kernel - 1 inputs. x, y: [step tokens x dim];
  // w: [dim x kernel] f32 (ggml ne {kernel, dim}).
  virtual void ssm_conv(const StateLayerView& state, const float* x, int64_t dim, int kernel,
                        const float* w, float* y) {
    (void)state, (void)x, (void)dim, (void)kernel, (void)w, (void)y;
    refuse_op("ssm_conv");
  }
  // The gated delta rule over each sequence's tokens in order, from and into the slot's state.
  // qkv: [step tokens x (2 n_k k_dim + n_v v_dim)] (q, k, v after ssm_conv); a, b: [step tokens x
  // n_v] raw projections; A: [n_v] (= -exp(A_log)), dt_bias: [n_v]. Per token and v head:
  // q, k l2-normalized (eps 1e-6), q scaled by k_dim^-0.5, decay = exp(A softplus(a + dt_bias)),
  // beta = sigmoid(b); S = decay S; S += k (beta (v - S^T k))^T; out = S^T q.
  // out: [step tokens x n_v v_dim].
  virtual void gated_delta_rule(const StateLayerView& state, const float* qkv, const float* a,
                                const float* b, const float* A, const float* dt_bias,
                                const DeltaNetParams& params, float* out) {
    (void)state, (void)qkv, (void)a, (void)b, (void)A, (void)dt_bias, (void)params, (void)out;
    refuse_op("gated_delta_rule");
  }
  // y = rms_norm(x) * w * silu(z) over rows of dim (the delta-net's gated output norm).
  virtual void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows,
                              int64_t dim, float eps, float* y) {
    (void)x, (void)w, (void)z, (void)n_rows, (void)dim, (void)eps, (void)y;
    refuse_op("rms_norm_gated");
  }
  // y *= sigmoid(gate) over n values (the gated attention output).
  virtual void sigmoid_mul(float* y, const float* gate, int64_t n) {
    (void)y, (void)gate, (void)n;
    refuse_op("sigmoid_mul");
  }

  // ---- mixture of experts. Each of a step's n tokens picks k experts; the (token, expert)
  // pairs, token-major (pair t k + j), are the rows the experts run on.
  // Whether moe_route runs routers of n_expert experts, k a token (checked at load; the default
  // ops below refuse every MoE model).
  virtual bool moe_route_supported(int n_expert, int k) const {
    (void)n_expert, (void)k;
    return false;
  }
  // Per token t: the softmax of logits[t][0, n_expert) in double, its k largest probabilities
  // (ties: the lower expert), each divided by the k's sum when p.normalize, times p.scale[e]:
  // ids[t k + j] and weights[t k + j] for j < k, in increasing expert index (the order
  // moe_combine adds them in). A NaN probability ranks last.
  virtual void moe_route(const float* logits, int64_t n_tokens, const MoeRouteParams& p,
                         int32_t* ids, float* weights) {
    (void)logits, (void)n_tokens, (void)p, (void)ids, (void)weights;
    refuse_op("moe_route", "mixture of experts");
  }
  // ys[i] row p = expert ids[p]'s matrix of ws[i] times x row p / x_div, for p < n_pairs (x_div:
  // k when a token's pairs all read its row, 1 when each pair has its own row); each row exactly
  // as matmul() computes it over that expert's matrix, whatever else shares the step.
  virtual void matmul_experts(std::span<const ExpertMatrix> ws, const float* x, int x_div,
                              const int32_t* ids, int64_t n_pairs, std::span<float* const> ys) {
    (void)ws, (void)x, (void)x_div, (void)ids, (void)n_pairs, (void)ys;
    refuse_op("matmul_experts", "mixture of experts");
  }
  // Whether matmul_experts over w for up to n_pairs pairs keeps ids on the device (no host read):
  // only then may a step with MoE layers be recorded as a graph.
  virtual bool matmul_experts_on_device(const ExpertMatrix& w, int64_t n_pairs) const {
    (void)w, (void)n_pairs;
    return false;
  }
  // out[t] = the sum over j < k of weights[t k + j] * y row t k + j (rows of dim): each product
  // rounded to f32, added in j order starting from the first product (not from +0).
  virtual void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k,
                           int64_t dim, float* out) {
    (void)y, (void)weights, (void)n_tokens, (void)k, (void)dim, (void)out;
    refuse_op("moe_combine", "mixture of experts");
  }
  // y row r *= sigmoid(g[r]) (computed in double, rounded to f32) for n_rows rows of dim: the
  // shared expert's gate.
  virtual void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim) {
    (void)y, (void)g, (void)n_rows, (void)dim;
    refuse_op("sigmoid_scale_rows", "mixture of experts");
  }

 private:
  [[noreturn]] void refuse_op(const char* op, const char* feature = "linear attention") const {
    fail(ErrorCode::unsupported, "the {} backend has no {} op ({})", name(), op, feature);
  }
};

struct CpuOpsOptions {
  int n_threads = 0;       // 0 = hardware concurrency
  bool reference = false;  // plain loops: dequantize_row + double accumulation everywhere
};

// The CPU backend: a persistent thread pool splits matmul rows and attention heads. The fast
// path (reference = false) keeps activations in f32: quantized weight rows are expanded to f32 by
// SIMD code and dotted in f32 (8-bit activations lost next-token agreement on Gemma 3 270M); it
// is tested against the reference path (tests/models/ops_test.cpp).
std::unique_ptr<Ops> ops_cpu_create(const CpuOpsOptions& options);

}  // namespace memra
