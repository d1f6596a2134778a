// The engine's contract for models with recurrent state (the hybrid linear-attention models), over
// the fake model's stateful mode: a state slot per running sequence, the prefix cache resumed
// only from state snapshots at block boundaries (the fake's state is its token history, so a
// wrong or missing snapshot changes the tokens or fails the step), and the state carried through
// batching, chunked prefill, preemption and cancellation.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace memra {
namespace {

using namespace engine_testing;  // NOLINT: the harness is this file's vocabulary

// ---- a model with recurrent state (the hybrid linear-attention models' engine contract)

Harness start_recurrent(EngineOptions o = {}, int32_t n_ctx = 256) {
  return start(o, n_ctx, -1, 0, -1, /*recurrent=*/true);
}

// One finished greedy request: its tokens and how many prompt tokens came from the cache.
struct Outcome {
  std::vector<int32_t> ids;
  int32_t cached_tokens = 0;
  FinishReason finish = FinishReason::none;
};

Outcome run_one(Engine& e, const std::vector<int32_t>& prompt, int32_t n) {
  Collected c;
  e.submit(greedy_request(prompt, n, c));
  c.wait();
  return {c.ids, c.usage.cached_tokens, c.finish};
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The first prompt of 50 tokens leaves a snapshot at its last full-block boundary (48): the same
// prompt again, and a longer one extending it (a chat's next turn), resume there.
TEST(EngineRecurrent, PrefixCacheResumesFromTheLastFullBlockSnapshot) {
  Harness h = start_recurrent();
  EXPECT_TRUE(h.engine->model_info().prefix_cache);
  EXPECT_TRUE(h.engine->model_info().prefix_cache_off_reason.empty());
  const EngineStats s0 = h.engine->stats();
  EXPECT_EQ(s0.state_snapshots_total, 64);  // max_sequences, as the running slots
  EXPECT_EQ(s0.state_slots_total, 64);
  const Outcome cold = run_one(*h.engine, prompt_of(50), 8);
  EXPECT_EQ(cold.cached_tokens, 0);
  EXPECT_EQ(cold.ids, expected_greedy(prompt_of(50), 8));
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 1);
  const Outcome again = run_one(*h.engine, prompt_of(50), 8);
  EXPECT_EQ(again.cached_tokens, 48);
  EXPECT_EQ(again.ids, cold.ids);
  // The next turn: the first prompt, its answer and a new message.
  const std::vector<int32_t> turn2 = concat(concat(prompt_of(50), cold.ids), prompt_of(13, 5));
  const Outcome next = run_one(*h.engine, turn2, 8);
  EXPECT_EQ(next.cached_tokens, 48);
  EXPECT_EQ(next.ids, expected_greedy(turn2, 8));
  wait_idle(*h.engine);
  const EngineStats s = h.engine->stats();
  EXPECT_EQ(s.state_snapshot_restores_total, 2u);
  EXPECT_EQ(s.state_snapshots_used, 2);  // 48 and turn 2's 64
  EXPECT_EQ(s.cached_tokens_total, 96u);
  EXPECT_TRUE(released_all(*h.engine));
  // The third turn resumes from the second's snapshot (71 tokens: 64).
  const Outcome third = run_one(*h.engine, concat(turn2, {7, 8}), 4);
  EXPECT_EQ(third.cached_tokens, 64);
  EXPECT_EQ(third.ids, expected_greedy(concat(turn2, {7, 8}), 4));
}

// A prompt ending on a block boundary (48 = 3 x 16) leaves two snapshots: at 32, the most an
// identical prompt can reuse (its last token must be computed), and at 48 for a longer prompt.
TEST(EngineRecurrent, APromptEndingOnABoundaryServesRepeatsAndExtensions) {
  Harness h = start_recurrent();
  const Outcome cold = run_one(*h.engine, prompt_of(48), 6);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 2);
  const Outcome again = run_one(*h.engine, prompt_of(48), 6);
  EXPECT_EQ(again.cached_tokens, 32);
  EXPECT_EQ(again.ids, cold.ids);
  const std::vector<int32_t> longer = concat(prompt_of(48), {9, 9, 9});
  const Outcome next = run_one(*h.engine, longer, 6);
  EXPECT_EQ(next.cached_tokens, 48);
  EXPECT_EQ(next.ids, expected_greedy(longer, 6));
}

// Conversations sharing only a system prompt: the first leaves a snapshot near its own end only;
// the second matches the system prompt's cached blocks with no snapshot at their end, so it starts
// cold and snapshots where the match ended; the third resumes there. Each equals a cold run.
TEST(EngineRecurrent, ASharedSystemPromptIsSnapshotWhereTheNextPromptLeavesIt) {
  Harness h = start_recurrent();
  const std::vector<int32_t> system = prompt_of(40, 3);  // blocks 0-1 full, block 2 partial
  const std::vector<int32_t> a = concat(system, prompt_of(20, 11));
  const std::vector<int32_t> b = concat(system, prompt_of(20, 17));
  const std::vector<int32_t> c = concat(system, prompt_of(20, 23));
  const Outcome first = run_one(*h.engine, a, 4);
  EXPECT_EQ(first.cached_tokens, 0);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 1);  // at 48, past the system prompt
  const Outcome second = run_one(*h.engine, b, 4);
  EXPECT_EQ(second.cached_tokens, 0);  // KV cached up to 32, but no state there yet
  EXPECT_EQ(second.ids, expected_greedy(b, 4));
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 3);  // + 32 (where b left a) and b's 48
  const Outcome third = run_one(*h.engine, c, 4);
  EXPECT_EQ(third.cached_tokens, 32);
  EXPECT_EQ(third.ids, expected_greedy(c, 4));
  wait_idle(*h.engine);
  const EngineStats s = h.engine->stats();
  EXPECT_EQ(s.state_snapshot_restores_total, 1u);
  EXPECT_TRUE(released_all(*h.engine));
}

// A shared prefix ending mid-block resumes at a boundary before it that has a snapshot, never
// after; cached blocks past the last snapshot are not used (the state there is unknown).
TEST(EngineRecurrent, PrefixEndingMidBlockResumesAtTheSnapshotBefore) {
  EngineOptions o;
  o.kv_block_size = 8;
  Harness h = start_recurrent(o);
  const std::vector<int32_t> first = prompt_of(30);  // snapshot at 24
  run_one(*h.engine, first, 4);
  // Shares 27 tokens (blocks 0-2 and 3 of block 3): the boundary at 24 has the snapshot.
  std::vector<int32_t> shares_27(first.begin(), first.begin() + 27);
  shares_27 = concat(shares_27, prompt_of(20, 9));
  const Outcome a = run_one(*h.engine, shares_27, 6);
  EXPECT_EQ(a.cached_tokens, 24);
  EXPECT_EQ(a.ids, expected_greedy(shares_27, 6));
  // Shares 20 tokens: blocks 0 and 1 are cached, but no snapshot ends there: a cold start.
  std::vector<int32_t> shares_20(first.begin(), first.begin() + 20);
  shares_20 = concat(shares_20, prompt_of(11, 4));
  const Outcome b = run_one(*h.engine, shares_20, 6);
  EXPECT_EQ(b.cached_tokens, 0);
  EXPECT_EQ(b.ids, expected_greedy(shares_20, 6));
}

// One snapshot slot: a newer prompt's snapshot replaces the older one (least recently used), whose
// prompt then starts cold with the same tokens.
TEST(EngineRecurrent, SnapshotSlotsRunningOutFallBackToAColdStart) {
  EngineOptions o;
  o.state_snapshots = 1;
  Harness h = start_recurrent(o);
  EXPECT_EQ(h.engine->stats().state_snapshots_total, 1);
  const Outcome a1 = run_one(*h.engine, prompt_of(40, 1), 5);
  const Outcome b1 = run_one(*h.engine, prompt_of(40, 2), 5);
  const Outcome a2 = run_one(*h.engine, prompt_of(40, 1), 5);
  EXPECT_EQ(a2.cached_tokens, 0);  // its snapshot went to b1's prompt
  EXPECT_EQ(a2.ids, a1.ids);
  EXPECT_EQ(a2.ids, expected_greedy(prompt_of(40, 1), 5));
  const Outcome a3 = run_one(*h.engine, prompt_of(40, 1), 5);
  EXPECT_EQ(a3.cached_tokens, 32);  // a2 took the slot back
  EXPECT_EQ(a3.ids, a1.ids);
  const Outcome b2 = run_one(*h.engine, prompt_of(40, 2), 5);
  EXPECT_EQ(b2.cached_tokens, 0);
  EXPECT_EQ(b2.ids, b1.ids);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 1);
}

// A block evicted from the prefix cache takes its snapshot along: the prompt starts cold, with the
// same tokens, and the slot is free again.
TEST(EngineRecurrent, EvictedBlockDropsItsSnapshot) {
  EngineOptions o;
  o.kv_block_size = 4;
  o.context_length = 64;
  o.kv_blocks = 16;  // one context: a long prompt evicts every cached block
  Harness h = start_recurrent(o, 64);
  const Outcome a1 = run_one(*h.engine, prompt_of(30, 1), 4);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 1);
  run_one(*h.engine, prompt_of(58, 2), 6);  // needs all 16 blocks
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 1);  // its own; the first one's went
  const Outcome a2 = run_one(*h.engine, prompt_of(30, 1), 4);
  EXPECT_EQ(a2.cached_tokens, 0);
  EXPECT_EQ(a2.ids, a1.ids);
  EXPECT_TRUE(released_all(*h.engine));
}

// Zero snapshot slots: a state model cannot resume from blocks alone, so its prefix cache is off
// with a reason; a model that refuses the prefix cache outright keeps its own reason.
TEST(EngineRecurrent, NoSnapshotSlotsTurnThePrefixCacheOff) {
  EngineOptions o;
  o.state_snapshots = 0;
  Harness h = start_recurrent(o);
  EXPECT_FALSE(h.engine->model_info().prefix_cache);
  EXPECT_NE(h.engine->model_info().prefix_cache_off_reason.find("snapshot"), std::string::npos);
  EXPECT_EQ(h.engine->stats().state_snapshots_total, 0);
  const Outcome cold = run_one(*h.engine, prompt_of(50), 8);
  const Outcome again = run_one(*h.engine, prompt_of(50), 8);
  EXPECT_EQ(again.cached_tokens, 0);
  EXPECT_EQ(again.ids, cold.ids);
  EXPECT_EQ(h.engine->stats().state_snapshot_restores_total, 0u);

  EngineParts parts;
  auto model = std::make_unique<FakeModel>(256, -1, 0, /*recurrent=*/true);
  model->refuse_prefix_cache("fake: cannot resume");
  parts.model = std::move(model);
  parts.tokenizer = std::make_unique<FakeTokenizer>(-1);
  parts.eos_ids = {testing::kFakeEos};
  auto refused = engine_start(std::move(parts), EngineOptions{});
  EXPECT_FALSE(refused->model_info().prefix_cache);
  EXPECT_EQ(refused->model_info().prefix_cache_off_reason, "fake: cannot resume");
  EXPECT_EQ(refused->stats().state_snapshots_total, 0);

  // The prefix cache turned off: no snapshot slots, so no state memory set aside for them.
  EngineOptions off;
  off.prefix_cache = false;
  Harness h_off = start_recurrent(off);
  EXPECT_EQ(h_off.engine->stats().state_snapshots_total, 0);
  EXPECT_EQ(h_off.engine->model_info().state_bytes, h.engine->model_info().state_bytes);
}

TEST(EngineRecurrent, SlotsAreSizedByMaxSequencesAndBatchedEqualsAlone) {
  EngineOptions o;
  o.max_sequences = 4;
  Harness h = start_recurrent(o);
  EXPECT_EQ(h.engine->stats().state_slots_total, 4);
  EXPECT_GT(h.engine->model_info().state_bytes, 0u);
  const int n = 12;  // three times the slots: admission waits for a free slot
  std::vector<Collected> c(n);
  for (int i = 0; i < n; ++i) h.engine->submit(greedy_request(prompt_of(5 + i * 3, i), 16, c[i]));
  for (int i = 0; i < n; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].finish, FinishReason::length) << "request " << i;
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(5 + i * 3, i), 16)) << "request " << i;
  }
  EXPECT_GT(h.model->max_batch_tokens_seen.load(), 16);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_slots_used, 0);
}

TEST(EngineRecurrent, ChunkedPrefillCarriesTheState) {
  EngineOptions o;
  o.max_batch_tokens = 7;
  Harness h = start_recurrent(o);
  std::vector<Collected> c(3);
  for (int i = 0; i < 3; ++i) h.engine->submit(greedy_request(prompt_of(60, i), 10, c[i]));
  for (int i = 0; i < 3; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(60, i), 10)) << "request " << i;
  }
  EXPECT_LE(h.model->max_batch_tokens_seen.load(), 7);
}

TEST(EngineRecurrent, PreemptedSequencesRecomputeTheirState) {
  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_blocks = 40;
  o.context_length = 128;
  Harness h = start_recurrent(o, 128);
  const int n = 8;
  std::vector<Collected> c(n);
  for (int i = 0; i < n; ++i) h.engine->submit(greedy_request(prompt_of(10, i), 60, c[i]));
  for (int i = 0; i < n; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(10, i), 60)) << "request " << i;
  }
  wait_idle(*h.engine);
  EXPECT_GT(h.engine->stats().preemptions_total, 0u);
  EXPECT_TRUE(released_all(*h.engine));
}

TEST(EngineRecurrent, CancelReleasesTheSlot) {
  EngineOptions o;
  o.max_sequences = 1;
  Harness h = start_recurrent(o);
  h.model->delay_ms = 2;
  Collected first, second;
  const RequestId id = h.engine->submit(greedy_request(prompt_of(8), 200, first));
  h.engine->submit(greedy_request(prompt_of(9, 3), 5, second));  // waits for the one slot
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(h.engine->stats().state_slots_used, 1);
  h.engine->cancel(id);
  first.wait();
  second.wait();
  EXPECT_EQ(first.finish, FinishReason::cancelled);
  EXPECT_EQ(second.ids, expected_greedy(prompt_of(9, 3), 5));
  EXPECT_TRUE(released_all(*h.engine));
}

// Identical prompts preempted mid-decode resume from their prompt's snapshot (not from zero)
// and still give the cold tokens; every block and slot is released at the end.
TEST(EngineRecurrent, PreemptedSequencesResumeFromTheirSnapshot) {
  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_blocks = 40;
  o.context_length = 128;
  Harness h = start_recurrent(o, 128);
  // Steps of 1 ms keep the first requests decoding while the rest are submitted, so all eight
  // compete for the 40 blocks (about two requests' worth): without it, on a loaded machine the
  // engine could finish the early ones first and never need to preempt.
  h.model->delay_ms = 1;
  const int n = 8;
  std::vector<Collected> c(n);
  for (int i = 0; i < n; ++i) h.engine->submit(greedy_request(prompt_of(22), 60, c[i]));
  for (int i = 0; i < n; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(22), 60)) << "request " << i;
  }
  wait_idle(*h.engine);
  const EngineStats s = h.engine->stats();
  EXPECT_GT(s.preemptions_total, 0u);
  EXPECT_GT(s.state_snapshot_restores_total, 0u);
  EXPECT_TRUE(released_all(*h.engine));
  EXPECT_LE(s.state_snapshots_used, s.state_snapshots_total);
}

// A request cancelled mid-prefill (its snapshot still pending) frees its slot and blocks; the
// same prompt then runs to the cold tokens.
TEST(EngineRecurrent, CancelMidPrefillReleasesEverything) {
  EngineOptions o;
  o.max_batch_tokens = 4;
  Harness h = start_recurrent(o);
  h.model->delay_ms = 2;
  Collected first;
  const RequestId id = h.engine->submit(greedy_request(prompt_of(120), 4, first));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  h.engine->cancel(id);
  first.wait();
  EXPECT_EQ(first.finish, FinishReason::cancelled);
  h.model->delay_ms = 0;
  EXPECT_TRUE(released_all(*h.engine));
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 0);
  const Outcome again = run_one(*h.engine, prompt_of(120), 4);
  EXPECT_EQ(again.finish, FinishReason::length);
  EXPECT_EQ(again.ids, expected_greedy(prompt_of(120), 4));
  wait_idle(*h.engine);
  // Two: where the blocks the cancelled request left cached end (this one's match stopped there,
  // with no state to resume from), and at 112.
  EXPECT_EQ(h.engine->stats().state_snapshots_used, 2);
  EXPECT_EQ(h.engine->stats().state_slots_used, 0);
}

}  // namespace
}  // namespace memra
