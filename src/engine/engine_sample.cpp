// Steps whose sampling chain runs on the backend (a GPU: Ops::sample_rows through
// Model::forward_sample): each row's parameters, penalty counts, sorted logit bias, grammar
// bitmask and the step's uniform go up; a RowResult per row (token, raw statistics for logprobs)
// comes back instead of the logit rows. The device reproduces the host chain bit for bit
// (core/sampling_math.h), so tokens and logprobs are those of the host sampler. Rows the device
// leaves to the host (kRowDeferred: a NaN or +inf logit, no finite logit, top-p reaching past
// the device's 1024-token ranked head) download their logit row and run the host chain with the
// same spec (same uniform); score rows download their row as well.
#include <algorithm>

#include "engine/engine_thread.h"

namespace memra::detail {

bool EngineImpl::backend_sampling_step() const {
  return options_.device_sampling && parts_.ops && !parts_.ops->host_memory() &&
         parts_.model->samples_on_backend(n_tokens_);
}

// Before the forward pass: a spec per logit row (drawing each sampled row's uniform, in row
// order, as the host path draws them) and the flattened lists for the backend.
void EngineImpl::backend_rows_build(const StepPlan& plan) {
  BackendRows& b = backend_;
  const size_t rows = plan.logit_seqs.size();
  b.specs.resize(rows);
  b.blocked.assign(rows, 0);
  b.params.clear();
  b.penalties.clear();
  b.bias.clear();
  b.mask_words.clear();
  for (size_t j = 0; j < rows; ++j) {
    Active& a = static_cast<Active&>(*plan.logit_seqs[j]);
    SampleSpec& spec = b.specs[j];
    const structured::TokenMask* allowed = a.constraint ? &a.constraint->allowed() : nullptr;
    if (allowed && std::none_of(allowed->words.begin(), allowed->words.end(),
                                [](uint64_t w) { return w != 0; }))
      b.blocked[j] = 1;
    if (a.done || a.request.kind == RequestKind::score || b.blocked[j]) {
      // Nothing to draw: the row still takes its slot in the batch, as a greedy row whose result
      // is never read.
      spec = SampleSpec{};
      spec.params.greedy = 1;
      b.params.push_back(spec.params);
      continue;
    }
    a.sampler.prepare(allowed, spec);
    sampling::RowParams p = spec.params;
    p.penalty_begin = static_cast<int32_t>(b.penalties.size());
    b.penalties.insert(b.penalties.end(), spec.penalties.begin(), spec.penalties.end());
    p.bias_begin = static_cast<int32_t>(b.bias.size());
    b.bias.insert(b.bias.end(), spec.bias.begin(), spec.bias.end());
    if (allowed) {
      p.mask_begin = static_cast<int64_t>(b.mask_words.size());
      b.mask_words.insert(b.mask_words.end(), allowed->words.begin(), allowed->words.end());
    }
    b.params.push_back(p);
  }
  b.results.resize(rows);
}

void EngineImpl::backend_row(Active& a, size_t row) {
  if (backend_.blocked[row])
    return finish_with_error(
        a, "the output grammar cannot continue with any token of this vocabulary");
  const SampleSpec& spec = backend_.specs[row];
  GeneratedToken token;
  if (backend_.results[row].status == sampling::kRowDeferred) {
    backend_.row.resize(static_cast<size_t>(n_tokens_));
    parts_.model->logits_row(row, backend_.row);
    token = a.sampler.run(backend_.row, spec);
  } else {
    token = a.sampler.finish(spec, backend_.results[row]);
  }
  if (spec.mask && !spec.mask->allows(token.id))  // greedy, when every allowed logit is -inf
    return finish_with_error(
        a, "the model gave no finite logit to any token the output grammar allows");
  on_token(a, token);
}

void EngineImpl::backend_score_row(Active& a, size_t row) {
  backend_.row.resize(static_cast<size_t>(n_vocab_));
  parts_.model->logits_row(row, backend_.row);
  score_row(a, backend_.row);
}

}  // namespace memra::detail
