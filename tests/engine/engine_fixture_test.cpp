// The engine over the tiny random-weight model fixtures (tests/fixtures/models/<arch>, HF folders
// made by scripts/gen_model_fixtures.py with transformers' greedy reference): through
// Engine::create the greedy tokens equal transformers' own, and they stay identical when the
// request is batched with others, served from the prefix cache, prefilled in small chunks, or
// preempted and recomputed; and (the gate of CUDA graphs and of the device greedy argmax) when
// decode steps are replayed as graphs or run eagerly, and when the greedy token is picked on the
// device or by the host sampler; and seeded sampling gives the same tokens and logprobs with the
// chain on the device as on the host. Fast enough for every CI run.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "../common/missing_data.h"
#include "core/env.h"
#include "formats/synth.h"
#include "greedy_collector.h"
#include "memra/engine.h"
#include "structured/grammar.h"

namespace memra {
namespace {

using test::Collected;
using test::greedy_request;

struct Reference {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
};

std::string fixture_dir(const std::string& arch) {
  const char* root = std::getenv("MEMRA_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/fixtures/models/" + arch;
}

Reference load_reference(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("prompt").get<std::vector<int32_t>>(), j.at("greedy").get<std::vector<int32_t>>()};
}

void wait(Collected& r) {
  test::wait_done(r, std::chrono::seconds(120));
}

// Stats are published after each step's events: wait until the engine has caught up.
void wait_idle(const Engine& e) {
  for (int i = 0; i < 400 && (e.stats().running > 0 || e.stats().kv_blocks_used > 0 ||
                              e.stats().state_slots_used > 0);
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Submits every prompt at once; returns their tokens in order.
std::vector<std::vector<int32_t>> run_together(Engine& e,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               int32_t n) {
  std::vector<Collected> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) e.submit(greedy_request(prompts[i], n, results[i]));
  std::vector<std::vector<int32_t>> out;
  for (auto& r : results) {
    wait(r);
    out.push_back(r.ids);
  }
  return out;
}

// As run_together, but request i stops after n - 2i tokens (at least 1), so decode steps shrink
// from every sequence to one. logprobs: each request also asks for its tokens' logprobs, which
// takes the sampling chain (on a GPU, Ops::sample_rows) instead of the device argmax.
std::vector<std::vector<int32_t>> run_staggered(Engine& e,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t n, bool logprobs) {
  std::vector<Collected> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int32_t max_tokens = std::max<int32_t>(1, n - 2 * static_cast<int32_t>(i));
    Request q = greedy_request(prompts[i], max_tokens, results[i]);
    if (logprobs) q.sampling.top_logprobs = 0;
    e.submit(std::move(q));
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& r : results) {
    wait(r);
    out.push_back(r.ids);
  }
  return out;
}

// A fixture model's engine options: MEMRA_TEST_DEVICE=cuda runs the determinism contract on the
// GPU (scripts/gpu_check.sh); the CPU otherwise.
EngineOptions fixture_options(const std::string& dir) {
  const char* device = std::getenv("MEMRA_TEST_DEVICE");
  const bool on_cpu = device == nullptr || std::string(device) == "cpu";
  EngineOptions o;
  o.model = dir;
  o.n_threads = 2;
  o.device = on_cpu ? "cpu" : device;
  o.context_length = 96;
  return o;
}

class EngineFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineFixture, GreedyMatchesTransformersAndIsInvariant) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  const Reference ref = load_reference(dir);
  const int32_t n = static_cast<int32_t>(ref.greedy.size());
  // The reference prompt plus three variants (cut, shifted) to batch it with.
  std::vector<std::vector<int32_t>> prompts = {ref.prompt};
  prompts.emplace_back(ref.prompt.begin(), ref.prompt.begin() + 20);
  prompts.emplace_back(ref.prompt.begin() + 5, ref.prompt.end());
  prompts.emplace_back(ref.prompt.rbegin(), ref.prompt.rend());

  EngineOptions o = fixture_options(dir);
  const bool on_cpu = o.device == "cpu";
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = Engine::create(o);
    for (const auto& p : prompts) {
      Collected r;
      e->submit(greedy_request(p, n, r));
      wait(r);
      alone.push_back(r.ids);
    }
    // The CPU backend is the float32 oracle; a GPU backend (bf16 activations) is held to the
    // CPU by the GPU model gate (teacher-forced agreement and KL), not to exact tokens here.
    if (on_cpu) {
      EXPECT_EQ(alone[0], ref.greedy) << "greedy tokens differ from transformers";
    }
    EXPECT_EQ(run_together(*e, prompts, n), alone) << "batched differs from alone";
    Collected again;
    e->submit(greedy_request(prompts[0], n, again));
    wait(again);
    // Two full 16-token blocks of the 48-token prompt, hybrid models included (the first run left
    // a recurrent-state snapshot at 32, the most a repeat can reuse).
    EXPECT_TRUE(e->model_info().prefix_cache);
    EXPECT_TRUE(e->model_info().prefix_cache_off_reason.empty());
    EXPECT_EQ(again.usage.cached_tokens, 32);
    EXPECT_EQ(again.ids, alone[0]) << "prefix-cache hit differs from cold";
    EXPECT_TRUE(e->model_info().deterministic);
  }
  {
    // deterministic = false permits paths that break the contract; only a GPU has any, so the
    // engine reports the contract kept on the CPU.
    EngineOptions f = o;
    f.deterministic = false;
    auto e = Engine::create(f);
    EXPECT_EQ(e->model_info().deterministic, on_cpu);
  }
  {
    EngineOptions c = o;
    c.max_batch_tokens = 7;
    auto e = Engine::create(c);
    EXPECT_EQ(run_together(*e, prompts, n), alone) << "chunked prefill differs from whole";
  }
  {
    EngineOptions p = o;
    p.kv_block_size = 4;
    p.kv_blocks = 24;  // 96 slots: one full context, far less than the four sequences need
    p.prefix_cache = false;
    auto e = Engine::create(p);
    EXPECT_EQ(run_together(*e, prompts, n), alone) << "preempted differs from uninterrupted";
    EXPECT_GT(e->stats().preemptions_total, 0u);
  }
}

// Hybrid models (linear-attention layers) resume cached prefixes from recurrent-state snapshots:
// a repeat, a chat's next turn and a prompt sharing a prefix that ends mid-block hit the cache at
// a snapshot's block boundary and give exactly the greedy tokens of a cold run, as does a prompt
// sharing only a system prompt with two before it; with the one snapshot slot taken by another
// prompt, or the blocks evicted, the prompt starts cold with the same tokens; and nothing stays
// held.
TEST_P(EngineFixture, HybridPrefixHitsFromStateSnapshotsEqualCold) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  const Reference ref = load_reference(dir);
  const int32_t n = 12;
  EngineOptions o = fixture_options(dir);
  const std::vector<int32_t>& p1 = ref.prompt;           // 48 tokens: 3 blocks of 16
  std::vector<int32_t> p3(p1.begin(), p1.begin() + 40);  // shares 40 tokens: mid-block 2
  for (int32_t i = 0; i < 9; ++i) p3.push_back(p1[static_cast<size_t>(i)]);
  const std::vector<int32_t> other(p1.rbegin(), p1.rend());
  // Three prompts sharing only a 36-token "system prompt" (two full blocks) with one another.
  std::vector<std::vector<int32_t>> shared_system;
  for (int32_t k = 0; k < 3; ++k) {
    std::vector<int32_t> q(p1.begin(), p1.begin() + 36);
    q.insert(q.end(), other.begin() + 14 * k, other.begin() + 14 * k + 14);
    shared_system.push_back(q);
  }
  std::vector<std::vector<int32_t>> cold;  // p1, p2, p3, other, then shared_system
  std::vector<int32_t> p2;
  {
    EngineOptions c = o;
    c.prefix_cache = false;
    auto e = Engine::create(c);
    if (e->stats().state_slots_total == 0) GTEST_SKIP() << "no recurrent state: not a hybrid";
    EXPECT_FALSE(e->model_info().prefix_cache);
    cold.push_back(run_together(*e, {p1}, n)[0]);
    // The next turn: the prompt, 8 tokens of its answer and 6 more.
    p2 = p1;
    p2.insert(p2.end(), cold[0].begin(), cold[0].begin() + 8);
    p2.insert(p2.end(), p1.begin() + 10, p1.begin() + 16);
    for (const auto& p : {p2, p3, other}) cold.push_back(run_together(*e, {p}, n)[0]);
    for (const auto& p : shared_system) cold.push_back(run_together(*e, {p}, n)[0]);
  }
  auto run = [&](Engine& e, const std::vector<int32_t>& p) {
    Collected r;
    e.submit(greedy_request(p, n, r));
    wait(r);
    return std::make_pair(r.ids, r.usage.cached_tokens);
  };
  {
    auto e = Engine::create(o);
    EXPECT_TRUE(e->model_info().prefix_cache);
    EXPECT_EQ(run(*e, p1), std::make_pair(cold[0], 0));
    EXPECT_EQ(run(*e, p1), std::make_pair(cold[0], 32)) << "a repeat";
    EXPECT_EQ(run(*e, p2), std::make_pair(cold[1], 48)) << "the next turn";
    EXPECT_EQ(run(*e, p3), std::make_pair(cold[2], 32)) << "a prefix ending mid-block";
    wait_idle(*e);
    const EngineStats s = e->stats();
    EXPECT_EQ(s.state_snapshot_restores_total, 3u);
    EXPECT_EQ(s.cached_tokens_total, 112u);
    EXPECT_EQ(s.state_slots_used, 0);
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_GT(s.state_snapshots_used, 0);
  }
  {
    // The second prompt starts cold (the system prompt's blocks are cached, its state is not) and
    // snapshots where it left the first; the third resumes there.
    auto e = Engine::create(o);
    EXPECT_EQ(run(*e, shared_system[0]), std::make_pair(cold[4], 0));
    EXPECT_EQ(run(*e, shared_system[1]), std::make_pair(cold[5], 0));
    EXPECT_EQ(run(*e, shared_system[2]), std::make_pair(cold[6], 32)) << "a shared system prompt";
  }
  {
    EngineOptions one = o;
    one.state_snapshots = 1;  // p1's snapshot goes to `other`'s prompt
    auto e = Engine::create(one);
    EXPECT_EQ(run(*e, p1), std::make_pair(cold[0], 0));
    EXPECT_EQ(run(*e, other), std::make_pair(cold[3], 0));
    EXPECT_EQ(run(*e, p2), std::make_pair(cold[1], 0)) << "snapshot slots ran out";
    EXPECT_EQ(run(*e, p2), std::make_pair(cold[1], 48));
  }
  {
    EngineOptions small = o;
    small.kv_blocks = 6;  // one 96-token context: `other` evicts p1's blocks and snapshots
    auto e = Engine::create(small);
    EXPECT_EQ(run(*e, p1), std::make_pair(cold[0], 0));
    std::vector<int32_t> long_other = other;
    long_other.insert(long_other.end(), other.begin(), other.begin() + 30);  // 78 + 12 tokens
    run(*e, long_other);
    EXPECT_EQ(run(*e, p1), std::make_pair(cold[0], 0)) << "blocks evicted";
    wait_idle(*e);
    EXPECT_EQ(e->stats().state_slots_used, 0);
    EXPECT_EQ(e->stats().kv_blocks_used, 0);
  }
}

// Decode steps of 7 down to 1 sequences (graph buckets 8, 4, 2, 1: padded steps included)
// replayed as CUDA graphs give the tokens eager steps give; so do device-picked greedy tokens and
// the host sampler's. On the CPU (no graphs) the greedy comparison still runs.
TEST_P(EngineFixture, GraphReplayAndDeviceGreedyMatchEager) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  const Reference ref = load_reference(dir);
  const int32_t n = static_cast<int32_t>(ref.greedy.size());
  std::vector<std::vector<int32_t>> prompts;
  for (size_t cut : {48, 20, 33, 9, 41, 3, 27}) {
    const size_t len = std::min(cut, ref.prompt.size());
    prompts.emplace_back(ref.prompt.end() - static_cast<std::ptrdiff_t>(len), ref.prompt.end());
  }
  EngineOptions o = fixture_options(dir);
  const bool on_cpu = o.device == "cpu";
  // The MoE fixtures' BF16 experts are routed on the device in the file's layout, so their steps
  // are recorded too, unless MEMRA_MOE_DEVICE=0 or MEMRA_MOE_DEVICE_GGML=0 sends the routing to
  // the host (decoder.cpp then records none); hybrid models (qwen3_5) are, their padding in the
  // scratch state slot, and Gemma 4's, its per-layer inputs in buffers sized up front (gemma4.cpp).
  const std::string arch = GetParam();
  const bool moe_on_host =
      !env_switch("MEMRA_MOE_DEVICE", true) || !env_switch("MEMRA_MOE_DEVICE_GGML", true);
  const bool recorded = !on_cpu && (arch.find("moe") == std::string::npos || !moe_on_host);
  std::vector<std::vector<int32_t>> graphs;
  {
    auto e = Engine::create(o);
    graphs = run_staggered(*e, prompts, n, false);
    EXPECT_EQ(run_staggered(*e, prompts, n, /*logprobs=*/true), graphs)
        << "the sampling chain differs from the device greedy argmax";
    // The first run's steps are published by now (the second one ran after them).
    const EngineStats st = e->stats();
    if (recorded) {
      EXPECT_GT(st.graph_replays_total, 0u) << "no decode step was replayed from a graph";
      EXPECT_EQ(st.graph_recordings_failed_total, 0u);
    } else {
      EXPECT_EQ(st.graph_replays_total + st.graphs_recorded_total, 0u);
    }
  }
  {
    EngineOptions eager = o;
    eager.cuda_graphs = false;
    auto e = Engine::create(eager);
    EXPECT_EQ(run_staggered(*e, prompts, n, false), graphs) << "graph replay differs from eager";
    EXPECT_EQ(e->stats().graph_replays_total, 0u);
  }
  if (recorded) {
    // The first recording fails (injected): that shape runs eagerly, the others replay.
    ::setenv("MEMRA_CUDA_FAULT", "capture:1", 1);
    auto e = Engine::create(o);
    ::unsetenv("MEMRA_CUDA_FAULT");
    EXPECT_EQ(run_staggered(*e, prompts, n, false), graphs)
        << "a failed recording changed the tokens";
    EXPECT_EQ(e->stats().graph_recordings_failed_total, 1u);
  }
}

// The embeddings gate: transformers' final-norm hidden states (tests/fixtures/models/<arch>/
// embeddings.json, scripts/gen_embedding_fixtures.py) pooled by the last token, the mean and the
// first token, L2-normalized, equal the engine's embeddings within 1e-4 relative (the L2 norm of
// the difference over the reference's); batched, chunked and preempted inputs give the same
// vectors; no KV block stays in use and nothing enters the prefix cache.
struct Embedded {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<float> embedding;
  FinishReason finish = FinishReason::none;
  std::string error;
  Usage usage;
};

Request embed_request(const std::vector<int32_t>& input, Pooling pooling, Embedded& out) {
  Request q;
  q.kind = RequestKind::embed;
  q.prompt = input;
  q.pooling = pooling;
  q.sink = [&out](const StreamEvent& ev) {
    std::lock_guard lock(out.mu);
    if (ev.finish == FinishReason::none) return;
    out.embedding = ev.embedding;
    out.finish = ev.finish;
    out.error = ev.error;
    out.usage = ev.usage;
    out.cv.notify_all();
  };
  return q;
}

std::vector<std::vector<float>> embed_all(Engine& e, const std::vector<std::vector<int32_t>>& in,
                                          Pooling pooling, bool together) {
  std::vector<Embedded> results(in.size());
  std::vector<std::vector<float>> out;
  const auto wait_one = [&](Embedded& r) {
    std::unique_lock lock(r.mu);
    EXPECT_TRUE(r.cv.wait_for(lock, std::chrono::seconds(60), [&] {
      return r.finish != FinishReason::none;
    })) << "embedding did not finish";
    EXPECT_EQ(r.finish, FinishReason::stop) << r.error;
    out.push_back(r.embedding);
  };
  for (size_t i = 0; i < in.size(); ++i) {
    e.submit(embed_request(in[i], pooling, results[i]));
    if (!together) wait_one(results[i]);
  }
  if (together)
    for (auto& r : results) wait_one(r);
  return out;
}

double relative_l2(const std::vector<float>& got, std::vector<double> want) {
  double n2 = 0.0;
  for (double v : want) n2 += v * v;
  for (double& v : want) v /= std::sqrt(n2);
  if (got.size() != want.size()) return 1e9;
  double d2 = 0.0;
  for (size_t i = 0; i < got.size(); ++i) d2 += (got[i] - want[i]) * (got[i] - want[i]);
  return std::sqrt(d2);  // the reference is unit length
}

void wait_blocks_free(const Engine& e) {
  for (int i = 0; i < 400 && e.stats().kv_blocks_used > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST_P(EngineFixture, EmbeddingsMatchTransformersPooled) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/embeddings.json")) << dir;
  std::ifstream in(dir + "/embeddings.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto inputs = ref.at("inputs").get<std::vector<std::vector<int32_t>>>();
  const EngineOptions o = fixture_options(dir);
  const bool on_cpu = o.device == "cpu";
  EngineOptions chunked = o;
  chunked.max_batch_tokens = 7;
  EngineOptions tight = o;
  tight.kv_block_size = 4;
  tight.kv_blocks = 24;  // one context: the four inputs cannot all hold their blocks at once
  auto e = Engine::create(o);
  auto e_chunked = Engine::create(chunked);
  auto e_tight = Engine::create(tight);
  const double tol = on_cpu ? 1e-4 : 2e-2;  // a GPU runs bf16 activations
  for (Pooling pooling : {Pooling::last, Pooling::mean, Pooling::cls}) {
    SCOPED_TRACE(pooling_name(pooling));
    const auto want = ref.at(pooling_name(pooling)).get<std::vector<std::vector<double>>>();
    const auto alone = embed_all(*e, inputs, pooling, false);
    ASSERT_EQ(alone.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(relative_l2(alone[i], want[i]), tol) << "input " << i;
    const auto batched = embed_all(*e, inputs, pooling, true);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(relative_l2(batched[i], want[i]), tol) << "batched input " << i;
    const auto pieces = embed_all(*e_chunked, inputs, pooling, true);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(relative_l2(pieces[i], want[i]), tol) << "chunked input " << i;
    const auto squeezed = embed_all(*e_tight, inputs, pooling, true);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(relative_l2(squeezed[i], want[i]), tol) << "tight-cache input " << i;
    if (on_cpu) {
      EXPECT_EQ(batched, alone) << "batched differs from alone";
    }
  }
  // No KV kept, nothing published: a generation of the first input finds no cached block.
  wait_blocks_free(*e);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  test::Collected r;
  e->submit(greedy_request(inputs[0], 2, r));
  wait(r);
  EXPECT_EQ(r.usage.cached_tokens, 0) << "an embedding input entered the prefix cache";
}

// Score requests (the rerank path): the logits of the asked ids at the prompt's last position
// equal transformers' (reference.json row 47) within 1e-4 of the row's largest logit, and are
// bit-identical alone, batched with others and served from the prefix cache.
TEST_P(EngineFixture, ScoresMatchTransformersAloneAndBatched) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const auto prompt = j.at("prompt").get<std::vector<int32_t>>();
  const auto logits = j.at("logits").get<std::vector<double>>();
  const size_t vocab = j.at("vocab").get<size_t>();
  const double* last = logits.data() + (prompt.size() - 1) * vocab;
  const EngineOptions o = fixture_options(dir);
  if (o.device != "cpu") GTEST_SKIP() << "CPU oracle only";
  auto e = Engine::create(o);
  const std::vector<int32_t> ids = {5, 40, 77};
  struct Scored {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<float> scores;
    bool done = false;
    std::string error;
  };
  const auto run = [&](const std::vector<std::vector<int32_t>>& prompts) {
    std::vector<Scored> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request q;
      q.kind = RequestKind::score;
      q.prompt = prompts[i];
      q.score_token_ids = ids;
      Scored* r = &out[i];
      q.sink = [r](const StreamEvent& ev) {
        std::lock_guard lock(r->mu);
        EXPECT_TRUE(ev.tokens.empty());
        if (ev.finish == FinishReason::none) return;
        r->scores = ev.scores;
        r->error = ev.error;
        r->done = true;
        r->cv.notify_all();
      };
      e->submit(std::move(q));
    }
    std::vector<std::vector<float>> scores;
    for (Scored& r : out) {
      std::unique_lock lock(r.mu);
      EXPECT_TRUE(r.cv.wait_for(lock, std::chrono::seconds(60), [&] { return r.done; }));
      EXPECT_TRUE(r.error.empty()) << r.error;
      scores.push_back(r.scores);
    }
    return scores;
  };
  const std::vector<int32_t> other(prompt.begin() + 3, prompt.end());
  const auto alone = run({prompt});
  ASSERT_EQ(alone[0].size(), ids.size());
  double max_abs = 0.0;
  for (size_t v = 0; v < vocab; ++v) max_abs = std::max(max_abs, std::abs(last[v]));
  for (size_t k = 0; k < ids.size(); ++k)
    EXPECT_LE(std::abs(alone[0][k] - last[ids[k]]), 1e-4 * max_abs) << "id " << ids[k];
  const auto other_alone = run({other});
  const auto batched = run({other, prompt, std::vector<int32_t>(prompt.begin(), prompt.end() - 9)});
  EXPECT_EQ(batched[1], alone[0]) << "batched (and prefix-cached) differs from alone";
  EXPECT_EQ(batched[0], other_alone[0]) << "batched differs from alone";
}

// Seeded sampling through every part of the chain: temperatures, top-k/p, min-p, penalties,
// logit bias (a duplicate id included), logprobs, a grammar, and greedy rows with penalties.
std::vector<Request> sampled_requests(const std::vector<std::vector<int32_t>>& prompts, int32_t n) {
  std::vector<Request> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request q;
    q.prompt = prompts[i];
    q.stop.max_tokens = n;
    SamplingParams& s = q.sampling;
    s.seed = 1000 + i;
    switch (i % 6) {
      case 0:
        s.temperature = 0.8f;
        break;
      case 1:
        s.temperature = 1.2f, s.top_k = 20, s.top_p = 0.9f, s.top_logprobs = 3;
        break;
      case 2:
        s.temperature = 0.7f, s.min_p = 0.05f, s.repetition_penalty = 1.2f;
        s.presence_penalty = 0.3f, s.frequency_penalty = 0.4f, s.top_logprobs = 0;
        break;
      case 3:
        s.temperature = 1.0f, s.top_p = 0.5f, s.logit_bias = {{5, 2.0f}, {9, -100.0f}, {5, 1.0f}};
        break;
      case 4:
        s.temperature = 0.0f, s.repetition_penalty = 1.3f, s.top_logprobs = 5;
        break;
      default: {
        structured::GrammarBuilder b;
        q.grammar = b.build(b.any_json_object());
        s.temperature = 1.0f, s.top_k = 50;
      }
    }
    if (!q.grammar) q.stop.ignore_eos = true;
    out.push_back(std::move(q));
  }
  return out;
}

struct Sampled {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GeneratedToken> tokens;
  std::string error;
  bool done = false;
};

std::vector<std::vector<GeneratedToken>> run_sampled(Engine& e, std::vector<Request> requests) {
  std::vector<Sampled> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    Sampled& r = results[i];
    requests[i].sink = [&r](const StreamEvent& ev) {
      std::lock_guard lock(r.mu);
      r.tokens.insert(r.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finish == FinishReason::none) return;
      r.error = ev.error;
      r.done = true;
      r.cv.notify_all();
    };
    e.submit(std::move(requests[i]));
  }
  std::vector<std::vector<GeneratedToken>> out;
  for (Sampled& r : results) {
    std::unique_lock lock(r.mu);
    EXPECT_TRUE(r.cv.wait_for(lock, std::chrono::seconds(120), [&] { return r.done; }));
    EXPECT_EQ(r.error, "");
    out.push_back(r.tokens);
  }
  return out;
}

// tol < 0: logprobs bit-identical; else within tol.
void expect_same_tokens(const std::vector<std::vector<GeneratedToken>>& got,
                        const std::vector<std::vector<GeneratedToken>>& want, float tol,
                        const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size()) << what << ": request " << r;
    for (size_t t = 0; t < got[r].size(); ++t) {
      const GeneratedToken &a = got[r][t], &b = want[r][t];
      ASSERT_EQ(a.id, b.id) << what << ": request " << r << " token " << t;
      ASSERT_EQ(a.top.size(), b.top.size());
      std::vector<std::pair<float, float>> lp = {{a.logprob, b.logprob}};
      for (size_t k = 0; k < a.top.size(); ++k) {
        if (tol < 0) {
          EXPECT_EQ(a.top[k].id, b.top[k].id) << what << ": request " << r;
        }
        lp.emplace_back(a.top[k].logprob, b.top[k].logprob);
      }
      for (const auto& [x, y] : lp) {
        if (tol < 0) {
          EXPECT_EQ(std::memcmp(&x, &y, sizeof(float)), 0) << what << ": " << x << " vs " << y;
        } else {
          EXPECT_NEAR(x, y, tol) << what << ": request " << r << " token " << t;
        }
      }
    }
  }
}

std::vector<std::vector<int32_t>> sampling_prompts(const Reference& ref) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t cut : {48, 20, 33, 9, 41, 3, 27, 14, 36, 5, 22, 30}) {
    const size_t len = std::min(cut, ref.prompt.size());
    prompts.emplace_back(ref.prompt.end() - static_cast<std::ptrdiff_t>(len), ref.prompt.end());
  }
  return prompts;
}

// The exactness contract of device sampling: the same logits sampled on the device and by the
// host sampler give the same tokens and bit-identical logprobs (on the CPU both are the host's).
TEST_P(EngineFixture, SeededSamplingOnDeviceMatchesHostSampler) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  const auto prompts = sampling_prompts(load_reference(dir));
  EngineOptions o = fixture_options(dir);
  auto device = Engine::create(o);
  const auto on_device = run_sampled(*device, sampled_requests(prompts, 24));
  o.device_sampling = false;
  auto host = Engine::create(o);
  expect_same_tokens(on_device, run_sampled(*host, sampled_requests(prompts, 24)), -1.0f,
                     "device sampling vs host sampler");
}

// Seeded sampling keeps the determinism contract: each request's tokens and logprobs are
// bit-identical whether it runs alone or batched with eleven others (its own seed, its own RNG
// stream; the logits are batch-invariant), on whichever device the test runs.
TEST_P(EngineFixture, SeededSamplingAloneMatchesBatched) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  const auto prompts = sampling_prompts(load_reference(dir));
  auto engine = Engine::create(fixture_options(dir));
  const auto batched = run_sampled(*engine, sampled_requests(prompts, 16));
  std::vector<std::vector<GeneratedToken>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    // sampled_requests sets request i's parameters from i, so build all and keep the i-th.
    std::vector<Request> all = sampled_requests(prompts, 16);
    std::vector<Request> one;
    one.push_back(std::move(all[i]));
    alone.push_back(run_sampled(*engine, std::move(one))[0]);
  }
  expect_same_tokens(alone, batched, -1.0f, "alone vs batched");
}

// Seeded requests on the GPU follow the CPU's tokens while the two engines' logits lead to the
// same draw: both run the same chain with the same seed, but the logits differ by the GPU's f16
// activations (the model gate accepts 5e-2 of the largest), and the fixtures' random weights give
// nearly flat distributions, so a draw near a cumulative boundary may pick a neighbour (measured:
// 4 of 6 fixtures diverge somewhere in 12 x 16 tokens, first at token 3). So each request is
// compared up to its first differing token (from it on the contexts differ), with logprobs within
// 0.1 there, and at least half the tokens must be compared; exactness of the chain itself is
// SeededSamplingOnDeviceMatchesHostSampler's.
TEST_P(EngineFixture, SeededSamplingOnGpuFollowsCpu) {
  const std::string dir = fixture_dir(GetParam());
  MEMRA_REQUIRE_TEST_DATA(std::filesystem::exists(dir + "/reference.json")) << dir;
  EngineOptions o = fixture_options(dir);
  if (o.device == "cpu") GTEST_SKIP() << "compares a GPU with the CPU (MEMRA_TEST_DEVICE=cuda)";
  const auto prompts = sampling_prompts(load_reference(dir));
  auto gpu = Engine::create(o);
  auto on_gpu = run_sampled(*gpu, sampled_requests(prompts, 16));
  o.device = "cpu";
  auto cpu = Engine::create(o);
  auto on_cpu = run_sampled(*cpu, sampled_requests(prompts, 16));
  ASSERT_EQ(on_gpu.size(), on_cpu.size());
  size_t compared = 0, total = 0;
  for (size_t r = 0; r < on_gpu.size(); ++r) {
    total += on_cpu[r].size();
    size_t same = 0;
    while (same < on_gpu[r].size() && same < on_cpu[r].size() &&
           on_gpu[r][same].id == on_cpu[r][same].id)
      ++same;
    on_gpu[r].resize(same);
    on_cpu[r].resize(same);
    compared += same;
  }
  std::printf("GPU vs CPU: %zu of %zu sampled tokens equal before the first divergence\n", compared,
              total);
  // A broken draw (a wrong uniform, a wrong chain step) diverges at the first token of nearly
  // every request; rounding moves a few draws late in a few requests.
  EXPECT_GE(2 * compared, total) << "GPU and CPU seeded tokens diverge early";
  expect_same_tokens(on_gpu, on_cpu, 1e-1f, "GPU vs CPU");
}

// The MoE device path (ops.h's MoE section on CUDA: routing, expert matmuls and their sum in
// device memory, decode steps recorded as graphs), which the F32 fixtures never take: a
// scaled-down qwen3-30b-a3b `memra synth` file with tiled Q4_K/Q6_K experts (2 layers of 256, 64
// experts of 256, top 8). Twelve staggered requests give the same greedy tokens with decode steps
// replayed from graphs, run eagerly, and each request alone; steps of more than 8 sequences sort
// their pairs by expert on the device, smaller ones run a block per pair. Needs a GPU
// (MEMRA_TEST_DEVICE=cuda); the CPU's MoE arithmetic is the fixtures' business.
TEST(EngineMoeDevice, GraphsBatchesAndAloneAgree) {
  EngineOptions o = fixture_options("");
  if (o.device == "cpu") GTEST_SKIP() << "the MoE device path needs MEMRA_TEST_DEVICE=cuda";
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("memra-moe-device-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  synth::Options so;
  so.shape = "qwen3-30b-a3b";
  so.mix = convert::Mix::q4_k_m;
  so.fast_quant = true;
  so.output_path = path;
  so.config_patch = R"({"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 64, "num_experts": 64, "moe_intermediate_size": 256,
      "intermediate_size": 512})";
  synth::write_gguf(so);
  o.model = path;
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(11);
  for (int len : {40, 7, 23, 3, 31, 12, 19, 5, 28, 9, 16, 2}) {
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 4000 + 16);
    prompts.push_back(std::move(p));
  }
  constexpr int32_t n = 24;
  std::vector<std::vector<int32_t>> graphs;
  {
    auto e = Engine::create(o);
    graphs = run_staggered(*e, prompts, n, false);
    EXPECT_GT(e->stats().graph_replays_total, 0u) << "no decode step was replayed from a graph";
    EXPECT_EQ(e->stats().graph_recordings_failed_total, 0u);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int32_t max_tokens = std::max<int32_t>(1, n - 2 * static_cast<int32_t>(i));
      EXPECT_EQ(run_together(*e, {prompts[i]}, max_tokens)[0], graphs[i])
          << "request " << i << " alone differs from it in the batch";
    }
  }
  {
    EngineOptions eager = o;
    eager.cuda_graphs = false;
    auto e = Engine::create(eager);
    EXPECT_EQ(run_staggered(*e, prompts, n, false), graphs) << "graph replay differs from eager";
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Archs, EngineFixture,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma3", "qwen3_moe",
                                           "qwen3_moe_sparse_step", "gemma4", "qwen3_5",
                                           "qwen3_5_moe", "gemma4_moe"));

}  // namespace
}  // namespace memra
