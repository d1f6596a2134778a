// The shared decoder blocks. Every op result is traced by (name, layer) so a debug dump lines up
// with the reference implementation's intermediates.
#include "models/decoder.h"

#include <algorithm>

#include "core/env.h"
#include "core/error.h"
#include "models/step_layout.h"

namespace memra {

namespace {

const float* f32(const TensorView& t) {
  return static_cast<const float*>(t.data);
}

// How finely decode steps' batch sizes are bucketed into graphs (step_layout.h's BucketGrain):
// MEMRA_GRAPH_SMALL_BUCKETS=fine (the default since the forty-ninth round) every size to 16, every
// fourth to 32 and every eighth to 64 (H200: 8B Q4_K_M at 11 / 14 / 40 sequences 4-7% faster than
// =1's, the 0.6B's at 11 12%), =1 every size to 8 and 12, =0 the powers of two and their
// midpoints as before the forty-seventh round. The same tokens in every grain (a padded sequence
// changes no other sequence's bits: the determinism contract).
BucketGrain graph_bucket_grain() {
  static const BucketGrain grain =
      static_cast<BucketGrain>(env_choice("MEMRA_GRAPH_SMALL_BUCKETS", {"0", "1", "fine"}, 2));
  return grain;
}

}  // namespace

DecoderModel::DecoderModel(std::shared_ptr<const ModelArchive> archive,
                           const ModelLoadOptions& options)
    : archive_(std::move(archive)),
      ops_(options.ops),
      trace_(options.trace),
      moe_routes_(options.moe_routes) {
  if (!ops_) fail(ErrorCode::invalid_argument, "model_load: no backend given");
  cfg_ = model_config_read(*archive_);
  w_ = model_weights_bind(*archive_, cfg_);
  kv_dtype_ = options.kv_dtype.value_or(ops_->kv_dtype_default());
  ops_->kv_dtype_check(kv_dtype_);
  info_.architecture = cfg_.arch;
  info_.name = archive_->metadata.get_string("general.name").value_or("");
  info_.n_vocab = cfg_.n_vocab;
  info_.n_ctx_train = cfg_.n_ctx_train;
  info_.n_layers = cfg_.n_layers;
  info_.n_embd = cfg_.n_embd;
  for (const TensorView& t : archive_->tensors) {
    info_.n_params += t.n_elements();
    info_.weight_bytes += t.n_bytes;
  }
  info_.device = ops_->name();
  info_.kv_dtype = kv_dtype_;
  if (cfg_.hybrid()) {
    // Before any weight moves to the device: a backend without the ops is refused by name.
    if (!ops_->linear_attention_supported())
      fail(ErrorCode::unsupported,
           "the {} backend cannot run {} (its linear-attention layers need the ops ssm_conv, "
           "gated_delta_rule, rms_norm_gated and sigmoid_mul); run it on the CPU (--device cpu)",
           ops_->name(), cfg_.arch);
    if (!ops_->delta_rule_k_dim_supported(cfg_.ssm_k_dim))
      fail(ErrorCode::unsupported,
           "the {} backend has no gated_delta_rule kernel for key heads of {} (this {} model); run "
           "it on the CPU (--device cpu)",
           ops_->name(), cfg_.ssm_k_dim, cfg_.arch);
    // The prefix cache serves these models through state snapshots at block boundaries (the
    // engine's StateSnapshots), so prefix_cache_unsupported stays empty.
  }
  // Every head size attention reads from the cache (a layer that shares another's KV or keeps
  // recurrent state has none of its own).
  const std::vector<KvLayerShape> shapes = kv_shapes();
  for (size_t il = 0; il < shapes.size(); ++il) {
    const int32_t head_dim = shapes[il].head_dim;
    if (head_dim <= 0 || ops_->attention_head_dim_supported(head_dim, kv_dtype_)) continue;
    // A size the backend runs with its default cache type (CUDA: 512 with F16, not F32).
    const DType fallback = ops_->kv_dtype_default();
    if (fallback != kv_dtype_ && ops_->attention_head_dim_supported(head_dim, fallback))
      fail(ErrorCode::unsupported,
           "the {} backend has no attention kernel for head_dim {} with a {} KV cache (layer {} "
           "of this {} model); use a {} KV cache (--kv-dtype {}) or run it on the CPU (--device "
           "cpu)",
           ops_->name(), head_dim, dtype_name(kv_dtype_), il, cfg_.arch, dtype_name(fallback),
           dtype_name(fallback));
    fail(ErrorCode::unsupported,
         "the {} backend has no attention kernel for head_dim {} (layer {} of this {} model); "
         "run it on the CPU (--device cpu)",
         ops_->name(), head_dim, il, cfg_.arch);
  }
  if (cfg_.n_expert > 0 && !ops_->moe_route_supported(cfg_.n_expert, cfg_.n_expert_used))
    fail(ErrorCode::unsupported,
         "the {} backend cannot route {} experts, {} a token (this {} model); run it on the CPU "
         "(--device cpu)",
         ops_->name(), cfg_.n_expert, cfg_.n_expert_used, cfg_.arch);
  model_weights_upload(w_, *ops_, options.progress);
}

std::vector<KvLayerShape> DecoderModel::kv_shapes() const {
  std::vector<KvLayerShape> shapes(static_cast<size_t>(cfg_.n_layers));
  for (int il = 0; il < cfg_.n_layers; ++il) {
    if (!cfg_.layer_n_kv_heads.empty()) {  // gemma4: per-layer shapes, 0 kv heads when shared
      const int32_t heads = cfg_.layer_n_kv_heads[il];
      shapes[il] = {heads, heads > 0 ? cfg_.layer_head_dim[il] : 0};
    } else if (!(cfg_.hybrid() && cfg_.recurrent_layer[il])) {  // linear attention: no KV
      shapes[il] = {cfg_.n_kv_heads, cfg_.head_dim};
    }
  }
  return shapes;
}

uint64_t DecoderModel::kv_bytes_per_token() const {
  return BackendKvCache::bytes_per_token(kv_dtype_, kv_shapes());
}

RecurrentStateShape DecoderModel::state_shape(int32_t n_slots) const {
  RecurrentStateShape shape;
  if (!cfg_.hybrid()) return shape;
  shape.layers = cfg_.recurrent_layer;
  shape.conv_floats = int64_t{cfg_.ssm_conv_kernel - 1} * cfg_.ssm_conv_dim();
  shape.ssm_floats = int64_t{cfg_.ssm_v_heads} * cfg_.ssm_k_dim * cfg_.ssm_v_dim;
  shape.n_slots = n_slots;
  return shape;
}

uint64_t DecoderModel::state_bytes_per_seq() const {
  return state_shape(1).bytes_per_slot();
}

std::unique_ptr<KvCache> DecoderModel::kv_cache_create(int32_t n_blocks, int32_t block_size,
                                                       int32_t n_state_slots) const {
  return std::make_unique<BackendKvCache>(ops_, kv_dtype_, kv_shapes(), n_blocks, block_size,
                                          state_shape(n_state_slots));
}

const BackendKvCache& DecoderModel::kv_cast(const KvCache& kv) const {
  const auto* cache = dynamic_cast<const BackendKvCache*>(&kv);
  if (!cache || cache->owner() != ops_.get())
    fail(ErrorCode::invalid_argument, "KV cache was not created by this model's backend");
  return *cache;
}

DecoderModel::~DecoderModel() {
  ops_->graphs_drop();
}

std::vector<int32_t> DecoderModel::prepare(const StepLimits& limits) {
  const int32_t max_seqs = std::min(limits.max_sequences, limits.max_batch_tokens);
  graph_buckets_.clear();
  if (max_seqs < 1) return {};  // the engine refuses these limits by name
  // Traced steps download activations between ops, which a recording cannot hold; so would an
  // MoE layer whose backend reads the routing on the host (buckets above what it keeps on the
  // device run eagerly). A hybrid model's padding sequences share the cache's scratch state slot
  // (graph_pad), which each padded step resets (their tokens sit at position 0).
  if (limits.graphs && ops_->graphs_supported() && !trace_ && !moe_routes_) {
    graph_buckets_ = graph_batch_buckets(max_seqs, graph_bucket_grain());
    std::erase_if(graph_buckets_, [&](int32_t n) { return !moe_on_device(n); });
    graph_context_limit_ = limits.context_length;
  }
  // Device memory: the largest step's buffers now, before the KV cache takes the rest.
  if (!ops_->host_memory()) reserve(limits.max_batch_tokens, max_seqs, true, true);
  return graph_buckets_;
}

bool DecoderModel::moe_on_device(int64_t n_tokens) const {
  const int64_t pairs = n_tokens * cfg_.n_expert_used;
  for (const LayerWeights& L : w_.layers) {
    if (!L.ffn_down_exps.data) continue;
    const TensorView& gate_up = L.ffn_gate_up_exps.data ? L.ffn_gate_up_exps : L.ffn_gate_exps;
    for (const ExpertMatrix& m :
         {ExpertMatrix{&gate_up, 0, cfg_.n_ff_exp}, ExpertMatrix{&L.ffn_down_exps, 0, cfg_.n_embd}})
      if (!ops_->matmul_experts_on_device(m, pairs)) return false;
  }
  return true;
}

void DecoderModel::reserve(int64_t n, int64_t n_logits, bool logits, bool ids) {
  const auto floats = [](int64_t count) { return static_cast<size_t>(count) * sizeof(float); };
  const int64_t q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
  const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
  for (Buffer* b : {&s_.x, &s_.h, &s_.out}) grow(*b, floats(n * cfg_.n_embd));
  for (Buffer* b : {&s_.q, &s_.attn}) grow(*b, floats(n * q_dim));
  for (Buffer* b : {&s_.k, &s_.v}) grow(*b, floats(n * kv_dim));
  // The dense MLP's width, or a shared expert's (qwen35moe has no dense MLP).
  for (Buffer* b : {&s_.gate, &s_.up}) grow(*b, floats(n * std::max(cfg_.n_ff, cfg_.n_ff_shexp)));
  if (cfg_.n_expert > 0) {
    const int64_t pairs = n * cfg_.n_expert_used;
    grow(s_.moe_logits, floats(n * cfg_.n_expert));
    for (Buffer* b : {&s_.moe_ids, &s_.moe_weights}) grow(*b, floats(pairs));  // 4-byte items
    grow(s_.moe_y, floats(pairs * cfg_.n_embd));
    for (Buffer* b : {&s_.moe_gate, &s_.moe_up}) grow(*b, floats(pairs * cfg_.n_ff_exp));
  }
  if (cfg_.moe_beside_mlp)
    for (Buffer* b : {&s_.moe_router_in, &s_.moe_out}) grow(*b, floats(n * cfg_.n_embd));
  if (cfg_.attn_output_gate) grow(s_.attn_gate, floats(n * q_dim));
  if (cfg_.hybrid()) {
    const int64_t conv_dim = cfg_.ssm_conv_dim(),
                  v_total = int64_t{cfg_.ssm_v_heads} * cfg_.ssm_v_dim;
    for (Buffer* b : {&s_.ssm_qkv, &s_.ssm_conv}) grow(*b, floats(n * conv_dim));
    for (Buffer* b : {&s_.ssm_z, &s_.ssm_core}) grow(*b, floats(n * v_total));
    for (Buffer* b : {&s_.ssm_a, &s_.ssm_b}) grow(*b, floats(n * cfg_.ssm_v_heads));
  }
  grow(s_.sel, floats(n_logits * cfg_.n_embd));
  if (logits) grow(s_.logits, floats(n_logits * cfg_.n_vocab));
  if (ids) grow(s_.ids, static_cast<size_t>(n_logits) * sizeof(int32_t));
}

void DecoderModel::grow(Buffer& b, size_t bytes) {
  if (b.bytes() >= bytes) return;
  if (b.data()) ops_->graphs_drop();
  b.reset();
  b = ops_->alloc(bytes);
}

GraphKey DecoderModel::begin_step(const Batch& batch, const BackendKvCache& kv,
                                  int32_t argmax_cols) {
  step_layout_build(batch, kv.block_size(), kv.n_blocks(),
                    static_cast<int32_t>(w_.token_embd.n_rows()), step_, kv.n_state_slots());
  GraphKey key;
  if (!graph_buckets_.empty() && step_is_pure_decode(step_)) {
    const int32_t n = graph_batch_bucket(graph_buckets_, step_.n_tokens());
    const int32_t context = graph_context_bucket(step_.max_context, graph_context_limit_);
    const int32_t max_blocks = (context + kv.block_size() - 1) / kv.block_size();
    if (n > 0 && context > 0 && max_blocks >= step_.max_blocks) {
      graph_pad(step_, n, max_blocks, context, kv.scratch_block(), kv.scratch_state_slot());
      key = GraphKey{this, n, max_blocks, context, argmax_cols};
    }
  }
  ops_->step_begin(step_);
  const bool own_logits = !ops_->host_memory() || argmax_cols > 0 || key.n_tokens > 0;
  reserve(step_.n_tokens(), std::max(1, step_.n_logits()), own_logits, argmax_cols > 0);
  return key;
}

void DecoderModel::forward(const Batch& batch, KvCache& kv, std::span<float> logits) {
  run(batch, kv, logits, 0, {});
}

void DecoderModel::forward_greedy(const Batch& batch, KvCache& kv, int32_t n_cols,
                                  std::span<int32_t> ids) {
  if (n_cols < 1 || n_cols > cfg_.n_vocab)
    fail(ErrorCode::invalid_argument, "forward_greedy: {} columns of {} logits", n_cols,
         cfg_.n_vocab);
  run(batch, kv, {}, n_cols, ids);
}

// The step as forward (recorded graphs included: they end with the logits in s_.logits), then
// the chain eagerly on the logits in place.
void DecoderModel::forward_sample(const Batch& batch, KvCache& kv, int32_t n_cols,
                                  const SampleRows& rows, std::span<sampling::RowResult> out) {
  const size_t n_rows = batch.logit_tokens.size();
  if (!samples_on_backend(n_cols) || rows.params.size() != n_rows || out.size() != n_rows)
    fail(ErrorCode::invalid_argument,
         "forward_sample: {} parameter rows and {} results for {} logit rows of {} columns",
         rows.params.size(), out.size(), n_rows, n_cols);
  run(batch, kv, {}, 0, {}, true);
  kept_rows_ = n_rows;
  ops_->sample_rows(s_.logits.f32(), static_cast<int64_t>(n_rows), n_cols, cfg_.n_vocab, rows, out);
}

void DecoderModel::logits_row(size_t row, std::span<float> out) {
  if (row >= kept_rows_ || out.size() > static_cast<size_t>(cfg_.n_vocab))
    fail(ErrorCode::invalid_argument, "logits_row: row {} of {} kept, {} of {} logits", row,
         kept_rows_, out.size(), cfg_.n_vocab);
  ops_->download(out.data(), s_.logits.f32() + row * static_cast<size_t>(cfg_.n_vocab),
                 out.size_bytes());
}

// Always eager (never a recorded graph): the final norm of the selected rows, then a download.
// Unlike logits_block, no output projection: a mean-pooled step selects every token.
void DecoderModel::forward_hidden(const Batch& batch, KvCache& kv_base, std::span<float> hidden) {
  const BackendKvCache& kv = kv_cast(kv_base);
  const size_t n_rows = batch.logit_tokens.size();
  if (hidden.size() != n_rows * static_cast<size_t>(cfg_.n_embd))
    fail(ErrorCode::invalid_argument, "hidden span holds {} floats, expected {} rows of {}",
         hidden.size(), n_rows, cfg_.n_embd);
  step_layout_build(batch, kv.block_size(), kv.n_blocks(),
                    static_cast<int32_t>(w_.token_embd.n_rows()), step_, kv.n_state_slots());
  ops_->step_begin(step_);
  reserve(step_.n_tokens(), std::max(1, step_.n_logits()), false, false);
  forward_layers(step_.n_tokens(), kv);
  if (n_rows == 0) return;
  float* sel = s_.sel.f32();
  ops_->gather_logit_rows(s_.x.f32(), cfg_.n_embd, sel);
  norm(sel, w_.output_norm, static_cast<int64_t>(n_rows), sel, "output_norm", -1);
  ops_->download(hidden.data(), sel, hidden.size() * sizeof(float));
}

// The step's outputs are its first n_real logit rows (padding rows come after them).
void DecoderModel::run(const Batch& batch, KvCache& kv_base, std::span<float> logits,
                       int32_t argmax_cols, std::span<int32_t> ids, bool keep) {
  const BackendKvCache& kv = kv_cast(kv_base);
  const size_t n_real = batch.logit_tokens.size(), n_vocab = static_cast<size_t>(cfg_.n_vocab);
  kept_rows_ = 0;
  if (argmax_cols == 0 && !keep && logits.size() != n_real * n_vocab)
    fail(ErrorCode::invalid_argument, "logits span holds {} floats, expected {} rows of {}",
         logits.size(), n_real, n_vocab);
  if (argmax_cols > 0 && ids.size() != n_real)
    fail(ErrorCode::invalid_argument, "ids span holds {}, expected {} rows", ids.size(), n_real);
  const GraphKey key = begin_step(batch, kv, argmax_cols);
  // Host-memory backends write the caller's logits span directly, unless the step is padded (its
  // rows outnumber the span's); others download the real rows.
  const bool direct = ops_->host_memory() && argmax_cols == 0 && !keep && key.n_tokens == 0;
  float* out = direct ? logits.data() : s_.logits.f32();
  const auto step = [&] {
    forward_layers(step_.n_tokens(), kv);
    logits_block(s_.x.f32(), out, argmax_cols);
  };
  if (key.n_tokens > 0)
    ops_->graph_run(key, step);
  else
    step();
  if (n_real == 0 || keep) return;
  if (argmax_cols > 0)
    ops_->download(ids.data(), s_.ids.data(), n_real * sizeof(int32_t));
  else if (!direct)
    ops_->download(logits.data(), out, logits.size() * sizeof(float));
}

void DecoderModel::trace(const char* name, int il, const float* data, int64_t n_rows,
                         int64_t n_cols) {
  if (!trace_) return;
  if (!ops_->host_memory()) {
    trace_host_.resize(static_cast<size_t>(n_rows * n_cols));
    ops_->download(trace_host_.data(), data, trace_host_.size() * sizeof(float));
    data = trace_host_.data();
  }
  trace_(TraceEvent{name, il, data, n_rows, n_cols});
}

void DecoderModel::embed(float* x) {
  ops_->embed(w_.token_embd, cfg_.embed_scale, x);
  trace("embed", -1, x, step_.n_tokens(), cfg_.n_embd);
}

void DecoderModel::norm(const float* x, const TensorView& w, int64_t n, float* y, const char* name,
                        int il) {
  ops_->rms_norm(x, f32(w), n, cfg_.n_embd, cfg_.norm_eps, y);
  trace(name, il, y, n, cfg_.n_embd);
}

void DecoderModel::add_norm(float* x, const float* d, const TensorView& w, int64_t n, float* y,
                            const char* residual_name, int residual_il, const char* norm_name,
                            int norm_il) {
  ops_->add_rms_norm(x, d, f32(w), n, cfg_.n_embd, cfg_.norm_eps, y);
  trace(residual_name, residual_il, x, n, cfg_.n_embd);
  trace(norm_name, norm_il, y, n, cfg_.n_embd);
}

void DecoderModel::attention_block(int il, int64_t n, const BackendKvCache& kv, const float* h,
                                   float* out) {
  const LayerWeights& L = w_.layers[il];
  const int hd = cfg_.head_dim;
  const int64_t q_dim = int64_t{cfg_.n_heads} * hd, kv_dim = int64_t{cfg_.n_kv_heads} * hd;
  float *q = s_.q.f32(), *k = s_.k.f32(), *v = s_.v.f32();
  if (cfg_.attn_output_gate) {
    const TensorView* qkv_w[] = {&L.wq, &L.wq_gate, &L.wk, &L.wv};
    float* const qkv_y[] = {q, s_.attn_gate.f32(), k, v};
    ops_->matmul_shared(qkv_w, h, n, qkv_y);
    trace("q_gate", il, s_.attn_gate.f32(), n, q_dim);
  } else {
    const TensorView* qkv_w[] = {&L.wq, &L.wk, &L.wv};
    float* const qkv_y[] = {q, k, v};
    ops_->matmul_shared(qkv_w, h, n, qkv_y);
  }
  if (cfg_.qkv_bias) {
    ops_->add_row(q, f32(L.bq), n, q_dim);
    ops_->add_row(k, f32(L.bk), n, kv_dim);
    ops_->add_row(v, f32(L.bv), n, kv_dim);
  }
  trace("q", il, q, n, q_dim);
  trace("k", il, k, n, kv_dim);
  trace("v", il, v, n, kv_dim);
  const int32_t window = cfg_.window[il];
  const RopeParams& rope = window > 0 ? cfg_.rope_local : cfg_.rope_global;
  const KvLayerView kv_layer = kv.layer(il);
  const float* q_norm = cfg_.qk_norm ? f32(L.q_norm) : nullptr;
  const float* k_norm = cfg_.qk_norm ? f32(L.k_norm) : nullptr;
  const AttentionParams params{cfg_.n_heads, cfg_.attn_scale, cfg_.attn_softcap, window};
  if (trace_) {  // the plain ops, each result traced
    if (q_norm) {
      ops_->rms_norm(q, q_norm, n * cfg_.n_heads, hd, cfg_.norm_eps, q);
      ops_->rms_norm(k, k_norm, n * cfg_.n_kv_heads, hd, cfg_.norm_eps, k);
      trace("q_norm", il, q, n, q_dim);
      trace("k_norm", il, k, n, kv_dim);
    }
    ops_->rope(q, cfg_.n_heads, hd, rope);
    ops_->rope(k, cfg_.n_kv_heads, hd, rope);
    trace("q_rope", il, q, n, q_dim);
    trace("k_rope", il, k, n, kv_dim);
    ops_->kv_store(kv_layer, k, v);
    ops_->attention(kv_layer, q, params, s_.attn.f32());
  } else {  // (q and k are not read after it)
    ops_->qk_prologue_attention(kv_layer, n, cfg_.n_heads, q, k, v, q_norm, k_norm, cfg_.norm_eps,
                                rope, params, s_.attn.f32());
  }
  trace("attn", il, s_.attn.f32(), n, q_dim);
  if (cfg_.attn_output_gate) {
    ops_->sigmoid_mul(s_.attn.f32(), s_.attn_gate.f32(), n * q_dim);
    trace("attn_gated", il, s_.attn.f32(), n, q_dim);
  }
  ops_->matmul(L.wo, s_.attn.f32(), n, out);
  trace("attn_out", il, out, n, cfg_.n_embd);
}

void DecoderModel::mixer_block(int il, int64_t n, const BackendKvCache& kv, const float* h,
                               float* out) {
  if (!cfg_.recurrent_layer.empty() && cfg_.recurrent_layer[il])
    delta_net_block(il, n, kv, h, out);
  else
    attention_block(il, n, kv, h, out);
}

void DecoderModel::ffn_block(int il, const float* h, int64_t n, float* out) {
  if (!cfg_.moe_layer.empty() && cfg_.moe_layer[il])
    moe_block(il, h, n, out);
  else
    mlp_block(il, h, n, out);
}

void DecoderModel::mlp_block(int il, const float* h, int64_t n, float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t n_ff = cfg_.n_ff;
  float *gate = s_.gate.f32(), *up = s_.up.f32();
  const TensorView* gate_up_w[] = {&L.w_gate, &L.w_up};
  float* const gate_up_y[] = {gate, up};
  ops_->matmul_shared(gate_up_w, h, n, gate_up_y);
  trace("ffn_gate", il, gate, n, n_ff);
  trace("ffn_up", il, up, n, n_ff);
  if (cfg_.activation == Activation::gelu_tanh)
    ops_->gelu_tanh_mul(gate, up, n, n_ff, gate);
  else
    ops_->silu_mul(gate, up, n, n_ff, gate);
  trace("ffn_act", il, gate, n, n_ff);
  ops_->matmul(L.w_down, gate, n, out);
  trace("ffn_out", il, out, n, cfg_.n_embd);
}

void DecoderModel::logits_block(const float* x, float* out, int32_t argmax_cols) {
  const int64_t n_rows = step_.n_logits();
  if (n_rows == 0) return;
  float* sel = s_.sel.f32();
  ops_->gather_logit_rows(x, cfg_.n_embd, sel);
  norm(sel, w_.output_norm, n_rows, sel, "output_norm", -1);
  ops_->matmul(w_.output, sel, n_rows, out);
  if (cfg_.final_softcap > 0)
    ops_->softcap(out, cfg_.final_softcap, n_rows * int64_t{cfg_.n_vocab});
  trace("logits", -1, out, n_rows, cfg_.n_vocab);
  if (argmax_cols > 0)
    ops_->argmax_rows(out, n_rows, argmax_cols, cfg_.n_vocab, static_cast<int32_t*>(s_.ids.data()));
}

}  // namespace memra
