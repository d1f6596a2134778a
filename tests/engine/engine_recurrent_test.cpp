// The engine's contract for models with recurrent state (the hybrid linear-attention models), over
// the fake model's stateful mode: a state slot per running sequence, the prefix cache off with a
// reason, and the state carried through batching, chunked prefill, preemption and cancellation.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace memra {
namespace {

using namespace engine_testing;  // NOLINT: the harness is this file's vocabulary

// ---- a model with recurrent state (the hybrid linear-attention models' engine contract)

Harness start_recurrent(EngineOptions o = {}, int32_t n_ctx = 256) {
  return start(o, n_ctx, -1, 0, -1, /*recurrent=*/true);
}

TEST(EngineRecurrent, PrefixCacheIsOffWithAReasonAndRepeatsRecompute) {
  Harness h = start_recurrent();
  EXPECT_FALSE(h.engine->model_info().prefix_cache);
  EXPECT_EQ(h.engine->model_info().prefix_cache_off_reason, "fake recurrent state");
  Collected cold, again;
  h.engine->submit(greedy_request(prompt_of(50), 8, cold));
  cold.wait();
  h.engine->submit(greedy_request(prompt_of(50), 8, again));
  again.wait();
  EXPECT_EQ(again.usage.cached_tokens, 0);  // a cached block would skip the prefix's state
  EXPECT_EQ(again.ids, expected_greedy(prompt_of(50), 8));
  EXPECT_EQ(cold.ids, again.ids);
  EXPECT_EQ(h.engine->stats().cached_tokens_total, 0u);
  // Without state the same engine options reuse the cache (the flag is the model's).
  Harness plain = start();
  EXPECT_TRUE(plain.engine->model_info().prefix_cache);
  EXPECT_EQ(plain.engine->stats().state_slots_total, 0);
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
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().state_slots_used, 0);
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
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().state_slots_used, 0);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace memra
