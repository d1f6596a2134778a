// The shared decoder blocks. Every op result is traced by (name, layer) so a debug dump lines up
// with the reference implementation's intermediates.
#include "models/decoder.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

DecoderModel::DecoderModel(std::shared_ptr<const ModelArchive> archive,
                           const ModelLoadOptions& options)
    : archive_(std::move(archive)), trace_(options.trace) {
  cfg_ = model_config_read(*archive_);
  w_ = model_weights_bind(*archive_, cfg_);
  ops_ = ops_cpu_create({options.n_threads, options.reference});
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
}

uint64_t DecoderModel::kv_bytes_per_token() const {
  return uint64_t{2} * sizeof(float) * cfg_.n_layers * cfg_.n_kv_heads * cfg_.head_dim;
}

std::unique_ptr<KvCache> DecoderModel::kv_cache_create(int32_t n_blocks, int32_t block_size) const {
  return std::make_unique<CpuKvCache>(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, n_blocks,
                                      block_size);
}

CpuKvCache& DecoderModel::kv_cast(KvCache& kv) const {
  auto* cpu = dynamic_cast<CpuKvCache*>(&kv);
  if (!cpu) fail(ErrorCode::invalid_argument, "KV cache was not created by this CPU model");
  return *cpu;
}

int64_t DecoderModel::begin_step(const Batch& batch, std::span<float> logits) {
  const int64_t n = batch.n_tokens();
  if (batch.positions.size() != batch.tokens.size())
    fail(ErrorCode::invalid_argument, "batch has {} tokens but {} positions", n,
         batch.positions.size());
  int64_t next = 0;
  for (const BatchSeq& seq : batch.seqs) {
    if (seq.first_token != next || seq.n_tokens <= 0 || seq.n_past < 0 || next + seq.n_tokens > n)
      fail(ErrorCode::invalid_argument, "batch sequence at token {} is not contiguous", next);
    for (int32_t i = 0; i < seq.n_tokens; ++i)
      if (batch.positions[next + i] != seq.n_past + i)
        fail(ErrorCode::invalid_argument, "token {} has position {}, expected n_past + {} = {}",
             next + i, batch.positions[next + i], i, seq.n_past + i);
    next += seq.n_tokens;
  }
  if (next != n)
    fail(ErrorCode::invalid_argument, "batch sequences cover {} of {} tokens", next, n);
  for (int32_t t : batch.logit_tokens)
    if (t < 0 || t >= n) fail(ErrorCode::invalid_argument, "logit token {} outside the batch", t);
  if (logits.size() != batch.logit_tokens.size() * static_cast<size_t>(cfg_.n_vocab))
    fail(ErrorCode::invalid_argument, "logits span holds {} floats, expected {} rows of {}",
         logits.size(), batch.logit_tokens.size(), cfg_.n_vocab);
  const auto grow = [](std::vector<float>& v, int64_t size) {
    if (static_cast<int64_t>(v.size()) < size) v.resize(size);
  };
  const int64_t q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
  const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
  for (auto* v : {&s_.x, &s_.h, &s_.out}) grow(*v, n * cfg_.n_embd);
  for (auto* v : {&s_.q, &s_.attn}) grow(*v, n * q_dim);
  for (auto* v : {&s_.k, &s_.v}) grow(*v, n * kv_dim);
  for (auto* v : {&s_.gate, &s_.up}) grow(*v, n * cfg_.n_ff);
  grow(s_.sel, static_cast<int64_t>(batch.logit_tokens.size()) * cfg_.n_embd);
  return n;
}

void DecoderModel::trace(const char* name, int il, const float* data, int64_t n_rows,
                         int64_t n_cols) const {
  if (trace_) trace_(TraceEvent{name, il, data, n_rows, n_cols});
}

void DecoderModel::embed(const Batch& batch, float* x) {
  const int64_t n = batch.n_tokens();
  ops_->get_rows(*w_.token_embd, batch.tokens, x);
  if (cfg_.embed_scale != 1.0f) ops_->scale(x, cfg_.embed_scale, n * cfg_.n_embd);
  trace("embed", -1, x, n, cfg_.n_embd);
}

void DecoderModel::norm(const float* x, const std::vector<float>& w, int64_t n, float* y,
                        const char* name, int il) {
  ops_->rms_norm(x, w.data(), n, cfg_.n_embd, cfg_.norm_eps, y);
  trace(name, il, y, n, cfg_.n_embd);
}

void DecoderModel::attention_block(int il, const Batch& batch, CpuKvCache& kv, const float* h,
                                   float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t n = batch.n_tokens();
  const int hd = cfg_.head_dim;
  const int64_t q_dim = int64_t{cfg_.n_heads} * hd, kv_dim = int64_t{cfg_.n_kv_heads} * hd;
  float *q = s_.q.data(), *k = s_.k.data(), *v = s_.v.data();
  ops_->matmul(*L.wq, h, n, q);
  ops_->matmul(*L.wk, h, n, k);
  ops_->matmul(*L.wv, h, n, v);
  if (cfg_.qkv_bias) {
    ops_->add_row(q, L.bq.data(), n, q_dim);
    ops_->add_row(k, L.bk.data(), n, kv_dim);
    ops_->add_row(v, L.bv.data(), n, kv_dim);
  }
  trace("q", il, q, n, q_dim);
  trace("k", il, k, n, kv_dim);
  trace("v", il, v, n, kv_dim);
  if (cfg_.qk_norm) {
    ops_->rms_norm(q, L.q_norm.data(), n * cfg_.n_heads, hd, cfg_.norm_eps, q);
    ops_->rms_norm(k, L.k_norm.data(), n * cfg_.n_kv_heads, hd, cfg_.norm_eps, k);
    trace("q_norm", il, q, n, q_dim);
    trace("k_norm", il, k, n, kv_dim);
  }
  const int32_t window = cfg_.window[il];
  const RopeParams& rope = window > 0 ? cfg_.rope_local : cfg_.rope_global;
  ops_->rope(q, n, cfg_.n_heads, hd, batch.positions, rope);
  ops_->rope(k, n, cfg_.n_kv_heads, hd, batch.positions, rope);
  trace("q_rope", il, q, n, q_dim);
  trace("k_rope", il, k, n, kv_dim);
  const KvLayerView kv_layer = kv.layer(il);
  ops_->kv_store(kv_layer, batch.seqs, k, v);
  const AttentionParams params{cfg_.n_heads, cfg_.attn_scale, cfg_.attn_softcap, window};
  ops_->attention(kv_layer, batch.seqs, q, params, s_.attn.data());
  trace("attn", il, s_.attn.data(), n, q_dim);
  ops_->matmul(*L.wo, s_.attn.data(), n, out);
  trace("attn_out", il, out, n, cfg_.n_embd);
}

void DecoderModel::mlp_block(int il, const float* h, int64_t n, float* out) {
  const LayerWeights& L = w_.layers[il];
  const int64_t n_ff = cfg_.n_ff;
  ops_->matmul(*L.w_gate, h, n, s_.gate.data());
  ops_->matmul(*L.w_up, h, n, s_.up.data());
  trace("ffn_gate", il, s_.gate.data(), n, n_ff);
  trace("ffn_up", il, s_.up.data(), n, n_ff);
  if (cfg_.activation == Activation::gelu_tanh)
    ops_->gelu_tanh_mul(s_.gate.data(), s_.up.data(), n * n_ff, s_.gate.data());
  else
    ops_->silu_mul(s_.gate.data(), s_.up.data(), n * n_ff, s_.gate.data());
  trace("ffn_act", il, s_.gate.data(), n, n_ff);
  ops_->matmul(*L.w_down, s_.gate.data(), n, out);
  trace("ffn_out", il, out, n, cfg_.n_embd);
}

void DecoderModel::logits_block(const Batch& batch, const float* x, std::span<float> logits) {
  const int64_t n_rows = static_cast<int64_t>(batch.logit_tokens.size());
  if (n_rows == 0) return;
  for (int64_t r = 0; r < n_rows; ++r)
    std::copy_n(x + int64_t{batch.logit_tokens[r]} * cfg_.n_embd, cfg_.n_embd,
                s_.sel.data() + r * cfg_.n_embd);
  norm(s_.sel.data(), w_.output_norm, n_rows, s_.sel.data(), "output_norm", -1);
  ops_->matmul(*w_.output, s_.sel.data(), n_rows, logits.data());
  if (cfg_.final_softcap > 0)
    ops_->softcap(logits.data(), cfg_.final_softcap, n_rows * int64_t{cfg_.n_vocab});
  trace("logits", -1, logits.data(), n_rows, cfg_.n_vocab);
}

}  // namespace memra
