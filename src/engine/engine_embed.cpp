// The engine thread's embedding path (/v1/embeddings and hidden-state rerank): prefill-only steps
// of their own scheduler that pool final-norm hidden rows per request and keep no KV afterwards.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine_thread.h"

namespace memra::detail {

bool EngineImpl::embed_work() const {
  return embed_scheduler_->n_waiting() + embed_scheduler_->n_running() > 0;
}

// One prefill-only step of embedding inputs. The rows each sequence needs this step are chosen
// by its pooling (mean: every token; cls: position 0; last: the final token), run through the
// final norm (Model::forward_hidden) and folded into its pool; a sequence whose last token was
// computed is finished, which frees its blocks (never published to the prefix cache). An empty
// plan means generation holds the blocks: try again next turn.
void EngineImpl::embed_step() {
  StepPlan plan = embed_scheduler_->schedule();
  if (plan.seqs.empty()) return;
  Batch& batch = plan.batch;
  batch.logit_tokens.clear();
  std::vector<int32_t> rows_of(plan.seqs.size(), 0);
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const Active& a = static_cast<const Active&>(*plan.seqs[i]);
    const BatchSeq& bs = batch.seqs[i];
    const bool ends = bs.n_past + bs.n_tokens == static_cast<int32_t>(a.tokens.size());
    int32_t first = bs.first_token, n = 0;
    if (a.request.pooling == Pooling::mean) {
      n = bs.n_tokens;
    } else if (a.request.pooling == Pooling::cls) {
      n = bs.n_past == 0 ? 1 : 0;
    } else if (ends) {
      first = bs.first_token + bs.n_tokens - 1;
      n = 1;
    }
    for (int32_t t = 0; t < n; ++t) batch.logit_tokens.push_back(first + t);
    rows_of[i] = n;
  }
  const int32_t n_embd = parts_.model->info().n_embd;
  hidden_.resize(batch.logit_tokens.size() * static_cast<size_t>(n_embd));
  try {
    parts_.model->forward_hidden(batch, *kv_, hidden_);
  } catch (const std::exception& e) {
    MEMRA_LOG_ERROR("engine embedding step failed: {}", e.what());
    const std::string why = parts_.ops ? parts_.ops->fatal_error() : std::string();
    if (!why.empty()) {
      std::lock_guard lock(mu_);
      fatal_ = why;
      stats_.fatal_error = why;
    }
    for (SeqState* seq : plan.seqs) finish_with_error(static_cast<Active&>(*seq), e.what());
    erase_finished();
    if (!why.empty())
      fail_all_in_flight("the engine stopped serving: the device is unusable (" + why + ")");
    return;
  }
  embed_scheduler_->complete(plan);
  uint64_t prompt_tokens = 0;
  const float* row = hidden_.data();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    Active& a = static_cast<Active&>(*plan.seqs[i]);
    prompt_tokens += static_cast<uint64_t>(batch.seqs[i].n_tokens);
    if (batch.seqs[i].n_past == 0) {  // a first chunk, or the restart of a preempted input
      a.pool.clear();
      a.pooled_rows = 0;
    }
    pool_rows(a, row, rows_of[i]);
    row += static_cast<size_t>(rows_of[i]) * n_embd;
    if (!a.done && a.remaining() == 0) finish_embedding(a);
  }
  erase_finished();
  std::lock_guard lock(mu_);
  stats_.steps_total += 1;
  stats_.prompt_tokens_total += prompt_tokens;
}

void EngineImpl::pool_rows(Active& a, const float* rows, int32_t n_rows) {
  const size_t n_embd = static_cast<size_t>(parts_.model->info().n_embd);
  if (a.pool.empty()) a.pool.assign(n_embd, 0.0);
  for (int32_t r = 0; r < n_rows; ++r)
    for (size_t c = 0; c < n_embd; ++c) a.pool[c] += rows[r * n_embd + c];
  a.pooled_rows += n_rows;
}

// The final event: the pooled vector (the mean divides by the row count), L2-normalized when
// asked (a zero vector stays zero).
void EngineImpl::finish_embedding(Active& a) {
  StreamEvent event;
  if (a.pooled_rows == 0) {
    event.error = "no hidden state was pooled for this input";
    finish(a, event, FinishReason::error);
    return deliver(a, event);
  }
  const double rows = a.request.pooling == Pooling::mean ? a.pooled_rows : 1.0;
  double norm2 = 0.0;
  for (double& v : a.pool) {
    v /= rows;
    norm2 += v * v;
  }
  const double inv = a.request.normalize && norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 1.0;
  event.embedding.reserve(a.pool.size());
  for (double v : a.pool) event.embedding.push_back(static_cast<float>(v * inv));
  finish(a, event, FinishReason::stop);
  deliver(a, event);
}

// Every row is the argmax of its raw logits (Sampler::plain_greedy, no grammar): the model picks
// the tokens on its device and only their ids come back.

}  // namespace memra::detail
