// The CUDA backend's ops: each call checks what the host can check cheaply (dtypes, sizes) and
// launches kernels/ on the backend's stream. Launches are asynchronous; the first host wait
// (download) reports a failed kernel, named, as memra::Error. Per-step metadata goes up in one
// copy from a pinned staging buffer. Pure decode steps are recorded as CUDA graphs (graph_run)
// and replayed with one launch.
//
// One file past ~800 lines, on purpose: CudaOps is one class whose ops share the stream, the
// launch count (given_x.h's marks, the fault injection) and the scratch buffers, and it lives in
// this file's anonymous namespace so nothing else can reach its state. What stands on its own is
// already apart (side_stream, fast_gemm, experts_grouped, given_x, ops_cuda_support).
#include "backend/cuda/ops_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/experts_grouped.h"
#include "backend/cuda/fast_gemm.h"
#include "backend/cuda/given_x.h"
#include "backend/cuda/ops_cuda_support.h"
#include "backend/cuda/side_stream.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "kernels/row_max.h"

namespace memra::cuda {

namespace {

class CudaOps final : public Ops {
 public:
  explicit CudaOps(const CudaOpsOptions& options) : ordinal_(options.ordinal) {
    const int n = device_count();
    if (ordinal_ < 0 || ordinal_ >= n)
      fail(ErrorCode::invalid_argument, "CUDA device {} does not exist ({} visible)", ordinal_, n);
    faults_ = FaultPlan::from_env();
    info_ = device_info(ordinal_);  // sets the device on this thread
    stream_ = std::make_unique<Stream>();
    if (prefill_side_stream_enabled()) side_ = std::make_unique<SideStreamOwner>();
    check(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming), "cudaEventCreate");
    if (!options.batch_invariant) fast_ = std::make_unique<FastGemm>();
  }
  ~CudaOps() override {
    graphs_drop();
    if (staged_) (void)cudaEventDestroy(staged_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(ordinal_) + " " + info_.name;
  }
  bool host_memory() const override { return false; }
  // F16 by default, as llama.cpp: 8x finer than BF16 at the same bytes (the GPU model gate
  // measured BF16 K rounding amplified by large attention scores); BF16 remains selectable for
  // models whose K/V would exceed F16's range. F8_E4M3 (no scale, saturating) halves the bytes
  // long contexts read, at an accuracy its own gate measures against F16
  // (scripts/gpu_model_gate.py --reference-device cuda); its attention runs on the CUDA cores.
  DType kv_dtype_default() const override { return DType::f16; }
  void kv_dtype_check(DType dtype) const override {
    if (dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f32 &&
        dtype != DType::f8_e4m3)
      fail(ErrorCode::unsupported,
           "the CUDA backend keeps its KV cache in F16, BF16, F32 or F8_E4M3, not {}",
           dtype_name(dtype));
  }

  Buffer alloc(size_t bytes) override {
    bind();
    void* p = nullptr;
    cudaError_t status = cudaErrorMemoryAllocation;
    if (++n_allocs_ != faults_.alloc_at) status = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      fail(ErrorCode::resource_exhausted,
           "cannot allocate {} bytes on {}: {} ({} of {} bytes free)", bytes, name(),
           cudaGetErrorString(status), free_b, total_b);
    }
    return Buffer(p, bytes, [](void* q) { (void)cudaFree(q); });
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "upload");
  }
  void download(void* dst, const void* src, size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()), "download");
    sync_checked("a CUDA step");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "device copy");
  }

  TensorView weight_upload(const TensorView& host, WeightUse use) override {
    const bool vector = host.dtype == DType::f32 && host.n_dims == 1;
    if (!vector && !kernels::matmul_supports(host.dtype))
      fail(ErrorCode::unsupported,
           "tensor {} has dtype {}, which the CUDA backend has no kernel for", host.name,
           dtype_name(host.dtype));
    const auto n_in = static_cast<int64_t>(host.ne[0]), n_out = static_cast<int64_t>(host.ne[1]);
    // A stack of experts' matrices (3-D) tiles expert by expert, one after another.
    const auto n_expert = static_cast<int64_t>(host.n_dims == 3 ? host.ne[2] : 1);
    const bool tile = tiled_weights_ && (host.n_dims == 2 || host.n_dims == 3) &&
                      reads(use, WeightUse::matmul) &&
                      kernels::matmul_tiled_supports(host.dtype, n_in);
    // A matrix only matmul reads keeps just its tiled form: the file's rows go to a temporary.
    // On the backend's stream: a plain cudaMemcpy from pageable memory may return before its DMA
    // lands, and the non-blocking stream would not wait for it before tiling (found by the GPU
    // model gate: kernel-check's uploads are stream-ordered and never saw it).
    Buffer ggml = alloc(host.n_bytes);
    check(cudaMemcpyAsync(ggml.data(), host.data, host.n_bytes, cudaMemcpyHostToDevice, stream()),
          "weight upload");
    if (host.dtype == DType::bf16 && !vector) refuse_beyond_f16(host, ggml.data());
    TensorView out = host;
    out.data = ggml.data();
    if (tile) {
      const size_t tiled = kernels::matmul_tiled_bytes(host.dtype, n_in, n_out);
      Buffer& t = weights_.emplace_back(alloc(tiled * n_expert));
      kernels::matmul_tile(host.dtype, ggml.data(), n_in, n_out, t.data(), stream(), n_expert);
      if (!reads(use, WeightUse::rows)) out.data = t.data();
      tiled_[out.data] = t.data();
    }
    sync_checked("uploading a weight");  // the temporary is freed on return
    if (!tile || reads(use, WeightUse::rows)) weights_.push_back(std::move(ggml));
    return out;
  }

  void step_begin(const StepLayout& step) override;

  bool graphs_supported() const override { return true; }
  void graph_run(const GraphKey& key, const std::function<void()>& forward) override;
  GraphStats graph_stats() const override { return graph_stats_; }
  void graphs_drop() override {
    for (auto& [key, exec] : graphs_)
      if (exec) (void)cudaGraphExecDestroy(exec);  // one in flight is freed when it completes
    graphs_.clear();
  }

  void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y) override {
    if (n_tokens <= 0) return;
    const int64_t n_in = static_cast<int64_t>(w.ne[0]), n_out = static_cast<int64_t>(w.n_rows());
    const auto [data, layout] = matmul_form(w);
    const kernels::MatmulOut out{w.dtype, data, n_out, y, n_out, layout};
    if (fast_matmul(&out, 1, n_in, x, n_tokens)) return;
    products(&out, 1, n_in, x, n_tokens, nullptr);
  }
  void matmul_shared(std::span<const TensorView* const> ws, const float* x, int64_t n_tokens,
                     std::span<float* const> ys) override {
    if (n_tokens <= 0 || ws.empty()) return;
    const int64_t n_in = static_cast<int64_t>(ws[0]->ne[0]);
    constexpr size_t kMaxOuts = 4;  // q/k/v, gate/up: no allocation on the decode path
    if (ws.size() > kMaxOuts || ys.size() != ws.size())
      fail(ErrorCode::internal, "matmul_shared: {} weights, {} outputs (at most {})", ws.size(),
           ys.size(), kMaxOuts);
    std::array<kernels::MatmulOut, kMaxOuts> outs{};
    for (size_t i = 0; i < ws.size(); ++i) {
      if (static_cast<int64_t>(ws[i]->ne[0]) != n_in)
        fail(ErrorCode::internal, "matmul_shared: {} has {} inputs, {} has {}", ws[0]->name, n_in,
             ws[i]->name, ws[i]->ne[0]);
      const auto n_out = static_cast<int64_t>(ws[i]->n_rows());
      const auto [data, layout] = matmul_form(*ws[i]);
      outs[i] = {ws[i]->dtype, data, n_out, ys[i], n_out, layout};
    }
    if (fast_matmul(outs.data(), static_cast<int>(ws.size()), n_in, x, n_tokens)) return;
    // The side stream (side_stream.h) goes to every step, recorded ones included: the kernels
    // decide which steps use it.
    products(outs.data(), static_cast<int>(ws.size()), n_in, x, n_tokens,
             side_ ? side_->get() : nullptr);
  }
  // Token ids were checked against the table when the step was built (step_layout_build): a
  // replayed graph runs no host code here.
  void embed(const TensorView& table, float scale, float* out) override {
    kernels::get_rows(table.dtype, table.data, static_cast<int64_t>(table.ne[0]), dev_tokens_,
                      step_.n_tokens, scale, out, stream());
    launched("embed");
  }
  void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps,
                float* y) override {
    if (norm_for_matmul(const_cast<float*>(x), nullptr, w, n_rows, dim, eps, y)) return;
    if (norm_for_prompt(const_cast<float*>(x), nullptr, w, n_rows, dim, eps, y)) return;
    kernels::rms_norm(x, w, n_rows, dim, eps, y, stream());
    launched("rms_norm");
  }
  void add_rms_norm(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                    float eps, float* y) override {
    if (norm_for_matmul(x, d, w, n_rows, dim, eps, y)) return;
    if (norm_for_prompt(x, d, w, n_rows, dim, eps, y)) return;
    kernels::add_rms_norm(x, d, w, n_rows, dim, eps, y, stream());
    launched("add_rms_norm");
  }
  void post_norm_add_norm(float* d, const float* w_post, float* x, float x_scale,
                          const float* w_pre, float* y, int64_t n_rows, int64_t dim,
                          float eps) override {
    if (!fused_norms_)
      return Ops::post_norm_add_norm(d, w_post, x, x_scale, w_pre, y, n_rows, dim, eps);
    void* prep = y ? prepare_scratch(n_rows, dim, {y}) : nullptr;
    kernels::post_norm_add_norm(d, w_post, x, x_scale, w_pre, y, n_rows, dim, eps, prep, stream());
    launched("post_norm_add_norm");
    if (prep) given_.mark(GivenX::Kind::prepared_rows, y, n_rows, dim, n_launches_);
  }
  void rms_norm_dual(const float* x, const float* w1, float s1, float* y1, const float* w2,
                     float* y2, int64_t n_rows, int64_t dim, float eps) override {
    if (!fused_norms_) return Ops::rms_norm_dual(x, w1, s1, y1, w2, y2, n_rows, dim, eps);
    void* prep = prepare_scratch(n_rows, dim, {y1});
    kernels::rms_norm_dual(x, w1, s1, y1, w2, y2, n_rows, dim, eps, prep, stream());
    launched("rms_norm_dual");
    if (prep) given_.mark(GivenX::Kind::prepared_rows, y1, n_rows, dim, n_launches_);
  }
  void rope(float* x, int n_heads, int head_dim, const RopeParams& params) override {
    const int64_t ld = int64_t{n_heads} * head_dim;
    kernels::rope(x, step_.n_tokens, ld, n_heads, head_dim, params.n_rot,
                  params.layout == RopeLayout::neox, step_.positions, inv_freq(params), stream());
    launched("rope");
  }
  void kv_store(const KvLayerView& kv, const float* k, const float* v) override {
    kernels::kv_store(paged(kv), step_, k, v, int64_t{kv.n_kv_heads} * kv.head_dim, stream());
    launched("kv_store");
  }
  void qk_norm_rope_store(const KvLayerView& kv, int64_t n_tokens, int n_heads, float* q, float* k,
                          float* v, const float* q_norm, const float* k_norm, const float* v_norm,
                          float eps, const RopeParams& params) override {
    if (!fused_prologue_) {
      Ops::qk_norm_rope_store(kv, n_tokens, n_heads, q, k, v, q_norm, k_norm, v_norm, eps, params);
      return;
    }
    if (n_tokens != step_.n_tokens)
      fail(ErrorCode::invalid_argument, "qk_norm_rope_store: {} tokens in a step of {}", n_tokens,
           step_.n_tokens);
    const double* freq = inv_freq(params);
    kernels::qk_prologue(paged(kv), step_, q, k, v, n_heads, q_norm, k_norm, v_norm, eps,
                         params.n_rot, params.layout == RopeLayout::neox, freq, stream(),
                         angle_table(freq, params.n_rot));
    launched("qk_prologue");
  }
  bool attention_head_dim_supported(int head_dim, DType cache) const override {
    return kernels::attention_supports_head_dim(head_dim, cache);
  }
  // MEMRA_DECODE_PROLOGUE=1 (opt-in, decode_prologue_): the prologue handed to attention's launch,
  // whose decode kernel runs it in its blocks where its one-split tensor form serves a one-token
  // step (kernels.h's AttentionPrologue); else its own launch first, as qk_norm_rope_store's.
  void qk_prologue_attention(const KvLayerView& kv, int64_t n_tokens, int n_heads, float* q,
                             float* k, float* v, const float* q_norm, const float* k_norm,
                             float eps, const RopeParams& rope, const AttentionParams& params,
                             float* out) override {
    if (!decode_prologue_ || !fused_prologue_ || n_tokens != 1 || step_.n_tokens != 1) {
      Ops::qk_prologue_attention(kv, n_tokens, n_heads, q, k, v, q_norm, k_norm, eps, rope, params,
                                 out);
      return;
    }
    const double* freq = inv_freq(rope);
    const kernels::AttentionPrologue pro{.q = q,
                                         .k = k,
                                         .v = v,
                                         .q_norm = q_norm,
                                         .k_norm = k_norm,
                                         .eps = eps,
                                         .n_rot = rope.n_rot,
                                         .neox = rope.layout == RopeLayout::neox,
                                         .inv_freq = freq,
                                         .angle_table = angle_table(freq, rope.n_rot)};
    attention_with(kv, q, params, out, &pro);
  }
  void attention(const KvLayerView& kv, const float* q, const AttentionParams& params,
                 float* out) override {
    attention_with(kv, q, params, out, nullptr);
  }
  void gather_logit_rows(const float* x, int64_t dim, float* out) override {
    kernels::gather_rows(x, dim, dev_logit_rows_, host_step_.n_logits(), out, stream());
    launched("gather_logit_rows");
  }
  void argmax_rows(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld,
                   int32_t* ids) override {
    kernels::argmax_rows(x, n_rows, n_cols, ld, ids, stream());
    launched("argmax_rows");
  }
  bool sample_rows_supported(int64_t n_cols) const override {
    return n_cols >= 1 && n_cols <= kernels::kSampleMaxCols;
  }
  // One upload of the step's parameter lists, one launch, one download of the results (which
  // waits: the staging buffer is free again when this returns).
  void sample_rows(const float* logits, int64_t n_rows, int64_t n_cols, int64_t ld,
                   const SampleRows& rows, std::span<sampling::RowResult> out) override {
    if (rows.params.size() != static_cast<size_t>(n_rows) || out.size() != rows.params.size())
      fail(ErrorCode::invalid_argument, "sample_rows: {} rows, {} parameter rows, {} results",
           n_rows, rows.params.size(), out.size());
    if (n_rows == 0) return;
    bind();
    const auto part = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    const size_t o_pen = part(rows.params.size_bytes());
    const size_t o_bias = o_pen + part(rows.penalties.size_bytes());
    const size_t o_mask = o_bias + part(rows.bias.size_bytes());
    const size_t total = o_mask + part(rows.mask_words.size_bytes());
    sample_staging_.reserve(total);
    auto* host = static_cast<char*>(sample_staging_.data());
    std::memcpy(host, rows.params.data(), rows.params.size_bytes());
    std::memcpy(host + o_pen, rows.penalties.data(), rows.penalties.size_bytes());
    std::memcpy(host + o_bias, rows.bias.data(), rows.bias.size_bytes());
    std::memcpy(host + o_mask, rows.mask_words.data(), rows.mask_words.size_bytes());
    // Never read by a recorded graph, so growing them drops no recording.
    const auto fit = [&](Buffer& b, size_t bytes) {
      if (b.bytes() < bytes) {
        b.reset();
        b = alloc(bytes);
      }
      return static_cast<char*>(b.data());
    };
    char* dev = fit(sample_in_, total);
    check(cudaMemcpyAsync(dev, host, total, cudaMemcpyHostToDevice, stream()), "sampling upload");
    auto* scratch = reinterpret_cast<float*>(
        fit(sample_scratch_, static_cast<size_t>(n_rows * n_cols) * sizeof(float)));
    auto* results = reinterpret_cast<sampling::RowResult*>(fit(sample_out_, out.size_bytes()));
    kernels::sample_rows(
        logits, n_rows, n_cols, ld, reinterpret_cast<const sampling::RowParams*>(dev),
        reinterpret_cast<const sampling::Penalty*>(dev + o_pen),
        reinterpret_cast<const sampling::Bias*>(dev + o_bias),
        reinterpret_cast<const uint64_t*>(dev + o_mask), scratch, results, stream());
    launched("sample_rows");
    download(out.data(), results, out.size_bytes());
  }
  // ---- mixture of experts
  bool moe_route_supported(int n_expert, int k) const override {
    return n_expert >= 1 && n_expert <= kernels::kMoeMaxExperts && k >= 1 && k <= n_expert;
  }
  void moe_route(const float* logits, int64_t n_tokens, const MoeRouteParams& p, int32_t* ids,
                 float* weights) override {
    kernels::moe_route(logits, n_tokens, p.n_expert, p.k, p.normalize, p.scale, ids, weights,
                       stream());
    launched("moe_route");
  }
  // MEMRA_MOE_DEVICE=0 sends every step to the grouped path (routing read on the host): an A/B.
  // Steps of more than kernels::expert_pairs_on_device() pairs go there too (kExpertPairsMax,
  // 16384, unless MEMRA_MOE_DEVICE_MAX_PAIRS lowers it: 512 keeps prefill on the host, an A/B).
  bool matmul_experts_on_device(const ExpertMatrix& w, int64_t n_pairs) const override {
    static const bool enabled = env_switch("MEMRA_MOE_DEVICE", true);
    const auto [data, layout] = matmul_form(*w.stacked);
    // Each expert's matrix and the rows taken must start 16-byte aligned (the kernels' copies).
    const ExpertSpan span = expert_span(*w.stacked, layout, w.row_begin);
    return enabled && w.row_begin % 16 == 0 && span.matrix % 16 == 0 && span.skip % 16 == 0 &&
           kernels::matmul_experts_supports(w.stacked->dtype, layout,
                                            static_cast<int64_t>(w.stacked->ne[0]), n_pairs);
  }
  void matmul_experts(std::span<const ExpertMatrix> ws, const float* x, int x_div,
                      const int32_t* ids, int64_t n_pairs, std::span<float* const> ys) override {
    constexpr size_t kMaxOuts = 4;
    if (ws.empty() || ws.size() > kMaxOuts || ys.size() != ws.size() || x_div < 1)
      fail(ErrorCode::internal, "matmul_experts: {} matrices, {} outputs, x_div {}", ws.size(),
           ys.size(), x_div);
    if (n_pairs <= 0) return;
    const auto n_in = static_cast<int64_t>(ws[0].stacked->ne[0]);
    bool on_device = true;
    for (const ExpertMatrix& w : ws) on_device = on_device && matmul_experts_on_device(w, n_pairs);
    if (!on_device) {
      const auto grow_fn = [this](Buffer& b, size_t bytes) { return grow(b, bytes); };
      const auto form_fn = [this](const TensorView& w) { return matmul_form(w); };
      experts_grouped_.run(*this, stream(), grow_fn, form_fn, matmul_scratch_, ws, x, x_div, ids,
                           n_pairs, ys);
      launched("matmul_experts");
      return;
    }
    std::array<kernels::ExpertsOut, kMaxOuts> outs{};
    for (size_t i = 0; i < ws.size(); ++i) {
      const TensorView& s = *ws[i].stacked;
      const auto [data, layout] = matmul_form(s);
      const ExpertSpan span = expert_span(s, layout, ws[i].row_begin);
      const auto* first = static_cast<const uint8_t*>(data) + span.skip;
      outs[i] = {s.dtype, first, span.matrix, ws[i].n_out, ys[i], layout};
    }
    const int n_outs = static_cast<int>(ws.size());
    const auto n_expert = static_cast<int>(ws[0].stacked->ne[2]);
    void* scratch = grow(
        experts_scratch_,
        kernels::matmul_experts_scratch_bytes(outs.data(), n_outs, n_in, x_div, n_pairs, n_expert));
    kernels::matmul_experts(outs.data(), n_outs, n_in, x, x_div, ids, n_pairs, n_expert, scratch,
                            stream());
    launched("matmul_experts");
  }
  void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                   float* out) override {
    kernels::moe_combine(y, weights, n_tokens, k, dim, out, stream());
    launched("moe_combine");
  }
  void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim) override {
    kernels::sigmoid_scale_rows(y, g, n_rows, dim, stream());
    launched("sigmoid_scale_rows");
  }

  void add(float* y, const float* x, int64_t n) override {
    kernels::add(y, x, n, stream());
    launched("add");
  }
  void add_row(float* y, const float* b, int64_t n_tokens, int64_t dim) override {
    kernels::add_row(y, b, n_tokens, dim, dim, stream());
    launched("add_row");
  }
  void scale(float* y, float s, int64_t n) override {
    kernels::scale(y, s, n, stream());
    launched("scale");
  }
  void softcap(float* y, float cap, int64_t n) override {
    kernels::softcap(y, cap, n, stream());
    launched("softcap");
  }
  void silu_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                float* out) override {
    act_mul(kernels::Act::silu, gate, up, n_rows, n_cols, out, "silu_mul");
  }
  void gelu_tanh_mul(const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                     float* out) override {
    act_mul(kernels::Act::gelu_tanh, gate, up, n_rows, n_cols, out, "gelu_tanh_mul");
  }
  // Dense rows are one long row to act_mul (the same values, no per-element row index), except
  // where a prompt step's activation also writes x's rows form for the down projection
  // (kernels::act_mul_x_rows; given_, as for the norms), and where a one-token step's hands the
  // down product its row's partial maxima (MEMRA_RAW_X: kernels::act_mul_part_max). (A decode
  // step's activation writing the down product's prepared rows, and decode attention writing the
  // o product's, both measured slower and removed: docs/PERFORMANCE.md, fifty-eighth round.)
  void act_mul(kernels::Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
               float* out, const char* what) {
    const GivenX::Kind hand = n_rows == 1 && kernels::raw_x_enabled() ? GivenX::Kind::part_max
                              : kernels::x_rows_pays(n_rows, n_cols)  ? GivenX::Kind::x_rows
                                                                      : GivenX::Kind::none;
    if (hand != GivenX::Kind::none) {
      void* scratch = grow(matmul_scratch_, kernels::matmul_scratch_bytes(n_rows, n_cols));
      if (hand == GivenX::Kind::part_max
              ? kernels::act_mul_part_max(act, gate, up, n_cols, out, scratch, stream())
              : kernels::act_mul_x_rows(act, gate, up, n_rows, n_cols, out, scratch, stream())) {
        launched(what);
        given_.mark(hand, out, n_rows, n_cols, n_launches_);
        return;
      }
    }
    kernels::act_mul(act, gate, up, 1, n_rows * n_cols, n_rows * n_cols, out, stream());
    launched(what);
  }

  // Linear attention (kernels/ssm). The state lives in the KV cache's buffers, which it allocated
  // through alloc(): device memory. The slots are checked on the host from the step's copy when
  // the ops run eagerly (and by the model every step, decoder.cpp, replayed graphs included).
  //
  // On by default since the GPU model gate's greedy rule allows near-ties: on the qwen3_5 fixture
  // CUDA's logits agree with the CPU (top-1 99.2%, mean KL 2.6e-5) and its greedy tokens parted
  // at the 12th on a near-tie (the CPU's margin 0.0106, the row's error 0.0202;
  // receipts/2026-12-01-gpu-model-gate-linear-attention.json). The first GPU verdict under that
  // rule is pending.
  bool linear_attention_supported() const override { return true; }
  bool delta_rule_k_dim_supported(int k_dim) const override {
    return kernels::gated_delta_rule_supports(k_dim);
  }
  void ssm_conv(const StateLayerView& state, const float* x, int64_t dim, int kernel,
                const float* w, float* y) override {
    if (state.conv_floats != int64_t{kernel - 1} * dim)
      fail(ErrorCode::internal, "ssm_conv: state of {} floats for kernel {} x {} channels",
           state.conv_floats, kernel, dim);
    check_state_slots(state);
    kernels::ssm_conv(step_, state.conv, x, dim, kernel, w, y, stream());
    launched("ssm_conv");
  }
  void gated_delta_rule(const StateLayerView& state, const float* qkv, const float* a,
                        const float* b, const float* A, const float* dt_bias,
                        const DeltaNetParams& params, float* out) override {
    const kernels::DeltaRuleShape shape{params.n_k_heads, params.n_v_heads, params.k_dim,
                                        params.v_dim};
    if (state.ssm_floats != int64_t{shape.n_v_heads} * shape.k_dim * shape.v_dim)
      fail(ErrorCode::internal, "gated_delta_rule: state of {} floats for {} v heads of {} x {}",
           state.ssm_floats, shape.n_v_heads, shape.k_dim, shape.v_dim);
    check_state_slots(state);
    kernels::gated_delta_rule(step_, state.ssm, qkv, a, b, A, dt_bias, shape, out, stream());
    launched("gated_delta_rule");
  }
  void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                      float eps, float* y) override {
    kernels::rms_norm_gated(x, w, z, n_rows, dim, eps, y, stream());
    launched("rms_norm_gated");
  }
  void sigmoid_mul(float* y, const float* gate, int64_t n) override {
    kernels::sigmoid_mul(y, gate, n, stream());
    launched("sigmoid_mul");
  }

  std::string fatal_error() const override { return broken_; }

  void memory(uint64_t& free_bytes, uint64_t& total_bytes) const {
    size_t f = 0, t = 0;
    check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    free_bytes = f;
    total_bytes = t;
  }

 private:
  // attention(), with the prologue handed to the kernels (pro, or null: none).
  void attention_with(const KvLayerView& kv, const float* q, const AttentionParams& params,
                      float* out, const kernels::AttentionPrologue* pro) {
    kernels::AttentionArgs args{params.n_heads, params.scale, params.softcap, params.window};
    args.tensor_cores = attention_tensor_cores_;
    const size_t had = attention_scratch_.bytes();
    void* scratch = grow(attention_scratch_,
                         kernels::attention_scratch_bytes(step_, params.n_heads, kv.head_dim));
    if (attention_scratch_.bytes() != had) kernels::attention_scratch_clear(scratch, stream());
    // A one-token step's o product reads out raw (MEMRA_RAW_X_ATTENTION, kernels/row_max.h).
    const int64_t width = int64_t{params.n_heads} * kv.head_dim;
    int parts = 0;
    if (step_.n_tokens == 1 && kernels::raw_x_attention_enabled() &&
        kernels::part_max_read(1, width)) {
      void* ms = grow(matmul_scratch_, kernels::matmul_scratch_bytes(1, width));
      parts = kernels::attention_part_max(paged(kv), step_, q, width, args, out, scratch,
                                          kernels::matmul_detail::scratch_part_max(ms),
                                          static_cast<int>(kernels::part_max_capacity(width)),
                                          stream(), pro);
    } else {
      kernels::attention(paged(kv), step_, q, width, args, out, scratch, stream(), pro);
    }
    launched("attention");
    if (parts > 0) given_.mark(GivenX::Kind::part_max, out, 1, width, n_launches_, parts);
  }

  cudaStream_t stream() const { return stream_->get(); }

  // The CUDA runtime's current device is per host thread: the engine thread binds on entry.
  void bind() const {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != ordinal_)
      check(cudaSetDevice(ordinal_), "cudaSetDevice");
  }

  // Reports a launch that failed to start (bad configuration); faults inside a kernel surface at
  // the next synchronization. After a sticky error every call refuses with the first reason.
  void launched(const char* what, cudaError_t status = cudaSuccess) {
    if (status == cudaSuccess) status = cudaGetLastError();
    if (++n_launches_ == faults_.launch_at) status = cudaErrorLaunchFailure;
    if (status == cudaSuccess) return;
    const std::string reason = fmt_error(what, status);
    if (sticky(status)) broken_ = reason;
    fail(ErrorCode::internal, "{}", reason);
  }

  // Host waits: a failure here is a kernel fault of the step(s) before it.
  void sync_checked(const char* what) {
    const cudaError_t status = cudaStreamSynchronize(stream());
    if (status == cudaSuccess) return;
    const std::string reason = fmt_error(what, status);
    if (sticky(status)) broken_ = reason;
    fail(ErrorCode::internal, "{}", reason);
  }

  // Grows a device scratch buffer to at least `bytes` (rare: only when a step is larger than
  // every step before it). Recorded graphs may point into the old buffer: they are dropped (and
  // recorded again on next use). Never during a recording: graph_run's eager first run grows.
  void* grow(Buffer& buffer, size_t bytes) {
    if (buffer.bytes() < bytes) {
      if (capturing_)
        fail(ErrorCode::internal, "a scratch buffer would grow to {} bytes during a recording",
             bytes);
      if (buffer.data()) graphs_drop();
      buffer.reset();
      buffer = alloc(bytes);
    }
    return buffer.data();
  }

  cudaGraphExec_t record(const GraphKey& key, const std::function<void()>& forward);

  // Every sequence of the step names a state slot of the layer's cache (the CPU backend's check).
  void check_state_slots(const StateLayerView& state) const {
    const int32_t n_seqs = host_step_.n_seqs();
    if (static_cast<int32_t>(host_step_.state_slots.size()) != n_seqs)
      fail(ErrorCode::invalid_argument, "the step has {} state slots for {} sequences",
           host_step_.state_slots.size(), n_seqs);
    for (int32_t s = 0; s < n_seqs; ++s) {
      const int32_t slot = host_step_.state_slots[s];
      if (slot < 0 || slot >= state.n_slots)
        fail(ErrorCode::invalid_argument,
             "batch sequence {} has state slot {}, outside the cache's {} state slots", s, slot,
             state.n_slots);
    }
  }

  kernels::PagedKv paged(const KvLayerView& kv) const {
    return {kv.k, kv.v, kv.dtype, kv.block_size, kv.n_kv_heads, kv.head_dim, kv.n_blocks};
  }

  // The matmul kernels compute BF16 weights in f16 (kernels.h): a tensor with a value beyond f16's
  // range is refused by name rather than run with infinities.
  void refuse_beyond_f16(const TensorView& host, const void* device_data) {
    Buffer count = alloc(sizeof(unsigned long long));
    unsigned long long beyond = 0;
    check(cudaMemsetAsync(count.data(), 0, sizeof(beyond), stream()), "memset");
    kernels::bf16_count_beyond_f16(device_data, static_cast<int64_t>(host.n_bytes / 2),
                                   static_cast<unsigned long long*>(count.data()), stream());
    launched("bf16 range check");
    download(&beyond, count.data(), sizeof(beyond));
    if (beyond > 0)
      fail(ErrorCode::unsupported,
           "tensor {} (BF16) has {} values beyond F16's range (|w| > 65504): the CUDA matmul "
           "computes BF16 weights in F16",
           host.name, beyond);
  }

  // The rope angles of this forward's tokens for one frequency table (kernels::qk_angle_table),
  // made by the first prologue of a forward that uses it and read by the rest, so that no layer's
  // prologue waits for its own double-precision sincos. A forward is counted from step_begin and
  // from each run of graph_run's forward (its eager run and its recording: a recorded graph makes
  // its tables itself on every replay). MEMRA_ANGLE_TABLE=0: each prologue computes its angles
  // (the A/B; the same values).
  struct AngleTable {
    Buffer buffer;
    int64_t made_in = -1;  // forward_ when made
  };
  std::map<std::pair<const double*, int>, AngleTable> angle_tables_;
  int64_t forward_ = 0;
  bool angle_table_ = env_switch("MEMRA_ANGLE_TABLE", true);
  const float* angle_table(const double* freq, int n_rot) {
    if (!angle_table_) return nullptr;
    AngleTable& t = angle_tables_[{freq, n_rot}];
    const auto bytes =
        static_cast<size_t>(step_.n_tokens * kernels::qk_angle_table_floats(n_rot)) * sizeof(float);
    auto* table = static_cast<float*>(grow(t.buffer, std::max<size_t>(bytes, 16)));
    if (t.made_in != forward_) {
      kernels::qk_angle_table(step_, n_rot, freq, table, stream());
      launched("qk_angle_table");
      t.made_in = forward_;
    }
    return table;
  }

  // Device copies of rope frequency tables, by content (a model's two tables stay for its life).
  const double* inv_freq(const RopeParams& params) {
    auto it = rope_tables_.find(params.inv_freq);
    if (it == rope_tables_.end()) {
      Buffer b = alloc(params.inv_freq.size() * sizeof(double));
      check(cudaMemcpy(b.data(), params.inv_freq.data(), b.bytes(), cudaMemcpyHostToDevice),
            "rope table upload");
      it = rope_tables_.emplace(params.inv_freq, std::move(b)).first;
    }
    return static_cast<const double*>(it->second.data());
  }

  int ordinal_;
  FaultPlan faults_;
  int64_t n_allocs_ = 0, n_launches_ = 0, n_recordings_ = 0;
  std::string broken_;  // the sticky error that made the context unusable, if any
  DeviceInfo info_;
  std::unique_ptr<Stream> stream_;
  std::vector<Buffer> weights_;
  // Weights uploaded in the tiled layout: the view's data -> the tiled copy (the same pointer,
  // unless embed also reads the file's rows). MEMRA_WEIGHT_LAYOUT=ggml keeps every weight in the
  // file's layout (A/B measurements; the outputs are bit-identical).
  std::unordered_map<const void*, const void*> tiled_;
  bool tiled_weights_ = tiled_weights_from_env();
  // MEMRA_FUSED_PROLOGUE=0 runs the attention prologue as its five plain kernels (A/B
  // measurements; the outputs are bit-identical).
  bool fused_prologue_ = env_switch("MEMRA_FUSED_PROLOGUE", true);
  // MEMRA_DECODE_PROLOGUE=1: a one-token step's prologue inside decode attention
  // (qk_prologue_attention; the same bits either way). Off by default: written in the
  // seventy-third round, not yet measured (`gpu_check.sh prologue`).
  bool decode_prologue_ = env_switch("MEMRA_DECODE_PROLOGUE", false);
  // MEMRA_FUSED_NORMS=0 runs post_norm_add_norm and rms_norm_dual as their plain kernels (A/B;
  // the same bits either way).
  bool fused_norms_ = env_switch("MEMRA_FUSED_NORMS", true);

  // A decode step's norms write their output's matmul input too (kernels::rms_norm_for_matmul, and
  // the fused post_norm_add_norm and rms_norm_dual), so the q/k/v, gate/up, router and output
  // products that follow skip preparing it; a prompt step's write their rows' largest |y|
  // (kernels::rms_norm_row_max), so the q/k/v and gate/up products make x's wgmma form in one
  // launch instead of two. given_ says which, for which y, until the next launch.
  // MEMRA_NORM_PREPARES=0 and MEMRA_NORM_ROW_MAX=0 turn them off (A/B; the same bits either way).
  // Where x's rows form pays (kernels/row_max.h: the default; MEMRA_X_ROWS=0 turns it off), a
  // prompt step's norms and gated activation write x's rows form itself instead, and the products
  // after them prepare nothing.
  GivenX given_;
  bool norm_prepares_ = env_switch("MEMRA_NORM_PREPARES", true);
  bool norm_row_max_ = env_switch("MEMRA_NORM_ROW_MAX", true);
  // MEMRA_ATTENTION_TENSOR_CORES=0: the CUDA-core attention kernel for 16-bit caches (an A/B
  // switch; its bits differ from the tensor-core kernel's, both are deterministic).
  bool attention_tensor_cores_ = env_switch("MEMRA_ATTENTION_TENSOR_CORES", true);

  // The matmul scratch a norm writing n_rows x dim may also prepare its output in, or null where
  // it may not (every pointer in `rows` must be 16-byte aligned).
  void* prepare_scratch(int64_t n_rows, int64_t dim, std::initializer_list<const void*> rows) {
    // dim < 256: a per-head norm (q/k norms of a traced step, Gemma 4's), which no matmul reads.
    if (!norm_prepares_ || n_rows <= 0 || n_rows > kernels::kPreparedRows || dim % 16 != 0 ||
        dim < 256)
      return nullptr;
    for (const void* p : rows)
      if (p && !aligned16(p)) return nullptr;
    return grow(matmul_scratch_, kernels::matmul_scratch_bytes(n_rows, dim));
  }
  bool norm_for_matmul(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                       float eps, float* y) {
    void* scratch = prepare_scratch(n_rows, dim, {x, d, y});
    if (!scratch) return false;
    kernels::rms_norm_for_matmul(x, d, w, n_rows, dim, eps, y, scratch, stream());
    launched(d ? "add_rms_norm" : "rms_norm");
    given_.mark(GivenX::Kind::prepared_rows, y, n_rows, dim, n_launches_);
    return true;
  }
  // A prompt step's norm handing the products x's rows form or its rows' largest |y| (given_).
  bool norm_for_prompt(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                       float eps, float* y) {
    // dim < 256: a per-head norm, which no matmul reads.
    if (dim < 256 || dim % 16 != 0 || !aligned16(y)) return false;
    GivenX::Kind kind = GivenX::Kind::none;
    if (kernels::x_rows_pays(n_rows, dim) && aligned16(x) && (!d || aligned16(d)))
      kind = GivenX::Kind::x_rows;
    else if (norm_row_max_ && kernels::row_max_pays(n_rows))
      kind = GivenX::Kind::row_max;
    else
      return false;
    void* scratch = grow(matmul_scratch_, kernels::matmul_scratch_bytes(n_rows, dim));
    if (kind == GivenX::Kind::x_rows)
      kernels::rms_norm_x_rows(x, d, w, n_rows, dim, eps, y, scratch, stream());
    else
      kernels::rms_norm_row_max(x, d, w, n_rows, dim, eps, y, scratch, stream());
    launched(d ? "add_rms_norm" : "rms_norm");
    given_.mark(kind, y, n_rows, dim, n_launches_);
    return true;
  }
  // `--deterministic off`: a step over FastGemm's token bound whose outputs are all
  // quantized tiled matrices (FastGemm::takes) multiplies by cuBLASLt on an f16 copy of each, made
  // in w16_scratch_ per matmul.
  std::unique_ptr<FastGemm> fast_;
  Buffer w16_scratch_;
  bool fast_matmul(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                   int64_t n_tokens) {
    if (!fast_ || !fast_->takes(outs, n_outs, n_in, n_tokens)) return false;
    void* scratch = grow(matmul_scratch_, kernels::matmul_scratch_bytes(n_tokens, n_in));
    void* w16 = grow(w16_scratch_, FastGemm::copy_bytes(outs, n_outs, n_in));
    fast_->matmul(outs, n_outs, n_in, x, n_tokens, scratch, w16, stream());
    launched("matmul");
    return true;
  }
  // The products over x (matmul_shared_x), from what the kernel before left for them (given_).
  void products(const kernels::MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                int64_t n_tokens, const kernels::SideStream* side) {
    void* scratch = grow(matmul_scratch_, kernels::matmul_scratch_bytes(n_tokens, n_in));
    const GivenX::Kind given = given_.of(x, n_tokens, n_in, n_launches_);
    if (given == GivenX::Kind::none || given == GivenX::Kind::prepared_rows)
      kernels::matmul_shared_x(outs, n_outs, n_in, x, n_tokens, scratch, stream(),
                               given == GivenX::Kind::prepared_rows, side);
    else
      kernels::matmul_shared_x_handed(handed_of(given), outs, n_outs, n_in, x, n_tokens, scratch,
                                      stream(), side, given_.n_parts());
    launched("matmul");
  }
  static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

  ExpertsGrouped experts_grouped_;  // matmul_experts steps the device path does not take
  // Where matmul reads a weight from, and in which layout.
  // One expert's matrix of a stacked [n_in x rows x experts] tensor in its device form (tiled
  // records or the file's rows), and the bytes before row row_begin of it.
  struct ExpertSpan {
    int64_t matrix, skip;
  };
  static ExpertSpan expert_span(const TensorView& s, kernels::WeightLayout layout,
                                int64_t row_begin) {
    const auto n_in = static_cast<int64_t>(s.ne[0]), rows = static_cast<int64_t>(s.ne[1]);
    if (layout == kernels::WeightLayout::tiled)
      return {static_cast<int64_t>(kernels::matmul_tiled_bytes(s.dtype, n_in, rows)),
              static_cast<int64_t>(kernels::matmul_tiled_bytes(s.dtype, n_in, row_begin))};
    const auto row_bytes =
        static_cast<int64_t>(dtype_row_bytes(s.dtype, static_cast<uint64_t>(n_in), "expert"));
    return {row_bytes * rows, row_bytes * row_begin};
  }
  std::pair<const void*, kernels::WeightLayout> matmul_form(const TensorView& w) const {
    const auto it = tiled_.find(w.data);
    if (it == tiled_.end()) return {w.data, kernels::WeightLayout::ggml};
    return {it->second, kernels::WeightLayout::tiled};
  }
  std::map<std::vector<double>, Buffer> rope_tables_;
  Buffer matmul_scratch_, attention_scratch_, experts_scratch_;
  // Per-step metadata: host copy (for host-side checks), each sequence's first token (computed
  // here for the linear-attention kernels), pinned staging, device copy.
  StepLayout host_step_;
  std::vector<int32_t> seq_begin_;
  PinnedBuffer staging_;
  Buffer step_buffer_;
  // sample_rows: pinned staging and device copy of the parameter lists, work rows, results.
  PinnedBuffer sample_staging_;
  Buffer sample_in_, sample_scratch_, sample_out_;
  cudaEvent_t staged_ = nullptr;  // the last staging copy has been read
  kernels::StepDev step_;
  const int32_t* dev_tokens_ = nullptr;
  const int32_t* dev_logit_rows_ = nullptr;
  // Recorded decode steps by shape; a null exec marks a shape whose recording failed (eager).
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  bool capturing_ = false;
  GraphStats graph_stats_;
  std::unique_ptr<SideStreamOwner> side_;  // prefill products beside each other (side_stream.h)
};

void CudaOps::graph_run(const GraphKey& key, const std::function<void()>& forward) {
  if (!broken_.empty()) fail(ErrorCode::internal, "the GPU is unusable after: {}", broken_);
  bind();
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    ++forward_;
    forward();  // this step's result, eagerly; it also grows every buffer the recording reads
    graphs_.emplace(key, record(key, forward));
    return;
  }
  if (!it->second) {
    ++forward_;
    return forward();
  }
  launched("graph replay", cudaGraphLaunch(it->second, stream()));
  ++graph_stats_.replays;
}

// Records forward on the stream (nothing runs) and instantiates it. Any failure (a CUDA error,
// out of memory, an op that is not recordable) is logged once and leaves the shape eager, with
// no error left pending for the next launch check; a sticky error still stops the backend.
cudaGraphExec_t CudaOps::record(const GraphKey& key, const std::function<void()>& forward) {
  std::string why;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (++n_recordings_ == faults_.capture_at) {
    why = "injected fault (MEMRA_CUDA_FAULT=capture)";
  } else if (cudaError_t st = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
             st != cudaSuccess) {
    why = fmt_error("cudaStreamBeginCapture", st);
  } else {
    capturing_ = true;
    ++forward_;  // the recording makes its own tables
    try {
      forward();
    } catch (const std::exception& e) {
      why = e.what();
    }
    capturing_ = false;
    st = cudaStreamEndCapture(stream(), &graph);
    if (why.empty() && st != cudaSuccess) why = fmt_error("cudaStreamEndCapture", st);
    if (why.empty() && (st = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess) {
      why = fmt_error("cudaGraphInstantiate", st);
      exec = nullptr;
    }
    if (graph) (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();
  if (!broken_.empty()) fail(ErrorCode::internal, "{}", broken_);
  ++(why.empty() ? graph_stats_.recorded : graph_stats_.failed);
  if (!why.empty())
    MEMRA_LOG_WARN(
        "cuda graphs: recording the decode step of {} tokens (context {}) failed, it "
        "runs eagerly: {}",
        key.n_tokens, key.max_context, why);
  else
    MEMRA_LOG_DEBUG("cuda graphs: recorded the decode step of {} tokens (context {}{})",
                    key.n_tokens, key.max_context, key.argmax_cols > 0 ? ", greedy" : "");
  return exec;
}

// Packs the step's int arrays into one pinned buffer and uploads it with one copy; kernels read
// the device copy in stream order, so the next step may refill staging once that copy is done.
void CudaOps::step_begin(const StepLayout& step) {
  if (!broken_.empty()) fail(ErrorCode::internal, "the GPU is unusable after: {}", broken_);
  bind();
  host_step_ = step;
  ++forward_;
  // Tokens are grouped by sequence in order (step_layout_build): sequence s spans
  // [seq_begin_[s], seq_begin_[s + 1]).
  const int32_t n_seqs = step.n_seqs();
  seq_begin_.assign(n_seqs + 1, step.n_tokens());
  for (int32_t t = step.n_tokens() - 1; t >= 0; --t) {
    const int32_t s = step.token_seq[t];
    if (s >= 0 && s < n_seqs) seq_begin_[s] = t;
  }
  for (int32_t s = n_seqs - 1; s >= 0; --s)
    seq_begin_[s] = std::min(seq_begin_[s], seq_begin_[s + 1]);
  const std::vector<int32_t>* arrays[] = {&step.tokens,      &step.positions,    &step.slots,
                                          &step.token_seq,   &step.block_tables, &step.logit_rows,
                                          &step.state_slots, &seq_begin_};
  constexpr int kArrays = sizeof(arrays) / sizeof(arrays[0]);
  size_t total = 0;
  for (const auto* a : arrays) total += (a->size() + 31) / 32 * 32;  // 128-byte aligned parts
  total = std::max<size_t>(total, 32);
  check(cudaEventSynchronize(staged_), "step metadata staging");
  staging_.reserve(total * sizeof(int32_t));
  grow(step_buffer_, total * sizeof(int32_t));
  auto* host = static_cast<int32_t*>(staging_.data());
  auto* dev = static_cast<int32_t*>(step_buffer_.data());
  const int32_t* parts[kArrays];
  size_t offset = 0;
  for (int i = 0; i < kArrays; ++i) {
    std::memcpy(host + offset, arrays[i]->data(), arrays[i]->size() * sizeof(int32_t));
    parts[i] = dev + offset;
    offset += (arrays[i]->size() + 31) / 32 * 32;
  }
  check(cudaMemcpyAsync(dev, host, offset * sizeof(int32_t), cudaMemcpyHostToDevice, stream()),
        "step metadata upload");
  check(cudaEventRecord(staged_, stream()), "cudaEventRecord");
  dev_tokens_ = parts[0];
  step_.n_tokens = step.n_tokens();
  step_.n_seqs = step.n_seqs();
  step_.max_blocks = step.max_blocks;
  step_.positions = parts[1];
  step_.slots = parts[2];
  step_.token_seq = parts[3];
  step_.block_tables = parts[4];
  dev_logit_rows_ = parts[5];
  step_.max_context = step.max_context;
  step_.state_slots = parts[6];
  step_.seq_begin = parts[7];
}

}  // namespace

int ops_cuda_device_count() {
  return device_count();
}

std::shared_ptr<Ops> ops_cuda_create(const CudaOpsOptions& options) {
  return std::make_shared<CudaOps>(options);
}

bool ops_cuda_memory(const Ops& ops, uint64_t& free_bytes, uint64_t& total_bytes) {
  const auto* cuda = dynamic_cast<const CudaOps*>(&ops);
  if (!cuda) return false;
  cuda->memory(free_bytes, total_bytes);
  return true;
}

}  // namespace memra::cuda
