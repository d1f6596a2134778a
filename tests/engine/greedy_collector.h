// Test helper shared by the engine tests that run real models: a greedy request whose sink
// collects the generated ids, and a bounded wait for its final event.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "memra/engine.h"

namespace memra::test {

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  Usage usage;
  bool done = false;
};

// Greedy, EOS ignored, exactly max_tokens tokens; events land in `r`.
inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens, Collected& r) {
  Request q;
  q.prompt = std::move(prompt);
  q.sampling.temperature = 0.0f;
  q.stop.max_tokens = max_tokens;
  q.stop.ignore_eos = true;
  q.sink = [&r](const StreamEvent& ev) {
    std::lock_guard lock(r.mu);
    for (const auto& t : ev.tokens) r.ids.push_back(t.id);
    r.usage = ev.usage;
    if (ev.finish != FinishReason::none) {
      r.done = true;
      r.cv.notify_all();
    }
  };
  return q;
}

inline void wait_done(Collected& r, std::chrono::seconds timeout) {
  std::unique_lock lock(r.mu);
  ASSERT_TRUE(r.cv.wait_for(lock, timeout, [&] { return r.done; })) << "request did not finish";
}

}  // namespace memra::test
