// Scheduler: decodes before prefill, the token budget, chunked prefill, prefix reuse on
// admission, and preemption by recompute when KV blocks run out.
#include "engine/scheduler.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <numeric>

namespace memra {
namespace {

SeqState make_seq(uint64_t order, int32_t n_prompt, int32_t first = 0) {
  SeqState s;
  s.order = order;
  s.tokens.resize(static_cast<size_t>(n_prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), first);
  return s;
}

// What the engine does after a step: complete it, then append a token to each logit sequence.
void finish_step(Scheduler& sched, const StepPlan& plan) {
  sched.complete(plan);
  for (SeqState* s : plan.logit_seqs) s->tokens.push_back(1000 + s->n_computed);
}

TEST(Scheduler, ChunksPrefillUnderTheBudget) {
  KvBlockManager kv(64, 4, true);
  Scheduler sched(kv, {8, 4});
  SeqState a = make_seq(1, 20);
  sched.add(&a);
  StepPlan p1 = sched.schedule();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.batch.n_tokens(), 8);
  EXPECT_TRUE(p1.batch.logit_tokens.empty());  // prefill not finished: no logits yet
  EXPECT_EQ(p1.batch.seqs[0].block_table.size(), 2u);
  finish_step(sched, p1);
  StepPlan p2 = sched.schedule();
  EXPECT_EQ(p2.batch.seqs[0].n_past, 8);
  EXPECT_EQ(p2.batch.positions.front(), 8);
  finish_step(sched, p2);
  StepPlan p3 = sched.schedule();
  EXPECT_EQ(p3.batch.n_tokens(), 4);
  ASSERT_EQ(p3.batch.logit_tokens.size(), 1u);
  EXPECT_EQ(p3.batch.logit_tokens[0], 3);
  EXPECT_EQ(p3.batch.seqs[0].block_table.size(), 5u);
}

TEST(Scheduler, DecodesComeFirstAndPrefillFillsTheRest) {
  KvBlockManager kv(64, 4, true);
  Scheduler sched(kv, {6, 4});
  SeqState a = make_seq(1, 3);
  sched.add(&a);
  finish_step(sched, sched.schedule());  // a prefilled, now decoding
  SeqState b = make_seq(2, 10, 100);
  sched.add(&b);
  StepPlan p = sched.schedule();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0], &a);
  EXPECT_EQ(p.batch.seqs[0].n_tokens, 1);
  EXPECT_EQ(p.seqs[1], &b);
  EXPECT_EQ(p.batch.seqs[1].n_tokens, 5);  // 6-token budget minus a's decode
  EXPECT_EQ(p.logit_seqs, std::vector<SeqState*>{&a});
}

TEST(Scheduler, AdmissionReusesCachedPrefixButComputesTheLastToken) {
  KvBlockManager kv(64, 4, true);
  Scheduler sched(kv, {64, 4});
  SeqState a = make_seq(1, 8);
  sched.add(&a);
  finish_step(sched, sched.schedule());
  sched.remove(&a);
  SeqState b = make_seq(2, 8);  // identical prompt, exactly two blocks
  sched.add(&b);
  StepPlan p = sched.schedule();
  EXPECT_EQ(b.n_cached_first, 4);  // one block reused; the second holds the last token
  EXPECT_EQ(p.batch.seqs[0].n_past, 4);
  EXPECT_EQ(p.batch.n_tokens(), 4);
  SeqState c = make_seq(3, 9);  // 8 shared tokens + 1
  sched.add(&c);
  finish_step(sched, p);
  p = sched.schedule();
  EXPECT_EQ(c.n_cached_first, 8);
}

TEST(Scheduler, PreemptsTheNewestWhenDecodesRunOutOfBlocks) {
  KvBlockManager kv(4, 2, false);  // 8 token slots
  Scheduler sched(kv, {16, 4});
  SeqState a = make_seq(1, 4);
  SeqState b = make_seq(2, 4, 50);
  sched.add(&a);
  sched.add(&b);
  StepPlan p = sched.schedule();
  ASSERT_EQ(p.seqs.size(), 2u);  // both prefilled: all 4 blocks in use
  finish_step(sched, p);
  // Each now needs a 3rd block for its 5th token: b (newest) is preempted, a decodes.
  p = sched.schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0], &a);
  EXPECT_EQ(b.n_preemptions, 1);
  EXPECT_FALSE(b.running);
  EXPECT_EQ(b.n_computed, 0);
  EXPECT_EQ(b.tokens.size(), 5u);  // keeps its generated token, to be prefilled again
  EXPECT_EQ(sched.n_waiting(), 1);
  EXPECT_EQ(sched.n_preemptions(), 1u);
  finish_step(sched, p);
  sched.remove(&a);
  p = sched.schedule();  // b resumes with all 5 tokens and wants logits
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.batch.n_tokens(), 5);
  EXPECT_EQ(p.logit_seqs.size(), 1u);
}

TEST(Scheduler, RespectsMaxSequences) {
  KvBlockManager kv(64, 4, true);
  Scheduler sched(kv, {64, 2});
  SeqState s[3] = {make_seq(1, 3), make_seq(2, 3, 10), make_seq(3, 3, 20)};
  for (auto& x : s) sched.add(&x);
  StepPlan p = sched.schedule();
  EXPECT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(sched.n_waiting(), 1);
}

TEST(Scheduler, RemoveFreesBlocks) {
  KvBlockManager kv(8, 4, false);
  Scheduler sched(kv, {64, 2});
  SeqState a = make_seq(1, 10);
  sched.add(&a);
  finish_step(sched, sched.schedule());
  EXPECT_EQ(kv.stats().used, 3);
  sched.remove(&a);
  EXPECT_EQ(kv.stats().used, 0);
  EXPECT_EQ(sched.n_running(), 0);
}

TEST(StatePool, HandsOutLowestFreeSlotsAndRefusesForeignReleases) {
  StatePool pool(3);
  EXPECT_TRUE(pool.enabled());
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), -1);
  pool.release(1);
  EXPECT_EQ(pool.n_used(), 2);
  EXPECT_THROW(pool.release(1), Error);  // twice
  EXPECT_THROW(pool.release(7), Error);  // not a slot
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_FALSE(StatePool(0).enabled());
}

// A model with recurrent state: admission needs a free slot; every way a sequence leaves
// (finish, preemption) gives its slot back, and its batch entries name it.
TEST(Scheduler, RecurrentStateSlotsGateAdmissionAndComeBack) {
  KvBlockManager kv(64, 4, false);
  StatePool states(2);
  Scheduler sched(kv, {64, 8, false}, &states);
  SeqState a = make_seq(1, 5), b = make_seq(2, 6, 50), c = make_seq(3, 7, 90);
  sched.add(&a);
  sched.add(&b);
  sched.add(&c);
  StepPlan p1 = sched.schedule();
  ASSERT_EQ(p1.seqs.size(), 2u);  // c waits for a slot
  EXPECT_EQ(p1.batch.seqs[0].state_slot, 0);
  EXPECT_EQ(p1.batch.seqs[1].state_slot, 1);
  EXPECT_EQ(c.state_slot, -1);
  EXPECT_EQ(sched.n_waiting(), 1);
  finish_step(sched, p1);
  sched.remove(&a);
  EXPECT_EQ(a.state_slot, -1);
  StepPlan p2 = sched.schedule();  // b decodes, c takes a's slot
  ASSERT_EQ(p2.seqs.size(), 2u);
  EXPECT_EQ(p2.seqs[1], &c);
  EXPECT_EQ(p2.batch.seqs[1].state_slot, 0);
  EXPECT_EQ(states.n_used(), 2);
  sched.remove(&b);
  sched.remove(&c);
  EXPECT_EQ(states.n_used(), 0);
  EXPECT_EQ(kv.stats().used, 0);
}

// Snapshot slots: a free one, else the least recently used one (restoring counts as a use); a
// held hash gets no second slot; a dropped one frees its slot.
TEST(StateSnapshots, TakesFreeSlotsThenReplacesTheLeastRecentlyUsed) {
  StateSnapshots snaps(4, 2);  // slots 4 and 5, after 4 running ones
  EXPECT_EQ(snaps.take(11), 4);
  EXPECT_EQ(snaps.take(11), -1);
  EXPECT_EQ(snaps.take(22), 5);
  EXPECT_EQ(snaps.restore(11), 4);  // 22 is now the least recently used
  EXPECT_EQ(snaps.take(33), 5);
  EXPECT_FALSE(snaps.has(22));
  EXPECT_EQ(snaps.restore(22), -1);
  snaps.drop(11);
  snaps.drop(11);  // already gone: nothing
  EXPECT_EQ(snaps.take(44), 4);
  const StateSnapshotStats s = snaps.stats();
  EXPECT_EQ(s.total, 2);
  EXPECT_EQ(s.used, 2);
  EXPECT_EQ(s.taken, 4u);
  EXPECT_EQ(s.restored, 1u);
  EXPECT_EQ(s.dropped_lru, 1u);
  EXPECT_EQ(s.dropped_evicted, 1u);
  EXPECT_FALSE(StateSnapshots(2, 0).enabled());
  EXPECT_EQ(StateSnapshots(2, 0).take(1), -1);
}

// A model with recurrent state and snapshots: a prompt's prefill chunk ends at its last block
// boundary before its last token, complete() asks for the snapshot copy there, and a second
// prompt sharing the prefix is admitted past it with the snapshot copied into its slot first.
// Cached blocks past the last snapshot are not reused.
TEST(Scheduler, HybridPrefixResumesOnlyFromStateSnapshots) {
  KvBlockManager kv(64, 4, true);
  StatePool states(2);
  StateSnapshots snaps(2, 2);
  kv.on_evict([&](uint64_t h) { snaps.drop(h); });
  Scheduler sched(kv, {64, 8, true}, &states, &snaps);
  SeqState a = make_seq(1, 11);
  sched.add(&a);
  StepPlan p1 = sched.schedule();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.batch.n_tokens(), 8);  // cut at floor(10 / 4) * 4
  EXPECT_TRUE(p1.state_restores.empty());
  const std::vector<StateCopy> taken = sched.complete(p1);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].src, a.state_slot);
  EXPECT_EQ(taken[0].dst, 2);
  StepPlan p2 = sched.schedule();  // the rest of a's prompt: no second snapshot (11 % 4 != 0)
  EXPECT_EQ(p2.batch.seqs[0].n_tokens, 3);
  EXPECT_TRUE(sched.complete(p2).empty());
  sched.remove(&a);
  // b shares 10 tokens: blocks 0 and 1 are cached, the snapshot ends block 1.
  SeqState b = make_seq(2, 10);
  b.tokens.push_back(77);
  b.tokens.push_back(78);
  sched.add(&b);
  StepPlan p3 = sched.schedule();
  ASSERT_EQ(p3.seqs.size(), 1u);
  EXPECT_EQ(p3.batch.seqs[0].n_past, 8);
  ASSERT_EQ(p3.state_restores.size(), 1u);
  EXPECT_EQ(p3.state_restores[0].src, 2);
  EXPECT_EQ(p3.state_restores[0].dst, b.state_slot);
  EXPECT_EQ(b.n_cached_first, 8);
  sched.complete(p3);
  sched.remove(&b);
  // With the snapshot dropped, the same prefix's cached blocks are not reused.
  snaps.drop(kv_block_hash(kv_block_hash(kKvRootHash, std::vector<int32_t>{0, 1, 2, 3}),
                           std::vector<int32_t>{4, 5, 6, 7}));
  SeqState c = make_seq(3, 12);
  sched.add(&c);
  StepPlan p4 = sched.schedule();
  EXPECT_EQ(p4.batch.seqs[0].n_past, 0);
  EXPECT_TRUE(p4.state_restores.empty());
  EXPECT_EQ(p4.batch.seqs[0].n_tokens, 8);  // 12 tokens: cut at 8, then the whole prompt at 12
  ASSERT_EQ(sched.complete(p4).size(), 1u);
  StepPlan p5 = sched.schedule();
  EXPECT_EQ(p5.batch.seqs[0].n_tokens, 4);
  ASSERT_EQ(sched.complete(p5).size(), 1u);  // 12 % 4 == 0: the prompt's end too
  sched.remove(&c);
  EXPECT_EQ(states.n_used(), 0);
  EXPECT_EQ(kv.stats().used, 0);
}

}  // namespace
}  // namespace memra
