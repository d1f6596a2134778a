// Scheduler: one plan per step. A sequence appears in a plan at most once; its new tokens are
// tokens[n_computed, n_computed + n) and it wants logits when that reaches the end of tokens.
#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

Scheduler::Scheduler(KvBlockManager& kv, const SchedulerOptions& options, StatePool* states,
                     StateSnapshots* snapshots)
    : kv_(kv),
      options_(options),
      states_(states && states->enabled() ? states : nullptr),
      snapshots_(states_ && options.prefix_cache && snapshots && snapshots->enabled() ? snapshots
                                                                                      : nullptr) {
  if (options_.max_batch_tokens <= 0 || options_.max_sequences <= 0)
    fail(ErrorCode::invalid_argument, "max_batch_tokens ({}) and max_sequences ({}) must be > 0",
         options_.max_batch_tokens, options_.max_sequences);
}

void Scheduler::add(SeqState* seq) {
  waiting_.push_back(seq);
}

void Scheduler::remove(SeqState* seq) {
  std::erase(waiting_, seq);
  std::erase(running_, seq);
  release(seq);
}

void Scheduler::release(SeqState* seq) {
  kv_.release(seq->block_table);
  seq->block_table.clear();
  seq->block_hashes.clear();
  if (seq->state_slot >= 0) {
    if (!states_) fail(ErrorCode::internal, "a sequence holds a state slot without a state pool");
    states_->release(seq->state_slot);
    seq->state_slot = -1;
  }
  seq->n_computed = 0;
  seq->snapshot_at = 0;
  seq->cached_run_end = 0;
  seq->running = false;
}

int32_t Scheduler::blocks_needed(const SeqState& seq, int32_t n_tokens) const {
  const int32_t bs = kv_.block_size();
  const int32_t have = static_cast<int32_t>(seq.block_table.size());
  return std::max(0, (seq.n_computed + n_tokens + bs - 1) / bs - have);
}

int32_t Scheduler::tokens_that_fit(const SeqState& seq, int32_t want) const {
  const int32_t bs = kv_.block_size();
  const int32_t slots = static_cast<int32_t>(seq.block_table.size()) * bs - seq.n_computed;
  return std::min(want, slots + kv_.n_available() * bs);
}

// The next snapshot boundary past what is computed, in order: where the cached KV run this
// prompt matched ended without a snapshot (the end of what it shares with earlier prompts, such as
// a common system prompt: the prompts after it resume there); the longest prefix an identical
// prompt can reuse (it must compute its last token, so a prompt of n tokens reuses at most
// (n - 1) / bs blocks); and when the prompt ends on a block boundary, the whole prompt too
// (which the next turn of a chat, extending it, reuses). Few per prompt: a state is megabytes.
int32_t Scheduler::snapshot_target(const SeqState& seq) const {
  if (!snapshots_) return 0;
  const int32_t bs = kv_.block_size();
  const int32_t n = static_cast<int32_t>(seq.tokens.size());
  if (seq.cached_run_end > seq.n_computed) return seq.cached_run_end;
  const int32_t repeat = (n - 1) / bs * bs;
  if (repeat > seq.n_computed) return repeat;
  if (n % bs == 0 && n > seq.n_computed) return n;
  return 0;
}

int32_t Scheduler::chunk_to_snapshot(const SeqState& seq, int32_t n) const {
  if (seq.snapshot_at > seq.n_computed && seq.n_computed + n > seq.snapshot_at)
    return seq.snapshot_at - seq.n_computed;
  return n;
}

// Reuses the longest cached prefix (always leaving at least one token to compute, since the last
// token's logits are needed). A model with recurrent state resumes only from a snapshot: the
// match is cut back to end at a block that has one.
int32_t Scheduler::match_cached_prefix(SeqState& seq) {
  if (!options_.prefix_cache || (states_ && !snapshots_)) return 0;
  const int32_t max_blocks = (static_cast<int32_t>(seq.tokens.size()) - 1) / kv_.block_size();
  if (!states_) return kv_.match_prefix(seq.tokens, max_blocks, seq.block_table, seq.block_hashes);
  int32_t run = 0;
  const int32_t kept = kv_.match_prefix(
      seq.tokens, max_blocks, seq.block_table, seq.block_hashes,
      [this](uint64_t h) { return snapshots_->has(h); }, &run);
  seq.cached_run_end = run > kept ? run * kv_.block_size() : 0;
  return kept;
}

void Scheduler::preempt(SeqState* seq) {
  std::erase(running_, seq);
  release(seq);
  ++seq->n_preemptions;
  ++preemptions_;
  waiting_.push_front(seq);  // resumes before anything newer
}

SeqState* Scheduler::newest_unscheduled(const std::vector<SeqState*>& scheduled) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if (std::find(scheduled.begin(), scheduled.end(), *it) == scheduled.end()) return *it;
  return nullptr;
}

void Scheduler::add_to_plan(StepPlan& plan, SeqState* seq, int32_t n_tokens) {
  if (!kv_.allocate(blocks_needed(*seq, n_tokens), seq->block_table))
    fail(ErrorCode::internal, "kv allocation failed after the scheduler checked it");
  Batch& b = plan.batch;
  BatchSeq bs;
  bs.first_token = b.n_tokens();
  bs.n_tokens = n_tokens;
  bs.n_past = seq->n_computed;
  bs.block_table = seq->block_table;
  bs.state_slot = seq->state_slot;
  for (int32_t i = 0; i < n_tokens; ++i) {
    b.tokens.push_back(seq->tokens[static_cast<size_t>(seq->n_computed + i)]);
    b.positions.push_back(seq->n_computed + i);
  }
  if (n_tokens == seq->remaining()) {
    b.logit_tokens.push_back(bs.first_token + n_tokens - 1);
    plan.logit_seqs.push_back(seq);
  }
  b.seqs.push_back(std::move(bs));
  plan.seqs.push_back(seq);
}

// Running sequences with one token to compute, oldest first; a decode that needs a block and finds
// none preempts the newest sequence not yet in this step's plan (possibly itself).
bool Scheduler::schedule_decodes(StepPlan& plan, int32_t& budget) {
  const std::vector<SeqState*> snapshot = running_;
  bool preempted = false;
  for (SeqState* seq : snapshot) {
    if (budget == 0) break;
    if (!seq->running || seq->remaining() != 1) continue;
    while (kv_.n_available() < blocks_needed(*seq, 1)) {
      SeqState* victim = newest_unscheduled(plan.seqs);
      if (victim == nullptr) break;
      preempt(victim);
      preempted = true;
      if (victim == seq) break;
    }
    if (!seq->running) continue;
    if (kv_.n_available() < blocks_needed(*seq, 1)) continue;
    add_to_plan(plan, seq, 1);
    --budget;
  }
  return preempted;
}

void Scheduler::schedule_prefills(StepPlan& plan, int32_t& budget, bool admit) {
  for (SeqState* seq : running_) {
    if (budget == 0) return;
    if (seq->remaining() <= 1) continue;  // decodes were handled first
    const int32_t n =
        chunk_to_snapshot(*seq, tokens_that_fit(*seq, std::min(seq->remaining(), budget)));
    if (n <= 0) continue;
    add_to_plan(plan, seq, n);
    budget -= n;
  }
  while (admit && budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < options_.max_sequences) {
    if (!admit_one(plan, budget)) break;
  }
}

// Admits the queue head: takes a state slot (models with recurrent state), reuses its cached
// prefix (restoring the state snapshot there) and schedules its first chunk.
bool Scheduler::admit_one(StepPlan& plan, int32_t& budget) {
  SeqState* seq = waiting_.front();
  if (states_) {
    seq->state_slot = states_->allocate();
    if (seq->state_slot < 0) return false;  // every slot is running: wait for one to finish
  }
  seq->n_computed = match_cached_prefix(*seq) * kv_.block_size();
  seq->snapshot_at = snapshot_target(*seq);
  const int32_t n =
      chunk_to_snapshot(*seq, tokens_that_fit(*seq, std::min(seq->remaining(), budget)));
  if (n <= 0) {
    release(seq);
    return false;
  }
  if (states_ && seq->n_computed > 0) {
    // Copied before this step's forward pass; the slot stays intact until then (snapshots are
    // written only after a forward pass).
    const int32_t from = snapshots_->restore(seq->block_hashes.back());
    if (from < 0) fail(ErrorCode::internal, "a prefix match ended at a block with no snapshot");
    plan.state_restores.push_back({from, seq->state_slot});
  }
  if (seq->n_cached_first < 0) seq->n_cached_first = seq->n_computed;
  waiting_.pop_front();
  seq->running = true;
  auto at = std::find_if(running_.begin(), running_.end(),
                         [&](const SeqState* r) { return r->order > seq->order; });
  running_.insert(at, seq);
  add_to_plan(plan, seq, n);
  budget -= n;
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int32_t budget = options_.max_batch_tokens;
  const bool preempted = schedule_decodes(plan, budget);
  schedule_prefills(plan, budget, /*admit=*/!preempted);
  if (plan.seqs.empty()) schedule_prefills(plan, budget, /*admit=*/true);
  // Sequences mid-prefill can hold every block with none able to grow: free the newest one.
  while (plan.seqs.empty() && !running_.empty()) {
    preempt(running_.back());
    budget = options_.max_batch_tokens;
    schedule_prefills(plan, budget, /*admit=*/true);
  }
  return plan;
}

std::vector<StateCopy> Scheduler::complete(const StepPlan& plan) {
  std::vector<StateCopy> snapshots;
  const int32_t bs = kv_.block_size();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    SeqState* seq = plan.seqs[i];
    seq->n_computed += plan.batch.seqs[i].n_tokens;
    while (options_.prefix_cache &&
           static_cast<int32_t>(seq->block_hashes.size()) < seq->n_computed / bs) {
      const size_t idx = seq->block_hashes.size();
      const uint64_t parent = idx == 0 ? kKvRootHash : seq->block_hashes[idx - 1];
      const std::span<const int32_t> content(seq->tokens.data() + idx * bs,
                                             static_cast<size_t>(bs));
      seq->block_hashes.push_back(kv_.commit_full_block(seq->block_table[idx], parent, content));
    }
    if (seq->snapshot_at > 0 && seq->n_computed == seq->snapshot_at) {
      // The slot now holds the state after exactly snapshot_at tokens: the end of a full block.
      const uint64_t h = seq->block_hashes[static_cast<size_t>(seq->snapshot_at / bs - 1)];
      seq->snapshot_at = snapshot_target(*seq);  // the next boundary, or none
      const int32_t slot = kv_.is_cached(h) ? snapshots_->take(h) : -1;
      if (slot >= 0) snapshots.push_back({seq->state_slot, slot});
    }
  }
  return snapshots;
}

}  // namespace memra
