// The sampling chain's canonical arithmetic (core/sampling_math.h, backend/cpu/sample_chain.h),
// which the device kernels reproduce bit for bit: sampling_exp against std::exp, the chunked
// sums, and the whole chain against a plain full-sort re-statement of its definition on random
// rows with many ties, -inf entries, penalties, duplicate biases and masks; the CPU backend's
// sample_rows against the Sampler; the top-k boundary past the 256-token sorted head. Built with
// -ffp-contract=off, as the chain is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "backend/cpu/sample_chain.h"
#include "backend/ops.h"
#include "engine/sampler.h"

namespace memra {
namespace {

using sampling::RowParams;
using sampling::RowResult;

int64_t ulp_distance(double a, double b) {
  int64_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  return std::llabs(ia - ib);
}

TEST(SampleChain, ExpIsWithinTwoUlpOfStdExp) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> wide(-708.0, 0.0), near(-2.0, 0.0);
  for (int i = 0; i < 200000; ++i) {
    const double x = i % 2 ? wide(rng) : near(rng);
    ASSERT_LE(ulp_distance(sampling::sampling_exp(x), std::exp(x)), 2) << x;
  }
  EXPECT_EQ(sampling::sampling_exp(0.0), 1.0);
  EXPECT_EQ(sampling::sampling_exp(-INFINITY), 0.0);
  EXPECT_EQ(sampling::sampling_exp(-708.5), 0.0);  // never subnormal
  EXPECT_GT(sampling::sampling_exp(-708.0), 0.0);
  EXPECT_TRUE(std::isnan(sampling::sampling_exp(NAN)));
}

TEST(SampleChain, RankKeyOrdersByValueThenId) {
  EXPECT_GT(sampling::rank_key(1.0f, 5), sampling::rank_key(0.5f, 0));
  EXPECT_GT(sampling::rank_key(1.0f, 3), sampling::rank_key(1.0f, 4));
  EXPECT_GT(sampling::rank_key(-0.0f, 1), sampling::rank_key(0.0f, 2));  // -0 == +0
  EXPECT_GT(sampling::rank_key(-1.0f, 9), sampling::rank_key(-INFINITY, 0));
}

// The chain's definition with a full sort and no shortcuts (sample_chain.cpp states it with
// partial sorts and nth_element, the kernel with radix selection).
int32_t oracle(const std::vector<float>& raw, const RowParams& p,
               const std::vector<sampling::Penalty>& pen, const std::vector<sampling::Bias>& bias,
               const std::vector<uint64_t>& mask) {
  std::vector<float> v = raw;
  const auto n = static_cast<int32_t>(v.size());
  for (int32_t i = 0; i < n && !mask.empty(); ++i)
    if (i < 64 * static_cast<int32_t>(mask.size()) && !((mask[i / 64] >> (i % 64)) & 1))
      v[i] = -INFINITY;
  for (const auto& e : pen) {
    float& l = v[e.token];
    if (e.seen > 0) l = l > 0.0f ? l / p.repetition : l * p.repetition;
    if (e.generated > 0) l -= static_cast<float>(e.generated) * p.frequency + p.presence;
  }
  for (const auto& e : bias) v[e.token] += e.bias;
  if (p.greedy) return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  for (float& x : v) x *= p.inv_t;
  const double max = *std::max_element(v.begin(), v.end());
  std::vector<int32_t> rank(static_cast<size_t>(n));
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(),
            [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) pos[rank[r]] = r;
  const int32_t k = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  const auto w = [&](int32_t i) { return sampling::sampling_exp(double(v[i]) - max); };
  const auto chunk_sums = [&](const auto& in) {
    std::vector<double> c((v.size() + 255) / 256, 0.0);
    for (int32_t i = 0; i < n; ++i)
      if (in(i)) c[i / 256] += w(i);
    return c;
  };
  double total = 0.0;
  for (double c : chunk_sums([&](int32_t i) { return pos[i] < k; })) total += c;
  int32_t m = k;
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (m = 0; m < k;) {
      cum += w(rank[m++]) / total;
      if (cum >= p.top_p) break;
    }
  }
  const auto keep = [&](int32_t i) { return pos[i] < m && double(v[i]) - max >= p.min_p_log; };
  const std::vector<double> chunk = chunk_sums(keep);
  double mass = 0.0;
  for (double c : chunk) mass += c;
  double r = p.uniform * mass;
  size_t c = 0;
  while (c < chunk.size() && !(r - chunk[c] < 0.0)) r -= chunk[c++];
  const bool walk = c < chunk.size();
  if (!walk) c = chunk.size() - 1;
  while (!walk && chunk[c] <= 0.0) --c;
  int32_t last = -1;
  for (int32_t i = static_cast<int32_t>(c) * 256; i < std::min<int32_t>(n, (c + 1) * 256); ++i) {
    if (!keep(i)) continue;
    if (w(i) > 0.0) last = i;
    if (walk && (r -= w(i)) < 0.0) return i;
  }
  return last;
}

struct RandomRow {
  std::vector<float> raw;
  RowParams p;
  std::vector<sampling::Penalty> pen;
  std::vector<sampling::Bias> bias;
  std::vector<uint64_t> mask;
};

RandomRow random_row(std::mt19937_64& rng, int32_t n) {
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  std::uniform_int_distribution<int32_t> id(0, n - 1);
  RandomRow r;
  r.raw.resize(static_cast<size_t>(n));
  const bool coarse = rng() % 2;  // many exact ties
  for (float& x : r.raw) x = coarse ? std::round(u(rng)) : u(rng);
  if (rng() % 4 == 0)
    for (int i = 0; i < n / 8; ++i) r.raw[id(rng)] = -INFINITY;
  RowParams& p = r.p;
  p.greedy = rng() % 5 == 0;
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
  p.inv_t = 1.0f / temps[rng() % 4];
  const int32_t ks[] = {0, 1, 5, 40, 300, n - 1, n + 5};
  p.top_k = ks[rng() % 7];
  const float tps[] = {1.0f, 0.9f, 0.5f, 0.99f};
  p.top_p = tps[rng() % 4];
  if (rng() % 2) p.min_p_log = std::log(double(rng() % 2 ? 0.05f : 0.2f));
  p.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  p.top_logprobs = static_cast<int32_t>(rng() % 22) - 1;
  if (rng() % 2) {
    p.repetition = 1.3f;
    p.presence = 0.25f;
    p.frequency = 0.5f;
    std::vector<int32_t> ids;
    for (int i = 0; i < 30; ++i) ids.push_back(id(rng));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int32_t t : ids)
      r.pen.push_back({t, static_cast<int32_t>(rng() % 3), static_cast<int32_t>(rng() % 3)});
  }
  if (rng() % 2) {
    for (int i = 0; i < 10; ++i) r.bias.push_back({id(rng), u(rng)});
    r.bias.push_back({r.bias[0].token, 0.3f});  // a duplicate: both added, in order
    std::stable_sort(r.bias.begin(), r.bias.end(),
                     [](const auto& a, const auto& b) { return a.token < b.token; });
  }
  if (rng() % 3 == 0) {
    r.mask.assign(static_cast<size_t>((n + 63) / 64), 0);
    for (int i = 0; i < n / 3; ++i) {
      const int32_t t = id(rng);
      r.mask[t / 64] |= uint64_t{1} << (t % 64);
    }
  }
  p.penalty_count = static_cast<int32_t>(r.pen.size());
  p.bias_count = static_cast<int32_t>(r.bias.size());
  if (!r.mask.empty()) {
    p.mask_begin = 0;
    p.mask_words = static_cast<int32_t>(r.mask.size());
  }
  return r;
}

TEST(SampleChain, MatchesItsFullSortDefinition) {
  std::mt19937_64 rng(11);
  SampleScratch scratch;
  int drawn = 0;
  for (int t = 0; t < 400; ++t) {
    const int32_t n = t % 3 == 0 ? 3000 : 700;
    RandomRow r = random_row(rng, n);
    RowResult out;
    sample_chain_run(r.raw, r.p, r.pen, r.bias, r.mask.empty() ? nullptr : r.mask.data(), scratch,
                     out);
    if (out.status != sampling::kRowOk) continue;  // a fully masked row
    ++drawn;
    ASSERT_EQ(out.id, oracle(r.raw, r.p, r.pen, r.bias, r.mask)) << "case " << t;
  }
  EXPECT_GT(drawn, 300);
}

// A top-k cut beyond the 256-token head that top-p sorts first: only the true top k may come.
TEST(SampleChain, TopPWithinATopKPastTheSortedHead) {
  std::vector<float> raw(5000);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<float>((i * 7919) % 5000) * 1e-4f;
  RowParams p;
  p.top_k = 600;
  p.top_p = 0.999f;
  SampleScratch scratch;
  std::vector<float> sorted = raw;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < 300; ++i) {
    p.uniform = i / 300.0;
    RowResult out;
    sample_chain_run(raw, p, {}, {}, nullptr, scratch, out);
    ASSERT_EQ(out.status, sampling::kRowOk);
    EXPECT_GE(raw[out.id], sorted[599]);
  }
}

// The CPU backend's sample_rows is the Sampler's chain: same tokens and logprobs, bit for bit.
TEST(SampleChain, CpuBackendRowsEqualTheSampler) {
  auto ops = ops_cpu_create({1, false});
  std::mt19937_64 rng(3);
  const int32_t n = 1000;
  std::vector<float> logits;
  std::vector<RowParams> params;
  std::vector<SampleSpec> specs;
  std::vector<Sampler> samplers;
  for (int r = 0; r < 24; ++r) {
    SamplingParams sp;
    sp.temperature = r % 3 == 0 ? 0.0f : 0.8f;
    sp.top_k = r % 4 == 1 ? 50 : 0;
    sp.top_p = r % 5 == 2 ? 0.9f : 1.0f;
    sp.min_p = r % 6 == 3 ? 0.05f : 0.0f;
    sp.top_logprobs = r % 2 ? 5 : -1;
    sp.logit_bias = {{7, 2.0f}, {3, -1.0f}, {7, 0.5f}};
    samplers.emplace_back(sp, std::vector<int32_t>{}, 1000 + r);
    RandomRow row = random_row(rng, n);
    logits.insert(logits.end(), row.raw.begin(), row.raw.end());
  }
  specs.resize(samplers.size());
  std::vector<sampling::Bias> bias;
  for (size_t r = 0; r < samplers.size(); ++r) {
    samplers[r].prepare(nullptr, specs[r]);
    RowParams p = specs[r].params;
    p.bias_begin = static_cast<int32_t>(bias.size());
    bias.insert(bias.end(), specs[r].bias.begin(), specs[r].bias.end());
    params.push_back(p);
  }
  std::vector<RowResult> results(samplers.size());
  ops->sample_rows(logits.data(), static_cast<int64_t>(samplers.size()), n, n,
                   SampleRows{params, {}, bias, {}}, results);
  for (size_t r = 0; r < samplers.size(); ++r) {
    const GeneratedToken got = samplers[r].finish(specs[r], results[r]);
    const GeneratedToken want = samplers[r].run(
        std::span<const float>(logits.data() + r * n, static_cast<size_t>(n)), specs[r]);
    ASSERT_EQ(got.id, want.id) << r;
    ASSERT_EQ(std::memcmp(&got.logprob, &want.logprob, sizeof(float)), 0) << r;
    ASSERT_EQ(got.top.size(), want.top.size());
    for (size_t i = 0; i < got.top.size(); ++i) {
      EXPECT_EQ(got.top[i].id, want.top[i].id);
      EXPECT_EQ(got.top[i].logprob, want.top[i].logprob);
    }
  }
}

}  // namespace
}  // namespace memra
