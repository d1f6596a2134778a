// The engine end to end over the fake model: greedy output equals the model's sequential answer,
// and the determinism contract holds — alone vs batched, prefix-cache hit vs cold, chunked vs
// whole prefill, preempted vs uninterrupted, and same seed vs same seed. Also stops, limits,
// cancellation and submit validation.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include <regex>
#include <set>

#include "engine/engine_impl.h"
#include "engine_harness.h"
#include "fake_model.h"
#include "structured/grammar.h"

namespace memra {
namespace {

using namespace engine_testing;  // NOLINT: the harness is this file's vocabulary

TEST(Engine, GreedyMatchesTheModelsSequentialAnswer) {
  Harness h = start();
  Collected c;
  h.engine->submit(greedy_request(prompt_of(21), 12, c));
  c.wait();
  EXPECT_EQ(c.ids, expected_greedy(prompt_of(21), 12));
  EXPECT_EQ(c.finish, FinishReason::length);
  EXPECT_EQ(c.usage.prompt_tokens, 21);
  EXPECT_EQ(c.usage.completion_tokens, 12);
  std::string expect_text;
  FakeTokenizer tok;
  for (int32_t id : c.ids) expect_text += tok.token_bytes(id);
  EXPECT_EQ(c.text, expect_text);
}

TEST(Engine, AloneEqualsBatchedWithOthers) {
  Harness h = start();
  const int n = 24;
  std::vector<Collected> c(n);
  for (int i = 0; i < n; ++i) h.engine->submit(greedy_request(prompt_of(5 + i * 3, i), 16, c[i]));
  for (int i = 0; i < n; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(5 + i * 3, i), 16)) << "request " << i;
  }
  EXPECT_GT(h.model->max_batch_tokens_seen.load(), 16);  // they really shared steps
}

TEST(Engine, PrefixCacheHitEqualsCold) {
  Harness h = start();
  Collected cold, warm;
  h.engine->submit(greedy_request(prompt_of(50), 8, cold));
  cold.wait();
  h.engine->submit(greedy_request(prompt_of(50), 8, warm));
  warm.wait();
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  EXPECT_EQ(warm.usage.cached_tokens, 48);  // 3 full blocks of 16; the last token is recomputed
  EXPECT_EQ(warm.ids, cold.ids);
  EXPECT_EQ(warm.ids, expected_greedy(prompt_of(50), 8));
  EXPECT_EQ(h.engine->stats().cached_tokens_total, 48u);
}

TEST(Engine, ChunkedPrefillEqualsWhole) {
  EngineOptions o;
  o.max_batch_tokens = 7;
  Harness h = start(o);
  Collected c;
  h.engine->submit(greedy_request(prompt_of(60), 10, c));
  c.wait();
  EXPECT_EQ(c.ids, expected_greedy(prompt_of(60), 10));
  EXPECT_LE(h.model->max_batch_tokens_seen.load(), 7);
}

TEST(Engine, PreemptedEqualsUninterrupted) {
  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_blocks = 40;  // 160 slots for 8 sequences that grow to 70 tokens each
  o.context_length = 128;
  o.prefix_cache = false;
  Harness h = start(o, 128);
  const int n = 8;
  std::vector<Collected> c(n);
  // Steps slowed while the requests arrive, so they all run together and the cache must preempt
  // (on a loaded machine the engine finished the first ones alone before the rest were submitted,
  // and nothing was preempted: a CI run of 2026-12-02 failed that way).
  h.model->delay_ms = 2;
  for (int i = 0; i < n; ++i) h.engine->submit(greedy_request(prompt_of(10, i), 60, c[i]));
  h.model->delay_ms = 0;
  for (int i = 0; i < n; ++i) {
    c[i].wait();
    EXPECT_EQ(c[i].ids, expected_greedy(prompt_of(10, i), 60)) << "request " << i;
  }
  // Stats are published after a step's events reach the sinks: read them once the engine is idle.
  wait_idle(*h.engine);
  EXPECT_GT(h.engine->stats().preemptions_total, 0u);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

TEST(Engine, SeededSamplingIsReproducibleAcrossBatching) {
  Harness h = start();
  auto sampled = [](uint64_t seed, Collected& c) {
    Request r;
    r.prompt = prompt_of(9);
    r.sampling.temperature = 5.0f;  // flat enough that the draw matters
    r.sampling.seed = seed;
    r.stop.max_tokens = 24;
    r.stop.ignore_eos = true;
    r.sink = c.sink();
    return r;
  };
  Collected alone;
  h.engine->submit(sampled(7, alone));
  alone.wait();
  std::vector<Collected> noise(6);
  Collected batched, other_seed;
  for (int i = 0; i < 3; ++i) h.engine->submit(greedy_request(prompt_of(30, i), 20, noise[i]));
  h.engine->submit(sampled(7, batched));
  h.engine->submit(sampled(8, other_seed));
  for (int i = 3; i < 6; ++i) h.engine->submit(greedy_request(prompt_of(12, i), 20, noise[i]));
  batched.wait();
  other_seed.wait();
  for (auto& x : noise) x.wait();
  EXPECT_EQ(batched.ids, alone.ids);
  EXPECT_NE(other_seed.ids, alone.ids);
  EXPECT_NE(alone.ids, expected_greedy(prompt_of(9), 24));  // it really sampled
}

TEST(Engine, StopsOnEosWithoutEmittingIt) {
  Harness h = start({}, 256, /*eos_after=*/15);
  Collected c;
  h.engine->submit(greedy_request(prompt_of(10), 50, c));
  c.wait();
  EXPECT_EQ(c.finish, FinishReason::stop);
  EXPECT_EQ(c.ids.size(), 6u);  // 5 tokens then EOS at history length 15
  EXPECT_EQ(c.ids.back(), testing::kFakeEos);
  EXPECT_EQ(c.text.find("</s>"), std::string::npos);
  EXPECT_EQ(c.text.size(), 5u);
}

TEST(Engine, StopStringAcrossTokensIsNotEmitted) {
  Harness h = start();
  // Find the greedy text, then stop on a 3-character string spanning three tokens.
  Collected full;
  h.engine->submit(greedy_request(prompt_of(12), 20, full));
  full.wait();
  const std::string stop = full.text.substr(8, 3);
  const std::string before = full.text.substr(0, full.text.find(stop));
  Collected c;
  Request r = greedy_request(prompt_of(12), 20, c);
  r.stop.stop_strings = {"never-there", stop};
  h.engine->submit(std::move(r));
  c.wait();
  EXPECT_EQ(c.finish, FinishReason::stop);
  EXPECT_EQ(c.matched, stop);
  EXPECT_EQ(c.text, before);
}

TEST(Engine, StopTokenIds) {
  Harness h = start();
  const auto expect = expected_greedy(prompt_of(12), 20);
  Collected c;
  Request r = greedy_request(prompt_of(12), 20, c);
  r.stop.stop_token_ids = {expect[4]};
  h.engine->submit(std::move(r));
  c.wait();
  EXPECT_EQ(c.finish, FinishReason::stop);
  const size_t first = std::find(expect.begin(), expect.end(), expect[4]) - expect.begin();
  EXPECT_EQ(c.ids.size(), first + 1);
}

TEST(Engine, ContextLimitEndsWithLength) {
  EngineOptions o;
  o.context_length = 40;
  Harness h = start(o);
  Collected c;
  h.engine->submit(greedy_request(prompt_of(30), 10, c));
  c.wait();
  EXPECT_EQ(c.finish, FinishReason::length);
  EXPECT_EQ(c.ids.size(), 10u);
}

TEST(Engine, SubmitRefusesWhatCannotFit) {
  EngineOptions o;
  o.context_length = 64;
  Harness h = start(o);
  Collected c;
  try {
    h.engine->submit(greedy_request(prompt_of(60), 10, c));
    FAIL() << "accepted a prompt that overflows the context";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    const std::string m = e.what();
    EXPECT_NE(m.find("60"), std::string::npos) << m;
    EXPECT_NE(m.find("10"), std::string::npos) << m;
    EXPECT_NE(m.find("64"), std::string::npos) << m;
  }
  EXPECT_THROW(h.engine->submit(greedy_request({}, 4, c)), Error);
  EXPECT_THROW(h.engine->submit(greedy_request({5, 99}, 4, c)), Error);
  Request bad = greedy_request(prompt_of(4), 4, c);
  bad.sampling.top_p = 2.0f;
  EXPECT_THROW(h.engine->submit(std::move(bad)), Error);
}

TEST(Engine, QueueFullIsResourceExhausted) {
  EngineOptions o;
  o.max_queued = 2;
  o.max_sequences = 1;
  Harness h = start(o);
  h.model->delay_ms = 20;
  std::vector<Collected> c(8);
  int refused = 0;
  for (auto& x : c) {
    try {
      h.engine->submit(greedy_request(prompt_of(8), 30, x));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::resource_exhausted);
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  h.model->delay_ms = 0;
  h.engine.reset();  // before the sinks' Collected go away
}

TEST(Engine, CancelFreesTheRequestWithinAStep) {
  Harness h = start();
  h.model->delay_ms = 2;
  Collected c;
  const RequestId id = h.engine->submit(greedy_request(prompt_of(8), 200, c));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  h.engine->cancel(id);
  c.wait();
  EXPECT_EQ(c.finish, FinishReason::cancelled);
  EXPECT_LT(c.ids.size(), 200u);
  h.engine->cancel(id);  // already finished: ignored
  h.engine->cancel(12345);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().running, 0);
}

TEST(Engine, DestructionCancelsPendingRequests) {
  Collected c;
  {
    Harness h = start();
    h.model->delay_ms = 5;
    h.engine->submit(greedy_request(prompt_of(8), 200, c));
  }
  EXPECT_EQ(c.finish, FinishReason::cancelled);
}

// "yes" or "no", one to three times, comma-separated: every token is forced through the grammar,
// whatever the (flat, sampled) logits prefer, and generation ends when the grammar is complete.
std::shared_ptr<const structured::Grammar> yes_no_grammar() {
  structured::GrammarBuilder b;
  auto answer = b.keyed_choice(
      {{"yes", structured::GrammarBuilder::kEnd}, {"no", structured::GrammarBuilder::kEnd}});
  return b.build(b.repeat(answer, ", ", 1, 3));
}

TEST(Engine, GrammarConstrainsEverySampledToken) {
  Harness h = start();
  const std::regex valid("(yes|no)(, (yes|no)){0,2}");
  std::vector<Collected> c(12);
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.prompt = prompt_of(9, i);
    r.sampling.temperature = 5.0f;  // flat: unconstrained, almost any character would come
    r.sampling.seed = 100 + i;
    r.stop.max_tokens = 40;
    r.grammar = yes_no_grammar();
    r.sink = c[i].sink();
    h.engine->submit(std::move(r));
  }
  std::set<std::string> distinct;
  for (int i = 0; i < 12; ++i) {
    c[i].wait();
    EXPECT_TRUE(std::regex_match(c[i].text, valid)) << "request " << i << ": " << c[i].text;
    // A complete "x, y, z" ends at once; shorter answers end on EOS, allowed once complete.
    EXPECT_EQ(c[i].finish, FinishReason::stop) << c[i].text;
    distinct.insert(c[i].text);
  }
  EXPECT_GT(distinct.size(), 2u);  // the draws really varied inside the grammar
}

TEST(Engine, GrammarGreedyAloneEqualsBatched) {
  Harness h = start();
  auto constrained = [](int salt, Collected& c) {
    Request r = greedy_request(prompt_of(7, salt), 30, c);
    r.grammar = yes_no_grammar();
    return r;
  };
  Collected alone;
  h.engine->submit(constrained(3, alone));
  alone.wait();
  std::vector<Collected> others(8);
  Collected batched;
  for (int i = 0; i < 4; ++i) h.engine->submit(greedy_request(prompt_of(20, i), 20, others[i]));
  h.engine->submit(constrained(3, batched));
  for (int i = 4; i < 8; ++i) h.engine->submit(constrained(i, others[i]));
  batched.wait();
  for (auto& x : others) x.wait();
  EXPECT_EQ(batched.ids, alone.ids);
  EXPECT_EQ(batched.text, alone.text);
}

TEST(Engine, GrammarWithIgnoreEosIsRefused) {
  Harness h = start();
  Collected c;
  Request r = greedy_request(prompt_of(4), 8, c);
  r.grammar = yes_no_grammar();
  r.stop.ignore_eos = true;
  EXPECT_THROW(h.engine->submit(std::move(r)), Error);
}

// A padded checkpoint has logit rows past the tokenizer's end (here 8, each with the highest
// logit). They must never be sampled, greedy or not: before the fix the first such id reached the
// detokenizer on the engine thread, which threw outside any try and aborted the process.
TEST(Engine, PaddedLogitRowsAreNeverSampled) {
  Harness h = start({}, 256, -1, /*padded_rows=*/8);
  Collected greedy;
  h.engine->submit(greedy_request(prompt_of(9), 12, greedy));
  std::vector<Collected> sampled(4);
  for (int i = 0; i < 4; ++i) {
    Request r = greedy_request(prompt_of(9, i), 12, sampled[i]);
    r.sampling.temperature = i < 2 ? 1.0f : 1e-40f;
    r.sampling.seed = 5 + i;
    r.sampling.top_logprobs = 3;  // the reported alternatives must have tokens too
    r.stop.ignore_eos = true;
    h.engine->submit(std::move(r));
  }
  greedy.wait();
  EXPECT_EQ(greedy.finish, FinishReason::length) << greedy.error;
  EXPECT_EQ(greedy.ids, expected_greedy(prompt_of(9), 12));
  for (int i = 0; i < 4; ++i) {
    sampled[i].wait();
    EXPECT_EQ(sampled[i].finish, FinishReason::length) << i << ": " << sampled[i].error;
    for (int32_t id : sampled[i].ids) EXPECT_LT(id, testing::kFakeVocab) << "request " << i;
    EXPECT_GE(sampled[i].max_top_id, 0);
    EXPECT_LT(sampled[i].max_top_id, testing::kFakeVocab) << "request " << i;
  }
  EXPECT_EQ(h.engine->model_info().n_vocab, testing::kFakeVocab + 8);
}

// A per-row failure on the engine thread (here the detokenizer throwing for one id) fails that
// request with an error event; the engine thread lives on and serves the others.
TEST(Engine, OneRequestsFailureDoesNotStopTheEngine) {
  const std::vector<int32_t> expect = expected_greedy(prompt_of(11), 8);
  const int32_t poison = expect[3];
  Harness h = start({}, 256, -1, 0, poison);
  // Other prompts whose first tokens avoid the poisoned id.
  std::vector<int32_t> clean;
  for (int32_t salt = 1; clean.empty(); ++salt) {
    const auto e = expected_greedy(prompt_of(11, salt), 6);
    if (std::find(e.begin(), e.end(), poison) == e.end()) clean = prompt_of(11, salt);
  }
  Collected bad, good, after;
  h.engine->submit(greedy_request(prompt_of(11), 8, bad));
  h.engine->submit(greedy_request(clean, 6, good));
  bad.wait();
  good.wait();
  EXPECT_EQ(bad.finish, FinishReason::error);
  EXPECT_EQ(bad.finals, 1);
  EXPECT_NE(bad.error.find("outside the vocabulary"), std::string::npos) << bad.error;
  EXPECT_EQ(bad.ids, std::vector<int32_t>(expect.begin(), expect.begin() + 3));
  EXPECT_EQ(good.finish, FinishReason::length);
  EXPECT_EQ(good.ids, expected_greedy(clean, 6));
  h.engine->submit(greedy_request(clean, 6, after));
  after.wait();
  EXPECT_EQ(after.ids, good.ids);
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

// A backend whose device became unusable (what the CUDA backend reports after a sticky error):
// only fatal_error() matters to the engine; the ops are never called with a fake model.
class UnusableDeviceOps final : public Ops {
 public:
  std::string fatal_error() const override { return reason; }
  std::string name() const override { return "fake device"; }
  bool host_memory() const override { return true; }
  DType kv_dtype_default() const override { return DType::f32; }
  void kv_dtype_check(DType) const override {}
  Buffer alloc(size_t) override { return unused<Buffer>(); }
  void upload(void*, const void*, size_t) override { unused<void>(); }
  void download(void*, const void*, size_t) override { unused<void>(); }
  void copy(void*, const void*, size_t) override { unused<void>(); }
  TensorView weight_upload(const TensorView&, WeightUse) override { return unused<TensorView>(); }
  void step_begin(const StepLayout&) override { unused<void>(); }
  void matmul(const TensorView&, const float*, int64_t, float*) override { unused<void>(); }
  void embed(const TensorView&, float, float*) override { unused<void>(); }
  void rms_norm(const float*, const float*, int64_t, int64_t, float, float*) override {
    unused<void>();
  }
  void rope(float*, int, int, const RopeParams&) override { unused<void>(); }
  void kv_store(const KvLayerView&, const float*, const float*) override { unused<void>(); }
  void attention(const KvLayerView&, const float*, const AttentionParams&, float*) override {
    unused<void>();
  }
  void gather_logit_rows(const float*, int64_t, float*) override { unused<void>(); }
  void argmax_rows(const float*, int64_t, int64_t, int64_t, int32_t*) override { unused<void>(); }
  void add(float*, const float*, int64_t) override { unused<void>(); }
  void add_row(float*, const float*, int64_t, int64_t) override { unused<void>(); }
  void scale(float*, float, int64_t) override { unused<void>(); }
  void softcap(float*, float, int64_t) override { unused<void>(); }
  void silu_mul(const float*, const float*, int64_t, int64_t, float*) override { unused<void>(); }
  void gelu_tanh_mul(const float*, const float*, int64_t, int64_t, float*) override {
    unused<void>();
  }

  std::string reason;

 private:
  template <typename T>
  static T unused() {
    fail(ErrorCode::internal, "UnusableDeviceOps: ops are not called with the fake model");
  }
};

// A step failing on a device with a sticky error fails every request in flight with the reason,
// later submissions are refused, and stats carry the reason (the server's /readyz turns 503).
// A step failing on a healthy device fails only that step's requests (the engine serves on).
TEST(Engine, UnusableDeviceStopsTheEngine) {
  EngineParts parts;
  auto model = std::make_unique<FakeModel>();
  FakeModel* fake = model.get();
  auto ops = std::make_shared<UnusableDeviceOps>();
  parts.ops = ops;
  parts.model = std::move(model);
  parts.tokenizer = std::make_unique<FakeTokenizer>();
  parts.eos_ids = {testing::kFakeEos};
  auto engine = engine_start(std::move(parts), {});

  fake->fail_forward = true;  // a transient failure first: the device is still usable
  Collected transient, healthy;
  engine->submit(greedy_request(prompt_of(9), 4, transient));
  transient.wait();
  EXPECT_EQ(transient.finish, FinishReason::error);
  fake->fail_forward = false;
  engine->submit(greedy_request(prompt_of(9), 4, healthy));
  healthy.wait();
  EXPECT_EQ(healthy.finish, FinishReason::length);
  EXPECT_TRUE(engine->stats().fatal_error.empty());

  ops->reason = "matmul: unspecified launch failure (cudaErrorLaunchFailure)";
  fake->fail_forward = true;
  fake->delay_ms = 20;  // both requests are in flight when the step fails
  Collected a, b;
  engine->submit(greedy_request(prompt_of(9), 4, a));
  engine->submit(greedy_request(prompt_of(10, 3), 4, b));
  a.wait();
  b.wait();
  for (const Collected* c : {&a, &b}) {
    EXPECT_EQ(c->finish, FinishReason::error);
    EXPECT_EQ(c->finals, 1);
  }
  EXPECT_EQ(engine->stats().fatal_error, ops->reason);
  Collected refused;
  try {
    engine->submit(greedy_request(prompt_of(9), 4, refused));
    ADD_FAILURE() << "a stopped engine accepted a request";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorLaunchFailure"), std::string::npos) << e.what();
  }
}

// 1/temperature overflows to infinity below ~3e-39; such a temperature is greedy.
TEST(Engine, TinyTemperatureIsGreedy) {
  Harness h = start();
  Collected c;
  Request r = greedy_request(prompt_of(13), 10, c);
  r.sampling.temperature = 1e-40f;
  r.sampling.seed = 3;
  h.engine->submit(std::move(r));
  c.wait();
  EXPECT_EQ(c.ids, expected_greedy(prompt_of(13), 10));
}

// Two cancels of one request handled in the same engine iteration (the server cancels on a failed
// write and again when its Generation goes away): one final event, cached tokens counted once.
TEST(Engine, RepeatedCancelGivesOneFinalEvent) {
  Harness h = start();
  Collected warm;
  h.engine->submit(greedy_request(prompt_of(40), 2, warm));
  warm.wait();
  ASSERT_EQ(h.engine->stats().cached_tokens_total, 0u);
  h.model->delay_ms = 40;
  Collected c;
  const RequestId id = h.engine->submit(greedy_request(prompt_of(40), 200, c));
  {
    std::unique_lock lock(c.mu);  // the first token: the request is running
    ASSERT_TRUE(c.cv.wait_for(lock, std::chrono::seconds(20), [&] { return c.events > 0; }));
  }
  // The engine thread is inside a 40 ms step: all three cancels land in one inbox swap.
  h.engine->cancel(id);
  h.engine->cancel(id);
  h.engine->cancel(id);
  c.wait();
  h.model->delay_ms = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // any late duplicate arrives
  std::lock_guard lock(c.mu);
  EXPECT_EQ(c.finish, FinishReason::cancelled);
  EXPECT_EQ(c.finals, 1);
  EXPECT_EQ(c.usage.cached_tokens, 32);
  EXPECT_EQ(h.engine->stats().cached_tokens_total, 32u);
}

TEST(Engine, RefusesContextBeyondTheModel) {
  EngineOptions o;
  o.context_length = 1000;
  EXPECT_THROW(start(o, 256), Error);
}

// ---- embedding requests (prefill-only, pooled final-norm rows)

struct EmbedResult {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<float> embedding;
  FinishReason finish = FinishReason::none;
  std::string error;
  int finals = 0;
  Usage usage;
};

Request embed_request(std::vector<int32_t> input, Pooling pooling, EmbedResult& r,
                      bool normalize = false) {
  Request q;
  q.kind = RequestKind::embed;
  q.prompt = std::move(input);
  q.pooling = pooling;
  q.normalize = normalize;
  q.sink = [&r](const StreamEvent& e) {
    std::lock_guard lock(r.mu);
    EXPECT_TRUE(e.tokens.empty()) << "an embedding request generated a token";
    if (e.finish == FinishReason::none) return;
    r.embedding = e.embedding;
    r.finish = e.finish;
    r.error = e.error;
    r.usage = e.usage;
    ++r.finals;
    r.cv.notify_all();
  };
  return q;
}

void wait_embed(EmbedResult& r) {
  std::unique_lock lock(r.mu);
  ASSERT_TRUE(r.cv.wait_for(lock, std::chrono::seconds(20),
                            [&] { return r.finish != FinishReason::none; }));
}

// The pooled fake hidden rows, computed without the engine (not normalized).
std::vector<float> expected_pool(const std::vector<int32_t>& input, Pooling pooling) {
  std::vector<double> sum(testing::kFakeEmbd, 0.0);
  const size_t first = pooling == Pooling::last ? input.size() - 1 : 0;
  const size_t end = pooling == Pooling::cls ? 1 : input.size();
  for (size_t p = first; p < end; ++p) {
    const auto h = testing::fake_hidden(std::span<const int32_t>(input.data(), p + 1));
    for (size_t c = 0; c < sum.size(); ++c) sum[c] += h[c];
  }
  std::vector<float> out;
  for (double v : sum) out.push_back(static_cast<float>(v / static_cast<double>(end - first)));
  return out;
}

TEST(Engine, EmbeddingsPoolEveryChunkAndKeepNoKv) {
  EngineOptions o;
  o.max_batch_tokens = 5;  // inputs of up to 23 tokens take several chunks
  o.kv_block_size = 4;
  o.kv_blocks = 16;  // 64 slots: the inputs and the generation below cannot all fit at once
  Harness h = start(o, 64);
  const std::vector<std::vector<int32_t>> inputs = {prompt_of(23, 1), prompt_of(1, 2),
                                                    prompt_of(9, 3), prompt_of(17, 4)};
  const std::vector<int32_t> chat = prompt_of(12, 5);
  for (Pooling pooling : {Pooling::last, Pooling::mean, Pooling::cls}) {
    SCOPED_TRACE(pooling_name(pooling));
    std::vector<EmbedResult> results(inputs.size());
    Collected gen;
    h.engine->submit(greedy_request(chat, 10, gen));  // generation interleaved with embeddings
    for (size_t i = 0; i < inputs.size(); ++i)
      h.engine->submit(embed_request(inputs[i], pooling, results[i]));
    for (size_t i = 0; i < inputs.size(); ++i) {
      wait_embed(results[i]);
      EXPECT_EQ(results[i].finish, FinishReason::stop) << results[i].error;
      EXPECT_EQ(results[i].finals, 1);
      EXPECT_EQ(results[i].embedding, expected_pool(inputs[i], pooling)) << "input " << i;
      EXPECT_EQ(results[i].usage.prompt_tokens, static_cast<int32_t>(inputs[i].size()));
      EXPECT_EQ(results[i].usage.completion_tokens, 0);
    }
    gen.wait();
    EXPECT_EQ(gen.ids, expected_greedy(chat, 10)) << "embeddings changed a generation";
  }
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  // Embedded inputs never enter the prefix cache: the same tokens generate from cold.
  Collected again;
  h.engine->submit(greedy_request(inputs[0], 2, again));
  again.wait();
  EXPECT_EQ(again.usage.cached_tokens, 0);
}

TEST(Engine, EmbeddingsAreNormalizedAndRefuseWhatCannotFit) {
  Harness h = start({}, 64);
  EmbedResult r;
  h.engine->submit(embed_request(prompt_of(10), Pooling::mean, r, /*normalize=*/true));
  wait_embed(r);
  std::vector<float> want = expected_pool(prompt_of(10), Pooling::mean);
  double n2 = 0.0;
  for (float v : want) n2 += double(v) * v;
  ASSERT_EQ(r.embedding.size(), want.size());
  for (size_t c = 0; c < want.size(); ++c)
    EXPECT_NEAR(r.embedding[c], want[c] / std::sqrt(n2), 1e-6);
  EmbedResult unused;
  EXPECT_THROW(h.engine->submit(embed_request(prompt_of(65), Pooling::last, unused)), Error);
  EXPECT_THROW(h.engine->submit(embed_request({}, Pooling::last, unused)), Error);
  EXPECT_THROW(h.engine->submit(embed_request({testing::kFakeVocab}, Pooling::last, unused)),
               Error);
}

TEST(Engine, CancelledEmbeddingFreesItsBlocks) {
  EngineOptions o;
  o.max_batch_tokens = 2;
  Harness h = start(o, 256);
  h.model->delay_ms = 5;
  EmbedResult r;
  const RequestId id = h.engine->submit(embed_request(prompt_of(200), Pooling::mean, r));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  h.engine->cancel(id);
  wait_embed(r);
  EXPECT_EQ(r.finish, FinishReason::cancelled);
  EXPECT_TRUE(r.embedding.empty());
  wait_idle(*h.engine);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace memra
