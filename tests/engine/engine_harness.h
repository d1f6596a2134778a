// The engine tests' harness over the fake model (engine_test.cpp, engine_recurrent_test.cpp): an
// event collector, an engine started on a FakeModel, prompts and their expected greedy answers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_impl.h"
#include "fake_model.h"

namespace memra::engine_testing {

using testing::FakeModel;
using testing::FakeTokenizer;

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  std::string text;
  FinishReason finish = FinishReason::none;
  std::string matched;
  Usage usage;
  std::string error;
  int events = 0;
  int finals = 0;           // events with a finish reason: exactly one per request
  int32_t max_top_id = -1;  // largest id among the top_logprobs alternatives

  std::function<void(const StreamEvent&)> sink() {
    return [this](const StreamEvent& e) {
      std::lock_guard lock(mu);
      for (const auto& t : e.tokens) {
        ids.push_back(t.id);
        for (const auto& alt : t.top) max_top_id = std::max(max_top_id, alt.id);
      }
      text += e.text;
      usage = e.usage;
      ++events;
      cv.notify_all();
      if (e.finish != FinishReason::none) {
        finish = e.finish;
        matched = e.matched_stop;
        error = e.error;
        ++finals;
        cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(20), [&] { return finish != FinishReason::none; }));
  }
};

struct Harness {
  FakeModel* model = nullptr;
  std::unique_ptr<Engine> engine;
};

inline Harness start(EngineOptions o = {}, int32_t n_ctx = 256, int32_t eos_after = -1,
                     int32_t padded_rows = 0, int32_t poison = -1, bool recurrent = false) {
  EngineParts parts;
  auto model = std::make_unique<FakeModel>(n_ctx, eos_after, padded_rows, recurrent);
  Harness h;
  h.model = model.get();
  parts.model = std::move(model);
  parts.tokenizer = std::make_unique<FakeTokenizer>(poison);
  parts.eos_ids = {testing::kFakeEos};
  parts.info.id = "fake";
  h.engine = engine_start(std::move(parts), o);
  return h;
}

inline std::vector<int32_t> prompt_of(int32_t n, int32_t salt = 0) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(2 + (i * 7 + salt) % 38);
  return p;
}

// What the fake model generates greedily after `prompt`, computed without the engine.
inline std::vector<int32_t> expected_greedy(std::vector<int32_t> history, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(testing::fake_next_token(history));
    history.push_back(out.back());
  }
  return out;
}

// Stats are published after each step's events: wait until the engine has caught up.
inline void wait_idle(const Engine& e) {
  for (int i = 0; i < 400 && (e.stats().running > 0 || e.stats().kv_blocks_used > 0 ||
                              e.stats().state_slots_used > 0);
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Waits until idle, then: every KV block and recurrent-state slot is back (a failure says how
// many are still held).
inline ::testing::AssertionResult released_all(const Engine& e) {
  wait_idle(e);
  const EngineStats s = e.stats();
  if (s.kv_blocks_used == 0 && s.state_slots_used == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.kv_blocks_used << " KV blocks and "
                                       << s.state_slots_used << " state slots still held";
}

inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens, Collected& c) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.sink = c.sink();
  return r;
}

}  // namespace memra::engine_testing
