// Sampler: greedy argmax, each filter's effect on which tokens can be drawn, HF repetition and
// OpenAI presence/frequency penalty arithmetic, logit bias, seeded reproducibility, the empirical
// distribution at temperature 1, 0.5 and 2, tiny temperatures, non-finite logits, and raw-model
// logprobs.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace memra {
namespace {

std::vector<float> ramp(int n) {  // logits 0, 1, ..., n-1: token n-1 is the argmax
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

std::set<int32_t> drawn(const SamplingParams& p, const std::vector<float>& logits, int n = 2000) {
  Sampler s(p, {}, 123);
  std::set<int32_t> out;
  for (int i = 0; i < n; ++i) out.insert(s.sample(logits).id);
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithFirstTieWinning) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, {}, 1);
  EXPECT_EQ(s.sample(ramp(10)).id, 9);
  EXPECT_EQ(s.sample(std::vector<float>{1, 5, 5, 2}).id, 1);
}

TEST(Sampler, TopKRestrictsToTheKBest) {
  SamplingParams p;
  p.top_k = 3;
  EXPECT_EQ(drawn(p, std::vector<float>(10, 0.0f)), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(drawn(p, ramp(10)), (std::set<int32_t>{7, 8, 9}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // probs 0.5, 0.3, 0.2 -> top_p 0.7 keeps {0, 1}; 0.95 keeps all three (0.8 after two).
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p;
  p.top_p = 0.7f;
  EXPECT_EQ(drawn(p, l), (std::set<int32_t>{0, 1}));
  p.top_p = 0.45f;
  EXPECT_EQ(drawn(p, l), (std::set<int32_t>{0}));
  p.top_p = 0.95f;
  EXPECT_EQ(drawn(p, l), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, TopPBeyondTheSortedHead) {
  // 1000 equal logits: top_p 0.5 needs 500 candidates, more than the first partial sort.
  SamplingParams p;
  p.top_p = 0.5f;
  auto s = drawn(p, std::vector<float>(1000, 0.0f), 2000);
  EXPECT_GT(s.size(), 400u);
  EXPECT_LE(*s.rbegin(), 500);  // ties keep the lower ids
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplingParams p;
  p.min_p = 0.4f;  // keeps p >= 0.24
  EXPECT_EQ(drawn(p, l), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, DistributionMatchesSoftmaxAtTemperatureOne) {
  const std::vector<float> l = {std::log(0.7f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  Sampler s(p, {}, 7);
  int counts[3] = {0, 0, 0};
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(l).id];
  EXPECT_NEAR(counts[0] / double(n), 0.7, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.2, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.1, 0.02);
}

// Temperature divides the logits: p_i ∝ exp(l_i / T). Checked at T = 0.5 (sharper) and T = 2
// (flatter) against the exact softmax; multiplying by T instead fails both.
TEST(Sampler, TemperatureScalesLogitsAsSoftmaxOfLogitsOverT) {
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
  for (float t : {0.5f, 2.0f}) {
    double z = 0.0;
    std::vector<double> exact;
    for (float v : l) exact.push_back(std::exp(v / double(t)));
    for (double e : exact) z += e;
    SamplingParams p;
    p.temperature = t;
    Sampler s(p, {}, 11);
    std::vector<int> counts(l.size(), 0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(l).id)];
    for (size_t i = 0; i < l.size(); ++i) {
      const double want = exact[i] / z;
      // 5 standard deviations of a binomial proportion, plus a hair.
      const double tol = 5.0 * std::sqrt(want * (1.0 - want) / n) + 1e-3;
      EXPECT_NEAR(counts[i] / double(n), want, tol) << "T=" << t << " token " << i;
    }
  }
}

// 1/T overflows float below ~3e-39 (1e-40 is a valid, subnormal temperature): the weights turned
// NaN and the draw fell through to the last id. Temperatures below 1e-5 are greedy.
TEST(Sampler, TinyTemperatureIsGreedy) {
  const std::vector<float> l = {5.0f, 1.0f, 4.0f, 0.0f, -3.0f};
  for (float t : {1e-40f, 1e-30f, 1e-6f}) {
    SamplingParams p;
    p.temperature = t;
    Sampler s(p, {}, 9);
    EXPECT_TRUE(s.greedy()) << t;
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(l).id, 0) << "T=" << t;
    p.top_p = 0.9f;  // not the argmax shortcut: through the chain
    p.logit_bias = {{4, 1.0f}};
    Sampler chained(p, {}, 9);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(chained.sample(l).id, 0) << "T=" << t;
  }
  SamplingParams p;
  p.temperature = 1e-5f;  // the threshold itself samples (and is sharp enough to pick the max)
  Sampler s(p, {}, 9);
  EXPECT_FALSE(s.greedy());
  EXPECT_EQ(s.sample(l).id, 0);
}

// A NaN or +inf logit makes the weights non-finite: an error, not a silent pick of the last id.
TEST(Sampler, NonFiniteWeightsAreAnError) {
  SamplingParams p;
  p.temperature = 0.7f;
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    Sampler s(p, {}, 1);
    const std::vector<float> l = {1.0f, bad, 0.5f, 0.0f};
    try {
      s.sample(l);
      FAIL() << "sampled from logits holding " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("finite"), std::string::npos) << e.what();
    }
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  SamplingParams p;
  const auto l = std::vector<float>(50, 0.0f);
  auto run = [&](uint64_t seed) {
    Sampler s(p, {}, seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 32; ++i) out.push_back(s.sample(l).id);
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, RepetitionPenaltyFollowsHf) {
  // Prompt token 2 (logit 3 > 0) is divided, token 0 (logit -1) multiplied.
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {2, 0};
  Sampler s(p, prompt, 1);
  // Logits: token 2 = 3 -> 1.5 loses to token 1 = 2.
  EXPECT_EQ(s.sample(std::vector<float>{-1, 2, 3}).id, 1);
  // Token 0 = -1 -> -2 loses to token 1 = -1.5.
  EXPECT_EQ(s.sample(std::vector<float>{-1, -1.5f, -10}).id, 1);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, std::vector<int32_t>{1}, 1);  // prompt tokens are not penalized
  const std::vector<float> l = {0.0f, 1.0f};
  EXPECT_EQ(s.sample(l).id, 1);
  s.accept(1);  // 1 - 0.5 - 0.25 = 0.25 still wins
  EXPECT_EQ(s.sample(l).id, 1);
  s.accept(1);  // 1 - 1.0 - 0.25 = -0.25 loses to 0
  EXPECT_EQ(s.sample(l).id, 0);
}

TEST(Sampler, LogitBiasCanBanAndForce) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{9, -100.0f}, {3, 7.0f}};
  Sampler s(p, {}, 1);
  EXPECT_EQ(s.sample(ramp(10)).id, 3);  // 3 + 7 = 10 beats 8
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_logprobs = 2;
  p.logit_bias = {{0, 50.0f}};  // changes the choice, not the reported logprobs
  Sampler s(p, {}, 1);
  const std::vector<float> l = {std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  GeneratedToken t = s.sample(l);
  EXPECT_EQ(t.id, 0);
  EXPECT_NEAR(t.logprob, std::log(0.1f), 1e-5);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_NEAR(t.top[0].logprob, std::log(0.6f), 1e-5);
  EXPECT_EQ(t.top[1].id, 2);
}

TEST(Sampler, ValidationNamesTheField) {
  auto message = [](SamplingParams p) {
    try {
      sampling_params_validate(p, 100);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SamplingParams p;
  EXPECT_EQ(message(p), "");
  p.temperature = -1.0f;
  EXPECT_NE(message(p).find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0.0f;
  EXPECT_NE(message(p).find("top_p"), std::string::npos);
  p = {};
  p.min_p = std::nanf("");
  EXPECT_NE(message(p).find("min_p"), std::string::npos);
  p = {};
  p.logit_bias = {{100, 1.0f}};
  EXPECT_NE(message(p).find("logit_bias"), std::string::npos);
  p = {};
  p.top_logprobs = 21;
  EXPECT_NE(message(p).find("top_logprobs"), std::string::npos);
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_NE(message(p).find("repetition_penalty"), std::string::npos);
}

}  // namespace
}  // namespace memra
