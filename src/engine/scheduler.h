// The step planner: each step picks sequences under the token budget and the free KV blocks —
// running decodes first (oldest first), then prefill chunks of running sequences, then new
// admissions from the FIFO queue (chunked prefill) — and builds the step's Batch. When a decode
// cannot get a KV block, the newest running sequence is preempted by recompute: its blocks are
// released and it goes back to the front of the queue with all its tokens, to be prefilled again.
// A step that preempted admits nothing, so a preempted sequence does not bounce straight back.
// Models with recurrent state (linear attention) also need a free state slot to admit a
// sequence; the slot is held until the sequence is released, like its blocks. Their prefix cache
// resumes only from a state snapshot: a prefix match is cut back to its longest run ending in a
// block with a snapshot, which the step copies into the sequence's slot, and a prompt's prefill
// chunk ends at its last full-block boundary before its last token (and at its end when that is a
// boundary) so that a snapshot can be taken there.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/kv_block_manager.h"
#include "engine/state_pool.h"
#include "engine/state_snapshots.h"
#include "models/batch.h"

namespace memra {

// What the scheduler knows of a sequence. The engine keeps one per request.
struct SeqState {
  uint64_t order = 0;           // submission order: lower is older
  std::vector<int32_t> tokens;  // prompt + generated
  int32_t n_computed = 0;       // leading tokens whose KV is in the cache
  std::vector<int32_t> block_table;
  int32_t state_slot = -1;  // recurrent-state slot while running (models with state), else -1
  std::vector<uint64_t> block_hashes;  // prefix-cache hashes of the leading full blocks
  int32_t n_cached_first = -1;         // tokens reused from the prefix cache at first admission
  // Hybrid models: a prefill chunk ends at this token count and the state there is snapshotted
  // (a block boundary past the cached part); 0: none pending.
  int32_t snapshot_at = 0;
  // Hybrid models: where the run of cached KV blocks matching the prompt ended at admission, when
  // no snapshot ended it (the match was cut back before it): the point where this prompt left an
  // earlier one, e.g. the end of a shared system prompt, snapshotted for the prompts after it.
  int32_t cached_run_end = 0;
  int32_t n_preemptions = 0;
  bool running = false;

  int32_t remaining() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
};

struct SchedulerOptions {
  int32_t max_batch_tokens = 512;
  int32_t max_sequences = 64;
  // false: its sequences neither reuse cached blocks nor publish theirs (the prefill-only
  // embedding queue; the block manager's cache still serves other schedulers).
  bool prefix_cache = true;
};

// A recurrent-state slot copy (KvCache::copy_state_slot): a snapshot restored or taken.
struct StateCopy {
  int32_t src = -1;
  int32_t dst = -1;
};

// One step's plan. state_restores: copies to run before the forward pass (admissions resuming
// from a snapshot). seqs[i] is the sequence of batch.seqs[i]; logit_seqs[j] the sequence whose
// logits land in row j (batch.logit_tokens[j]).
struct StepPlan {
  Batch batch;
  std::vector<SeqState*> seqs;
  std::vector<SeqState*> logit_seqs;
  std::vector<StateCopy> state_restores;
};

class Scheduler {
 public:
  // states: the recurrent-state pool when the model keeps state per sequence (may be shared by
  // several schedulers, as kv is), else null. snapshots: where such a model's prefix cache keeps
  // its state snapshots (null or empty: a state model reuses no cached prefix).
  Scheduler(KvBlockManager& kv, const SchedulerOptions& options, StatePool* states = nullptr,
            StateSnapshots* snapshots = nullptr);

  void add(SeqState* seq);     // queues a new sequence (FIFO)
  void remove(SeqState* seq);  // finished or cancelled: drops it and frees its blocks
  StepPlan schedule();
  // After the forward pass: advances n_computed and publishes newly full blocks to the cache.
  // Returns the state snapshots to copy now (from a sequence's slot to a snapshot slot), before
  // the next step writes the sequence's slot again.
  std::vector<StateCopy> complete(const StepPlan& plan);

  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  uint64_t n_preemptions() const { return preemptions_; }

 private:
  int32_t blocks_needed(const SeqState& seq, int32_t n_tokens) const;
  // Tokens of seq that fit in the available blocks, at most `want`.
  int32_t tokens_that_fit(const SeqState& seq, int32_t want) const;
  // Hybrid models: where seq's next snapshot is due (0: none), and a chunk of n tokens cut back
  // so that it ends there rather than passing it.
  int32_t snapshot_target(const SeqState& seq) const;
  int32_t chunk_to_snapshot(const SeqState& seq, int32_t n) const;
  // The prefix match at admission (cut back to a snapshot for hybrid models); returns blocks.
  int32_t match_cached_prefix(SeqState& seq);
  // The one place a sequence gives its resources back (finish, cancel, preemption, a failed
  // admission): its blocks (full ones stay in the prefix cache), its state slot, its progress.
  void release(SeqState* seq);
  void preempt(SeqState* seq);
  SeqState* newest_unscheduled(const std::vector<SeqState*>& scheduled) const;
  void add_to_plan(StepPlan& plan, SeqState* seq, int32_t n_tokens);
  bool schedule_decodes(StepPlan& plan, int32_t& budget);  // true when it preempted
  void schedule_prefills(StepPlan& plan, int32_t& budget, bool admit);
  bool admit_one(StepPlan& plan, int32_t& budget);

  KvBlockManager& kv_;
  SchedulerOptions options_;
  StatePool* states_;
  StateSnapshots* snapshots_;
  std::deque<SeqState*> waiting_;
  std::vector<SeqState*> running_;  // kept in submission order
  uint64_t preemptions_ = 0;
};

}  // namespace memra
