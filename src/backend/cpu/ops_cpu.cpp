// The CPU implementation of the ops interface. Two modes share one class: the reference mode
// (plain loops, weight rows through quant::dequantize_row, double accumulation) is the oracle;
// the fast mode (weight rows expanded to f32 by SIMD code once per chunk of tokens, f32
// activations, FMA dots) is what serving uses. Both split work over a persistent thread pool.
// Backend memory is host memory: weights are read in place from the mapped archive.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "backend/cpu/attention_cpu.h"
#include "backend/cpu/dequant_dot.h"
#include "backend/cpu/dot_tile.h"
#include "backend/cpu/linear_attention_cpu.h"
#include "backend/cpu/moe_cpu.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/sample_chain.h"
#include "backend/cpu/thread_pool.h"
#include "backend/expert_groups.h"
#include "backend/ops.h"
#include "core/error.h"
#include "formats/quant.h"

namespace memra {

namespace {

// Rows of the weight one task handles: enough tasks to balance threads, and for batched inputs
// few enough rows that they stay in L1/L2 while every token of the batch passes over them.
int64_t rows_per_task(int64_t n_rows, int64_t n_tokens, int n_threads) {
  int64_t rows = std::max<int64_t>(1, n_rows / (int64_t{n_threads} * 16));
  if (n_tokens > 1) rows = std::min<int64_t>(rows, 16);
  return std::max<int64_t>(rows, 4);
}

// An element-wise op's elements per task: the gated activations and the logits' softcap call libm
// per element (~20 ns), so a prompt step's activations (512 x 2,048 for Gemma 3 270M: ~10% of its
// time on one thread) and a step's softcapped logits (262,144 a row for Gemma 4) split over the
// pool, while a decode step's few thousand activations stay on the calling thread, where a pool
// round trip would cost more than it saves. Each element's expression is unchanged: the same
// bits.
constexpr int64_t kElementsPerTask = 16384;

class CpuOps final : public Ops {
 public:
  explicit CpuOps(const CpuOpsOptions& options)
      : pool_(options.n_threads > 0
                  ? options.n_threads
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
        reference_(options.reference),
        scratch_(pool_.n_threads()) {}

  std::string name() const override {
    return "cpu (" + std::to_string(pool_.n_threads()) + " threads" +
           (reference_ ? ", reference" : "") + ")";
  }
  bool host_memory() const override { return true; }
  DType kv_dtype_default() const override { return DType::f32; }
  void kv_dtype_check(DType dtype) const override {
    // F8_E4M3 as the CUDA backend stores it (core/fp8.h), a quarter of F32's bytes: the oracle
    // of that cache type's GPU gate and of its accuracy on real weights.
    if (dtype != DType::f32 && dtype != DType::f8_e4m3)
      fail(ErrorCode::unsupported, "the CPU backend keeps its KV cache in F32 or F8_E4M3, not {}",
           dtype_name(dtype));
  }
  Buffer alloc(size_t bytes) override {
    // 64-byte aligned for the SIMD kernels; size rounded up as aligned_alloc requires.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) fail(ErrorCode::resource_exhausted, "cannot allocate {} bytes of host memory", bytes);
    return Buffer(p, bytes, [](void* q) { std::free(q); });
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  TensorView weight_upload(const TensorView& host, WeightUse) override {
    if (!quant::can_dequantize(host.dtype))
      fail(ErrorCode::unsupported, "tensor {} has dtype {}, which the CPU backend cannot read",
           host.name, dtype_name(host.dtype));
    return host;
  }

  void step_begin(const StepLayout& step) override { step_ = step; }

  void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y) override {
    const int64_t n_in = static_cast<int64_t>(w.ne[0]);
    const int64_t n_out = static_cast<int64_t>(w.n_rows());
    if (n_tokens <= 0) return;
    const uint64_t row_bytes = dtype_row_bytes(w.dtype, w.ne[0], w.name);
    // One token (a decode step): rows dotted a few at a time, dequantized in registers, with the
    // bits the paths below give each row (dequant_dot.h).
    if (!reference_ && n_tokens == 1 && cpu::has_token_rows_dot(w.dtype)) {
      matmul_token(w, row_bytes, x, y);
      return;
    }
    // Quantized rows are expanded to f32 once and dotted with f32 activations (int8 activations
    // were faster but lost next-token agreement with transformers on Gemma 3 270M: 95%
    // teacher-forced vs 100%, its activations have outliers). Plain float types and Q8_0 dot
    // their rows directly with f32 activations.
    if (reference_ || !cpu::has_fast_dot(w.dtype) ||
        cpu::act_format_for(w.dtype) != cpu::ActFormat::f32) {
      matmul_dequant(w, row_bytes, x, n_tokens, y, reference_);
      return;
    }
    const size_t act_stride = n_in * sizeof(float);
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    const auto* abytes = reinterpret_cast<const uint8_t*>(x);
    const int64_t chunk = rows_per_task(n_out, n_tokens, pool_.n_threads());
    pool_.parallel_for((n_out + chunk - 1) / chunk, [&](int64_t task, int) {
      const int64_t r0 = task * chunk, r1 = std::min(n_out, r0 + chunk);
      const void* acts[cpu::kMaxDotActs];
      float dots[cpu::kMaxDotActs];
      for (int64_t t0 = 0; t0 < n_tokens; t0 += cpu::kMaxDotActs) {
        const int nt = static_cast<int>(std::min<int64_t>(cpu::kMaxDotActs, n_tokens - t0));
        for (int i = 0; i < nt; ++i) acts[i] = abytes + (t0 + i) * act_stride;
        for (int64_t r = r0; r < r1; ++r) {
          cpu::dot_rows(w.dtype, wbytes + r * row_bytes, acts, nt, n_in, dots);
          for (int i = 0; i < nt; ++i) y[(t0 + i) * n_out + r] = dots[i];
        }
      }
    });
  }

  void embed(const TensorView& table, float scale, float* out) override {
    const int64_t n = static_cast<int64_t>(table.ne[0]);
    const uint64_t row_bytes = dtype_row_bytes(table.dtype, table.ne[0], table.name);
    const std::vector<int32_t>& ids = step_.tokens;
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] < 0 || static_cast<uint64_t>(ids[r]) >= table.n_rows())
        fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary of {} ({} rows)",
             ids[r], table.name, table.n_rows());
      float* row = out + r * n;
      quant::dequantize_row(table.dtype,
                            static_cast<const uint8_t*>(table.data) + ids[r] * row_bytes, row, n);
      if (scale != 1.0f)
        for (int64_t i = 0; i < n; ++i) row[i] *= scale;
    }
  }

  void gather_logit_rows(const float* x, int64_t dim, float* out) override {
    for (size_t r = 0; r < step_.logit_rows.size(); ++r)
      std::copy_n(x + int64_t{step_.logit_rows[r]} * dim, dim, out + r * dim);
  }

  // The sampler's own rule (engine/sampler.cpp): std::max_element, first maximum wins.
  void argmax_rows(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld,
                   int32_t* ids) override {
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* row = x + r * ld;
      ids[r] = n_cols > 0 ? static_cast<int32_t>(std::max_element(row, row + n_cols) - row) : 0;
    }
  }

  // The reference chain itself, row by row (the engine's CPU path calls it directly).
  void sample_rows(const float* logits, int64_t n_rows, int64_t n_cols, int64_t ld,
                   const SampleRows& rows, std::span<sampling::RowResult> out) override {
    if (rows.params.size() != static_cast<size_t>(n_rows) || out.size() != rows.params.size())
      fail(ErrorCode::invalid_argument, "sample_rows: {} rows, {} parameter rows, {} results",
           n_rows, rows.params.size(), out.size());
    for (int64_t r = 0; r < n_rows; ++r) {
      const sampling::RowParams& p = rows.params[r];
      sample_chain_run(std::span<const float>(logits + r * ld, static_cast<size_t>(n_cols)), p,
                       rows.penalties.subspan(p.penalty_begin, p.penalty_count),
                       rows.bias.subspan(p.bias_begin, p.bias_count),
                       p.mask_begin >= 0 ? rows.mask_words.data() + p.mask_begin : nullptr,
                       sample_scratch_, out[r]);
    }
  }

  void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps,
                float* y) override {
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double{xr[i]} * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * (w ? w[i] : 1.0f);
    }
  }

  void rope(float* x, int n_heads, int head_dim, const RopeParams& params) override {
    const int64_t n_tokens = step_.n_tokens();
    const std::vector<int32_t>& positions = step_.positions;
    const int half = params.n_rot / 2;
    std::vector<float> cos_t(half), sin_t(half);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int i = 0; i < half; ++i) {
        const double angle = positions[t] * params.inv_freq[i];
        cos_t[i] = static_cast<float>(std::cos(angle));
        sin_t[i] = static_cast<float>(std::sin(angle));
      }
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const int i0 = params.layout == RopeLayout::neox ? i : 2 * i;
          const int i1 = params.layout == RopeLayout::neox ? i + half : 2 * i + 1;
          const float a = v[i0], b = v[i1];
          v[i0] = a * cos_t[i] - b * sin_t[i];
          v[i1] = a * sin_t[i] + b * cos_t[i];
        }
      }
    }
  }

  void kv_store(const KvLayerView& kv, const float* k, const float* v) override {
    cpu::kv_store(kv, step_, k, v);
  }

  void attention(const KvLayerView& kv, const float* q, const AttentionParams& params,
                 float* out) override {
    cpu::attention(pool_, kv, step_, q, params, reference_, out);
  }

  void add(float* y, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void add_row(float* y, const float* b, int64_t n_tokens, int64_t dim) override {
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t i = 0; i < dim; ++i) y[t * dim + i] += b[i];
  }
  void scale(float* y, float s, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] *= s;
  }
  void softcap(float* y, float cap, int64_t n) override {
    for_elements(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = cap * std::tanh(y[i] / cap);
    });
  }
  void silu_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                float* out) override {
    for_elements(n_rows * n_cols, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    });
  }
  void gelu_tanh_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                     float* out) override {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for_elements(n_rows * n_cols, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float g = gate[i];
        const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
      }
    });
  }

  bool linear_attention_supported() const override { return true; }
  void ssm_conv(const StateLayerView& state, const float* x, int64_t dim, int kernel,
                const float* w, float* y) override {
    cpu::ssm_conv(pool_, step_, state, x, dim, kernel, w, y);
  }
  void gated_delta_rule(const StateLayerView& state, const float* qkv, const float* a,
                        const float* b, const float* A, const float* dt_bias,
                        const DeltaNetParams& params, float* out) override {
    cpu::gated_delta_rule(pool_, step_, state, qkv, a, b, A, dt_bias, params, out);
  }
  void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                      float eps, float* y) override {
    cpu::rms_norm_gated(x, w, z, n_rows, dim, eps, y);
  }
  void sigmoid_mul(float* y, const float* gate, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<float>(y[i] / (1.0 + std::exp(-double{gate[i]})));
  }

  bool moe_route_supported(int n_expert, int k) const override {
    return n_expert >= 1 && k >= 1 && k <= n_expert;
  }
  void moe_route(const float* logits, int64_t n_tokens, const MoeRouteParams& p, int32_t* ids,
                 float* weights) override {
    cpu::moe_route(logits, n_tokens, p, ids, weights);
  }
  // Each expert's matrices over the gathered rows of its pairs (matmul rows are independent, so
  // a row's result is the same as over any other set of rows), scattered back to pair order.
  void matmul_experts(std::span<const ExpertMatrix> ws, const float* x, int x_div,
                      const int32_t* ids, int64_t n_pairs, std::span<float* const> ys) override {
    if (ws.empty() || ws.size() != ys.size() || x_div < 1)
      fail(ErrorCode::invalid_argument, "matmul_experts: {} matrices, {} outputs, x_div {}",
           ws.size(), ys.size(), x_div);
    const int64_t n_in = static_cast<int64_t>(ws[0].stacked->ne[0]);
    expert_groups_build(ids, n_pairs, static_cast<int64_t>(ws[0].stacked->ne[2]), groups_);
    for (size_t e = 0; e + 1 < groups_.begin.size(); ++e) {
      const int64_t b = groups_.begin[e], m = groups_.begin[e + 1] - b;
      if (m == 0) continue;
      moe_x_.resize(static_cast<size_t>(m * n_in));
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(x + groups_.pairs[b + i] / x_div * n_in, n_in, moe_x_.data() + i * n_in);
      for (size_t o = 0; o < ws.size(); ++o) {
        const int64_t n_out = ws[o].n_out;
        moe_y_.resize(static_cast<size_t>(m * n_out));
        matmul(expert_view(ws[o], static_cast<int64_t>(e)), moe_x_.data(), m, moe_y_.data());
        for (int64_t i = 0; i < m; ++i)
          std::copy_n(moe_y_.data() + i * n_out, n_out, ys[o] + groups_.pairs[b + i] * n_out);
      }
    }
  }
  bool matmul_experts_on_device(const ExpertMatrix&, int64_t) const override { return true; }
  void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                   float* out) override {
    cpu::moe_combine(y, weights, n_tokens, k, dim, out);
  }
  void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim) override {
    cpu::sigmoid_scale_rows(y, g, n_rows, dim);
  }

 private:
  void matmul_token(const TensorView& w, uint64_t row_bytes, const float* x, float* y) {
    const int64_t n_in = static_cast<int64_t>(w.ne[0]);
    const int64_t n_out = static_cast<int64_t>(w.n_rows());
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    const int64_t chunk = rows_per_task(n_out, 1, pool_.n_threads());
    pool_.parallel_for((n_out + chunk - 1) / chunk, [&](int64_t task, int) {
      const int64_t r1 = std::min(n_out, (task + 1) * chunk);
      for (int64_t r = task * chunk; r < r1; r += cpu::kMaxTokenRows) {
        const int n_rows = static_cast<int>(std::min<int64_t>(cpu::kMaxTokenRows, r1 - r));
        cpu::dot_token_rows(w.dtype, wbytes + r * row_bytes, row_bytes, n_rows, x, n_in, y + r);
      }
    });
  }

  // Rows dequantized to f32 (reference mode, or a dtype with no fast dot). The fast path
  // dequantizes a task's rows a panel at a time and takes the panel's products a tile of rows x
  // tokens at a time (dot_tile.h: the same bits whatever the tile); reference mode sums each
  // product in double.
  void matmul_dequant(const TensorView& w, uint64_t row_bytes, const float* x, int64_t n_tokens,
                      float* y, bool use_double) {
    const int64_t n_in = static_cast<int64_t>(w.ne[0]);
    const int64_t n_out = static_cast<int64_t>(w.n_rows());
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    const int64_t chunk = rows_per_task(n_out, n_tokens, pool_.n_threads());
    // A panel's rows (256 KB at most, 4-16 rows) stay in L2 while every token's products read
    // them; a one-token task can hold thousands of rows (the output projection's).
    const int64_t panel_rows =
        std::clamp<int64_t>(256 * 1024 / (std::max<int64_t>(n_in, 1) * 4), 4, 16);
    pool_.parallel_for((n_out + chunk - 1) / chunk, [&](int64_t task, int thread) {
      std::vector<float>& panel = scratch_[thread];
      panel.resize(panel_rows * n_in);
      const int64_t task_end = std::min(n_out, (task + 1) * chunk);
      for (int64_t r0 = task * chunk; r0 < task_end; r0 += panel_rows) {
        const int64_t r1 = std::min(task_end, r0 + panel_rows);
        for (int64_t r = r0; r < r1; ++r) {
          float* row = panel.data() + (r - r0) * n_in;
          if (use_double || !cpu::dequant_row_fast(w.dtype, wbytes + r * row_bytes, row, n_in))
            quant::dequantize_row(w.dtype, wbytes + r * row_bytes, row, n_in);
        }
        if (use_double) {
          for (int64_t r = r0; r < r1; ++r) {
            const float* row = panel.data() + (r - r0) * n_in;
            for (int64_t t = 0; t < n_tokens; ++t) {
              const float* xt = x + t * n_in;
              double acc = 0;
              for (int64_t i = 0; i < n_in; ++i) acc += double{row[i]} * xt[i];
              y[t * n_out + r] = static_cast<float>(acc);
            }
          }
          continue;
        }
        for (int64_t t = 0; t < n_tokens; t += cpu::kTileTokens) {
          const int nt = static_cast<int>(std::min<int64_t>(cpu::kTileTokens, n_tokens - t));
          for (int64_t r = r0; r < r1; r += cpu::kTileRows) {
            const int nr = static_cast<int>(std::min<int64_t>(cpu::kTileRows, r1 - r));
            cpu::dot_f32_tile(panel.data() + (r - r0) * n_in, n_in, nr, x + t * n_in, n_in, nt,
                              n_in, y + t * n_out + r, n_out);
          }
        }
      }
    });
  }

  // fn(i0, i1) over [0, n) in tasks of kElementsPerTask elements, on the pool where there is more
  // than one task.
  template <typename Fn>
  void for_elements(int64_t n, Fn&& fn) {
    const int64_t tasks = (n + kElementsPerTask - 1) / kElementsPerTask;
    if (tasks <= 1) return fn(int64_t{0}, n);
    pool_.parallel_for(tasks, [&](int64_t task, int) {
      const int64_t i0 = task * kElementsPerTask;
      fn(i0, std::min(n, i0 + kElementsPerTask));
    });
  }

  ThreadPool pool_;
  bool reference_;
  std::vector<std::vector<float>> scratch_;  // per thread: a panel of dequantized weight rows
  SampleScratch sample_scratch_;             // sample_rows
  StepLayout step_;                          // the current step's metadata (step_begin)
  ExpertGroups groups_;                      // matmul_experts: the step's pairs by expert
  std::vector<float> moe_x_, moe_y_;         // matmul_experts: one expert's rows in and out
};

}  // namespace

std::unique_ptr<Ops> ops_cpu_create(const CpuOpsOptions& options) {
  return std::make_unique<CpuOps>(options);
}

}  // namespace memra
