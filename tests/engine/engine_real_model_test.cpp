// The determinism contract on the real packaged model (Gemma 3 270M Q4_K_M, CPU): a greedy
// request gives the same tokens alone, batched with others, from the prefix cache, with its
// prefill cut into small chunks, and after being preempted and recomputed. Skipped when the
// model is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <filesystem>

#include "../common/missing_data.h"
#include "formats/model_source.h"
#include "greedy_collector.h"
#include "memra/engine.h"
#include "tokenizer/tokenizer.h"

namespace memra {
namespace {

constexpr int32_t kGen = 12;

const char* const kPrompts[] = {
    "Question: What is the capital of France?\nAnswer:",
    // Over 2 KV blocks (16 tokens each), so a repeat reuses cached blocks.
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog "
    "again and again, and the dog",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Water boils at a temperature of",
};

using test::Collected;

class RealModel : public ::testing::Test {
 protected:
  void SetUp() override {
    MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(model_source_default_path()))
        << "the default model, " << model_source_default_path();
  }

  static std::unique_ptr<Engine> make(EngineOptions o) {
    o.n_threads = 2;
    if (o.context_length == 0) o.context_length = 128;
    return Engine::create(o);
  }

  static Request request(const Engine& e, const char* text, Collected& r) {
    return test::greedy_request(e.tokenizer().encode(text, EncodeOptions{true, false}), kGen, r);
  }

  static void wait(Collected& r) { test::wait_done(r, std::chrono::seconds(300)); }

  // Runs all prompts at once on `e` and returns their tokens.
  static std::vector<std::vector<int32_t>> run_all(Engine& e) {
    std::vector<Collected> results(std::size(kPrompts));
    for (size_t i = 0; i < results.size(); ++i) e.submit(request(e, kPrompts[i], results[i]));
    std::vector<std::vector<int32_t>> out;
    for (auto& r : results) {
      wait(r);
      out.push_back(r.ids);
    }
    return out;
  }
};

TEST_F(RealModel, GreedyIsInvariantToBatchingCachingChunkingAndPreemption) {
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = make({});
    for (const char* p : kPrompts) {
      Collected r;
      e->submit(request(*e, p, r));
      wait(r);
      ASSERT_EQ(r.ids.size(), static_cast<size_t>(kGen));
      alone.push_back(r.ids);
    }
    // Batched: all four in the same steps.
    EXPECT_EQ(run_all(*e), alone) << "batched differs from alone";
    // Prefix cache: the same prompt again reuses its full blocks.
    Collected again;
    e->submit(request(*e, kPrompts[1], again));
    wait(again);
    EXPECT_GT(again.usage.cached_tokens, 0);
    EXPECT_EQ(again.ids, alone[1]) << "prefix-cache hit differs from cold";
  }
  {
    EngineOptions o;
    o.max_batch_tokens = 5;  // prefill in chunks of at most 5 tokens (minus running decodes)
    auto e = make(o);
    EXPECT_EQ(run_all(*e), alone) << "chunked prefill differs from whole";
  }
  {
    EngineOptions o;
    o.kv_block_size = 4;
    o.kv_blocks = 16;  // 64 token slots for four sequences of ~25 tokens each
    o.context_length = 64;
    o.prefix_cache = false;
    auto e = make(o);
    EXPECT_EQ(run_all(*e), alone) << "preempted + recomputed differs from uninterrupted";
    EXPECT_GT(e->stats().preemptions_total, 0u);
  }
}

}  // namespace
}  // namespace memra
