// The CPU backend's mixture-of-experts ops (ops.h), the oracle the GPU's are checked against:
// moe_route's ranking, ties, renormalization, per-expert scale and NaN rows; matmul_experts
// against a plain matmul of each pair's row over its expert's matrix (both x layouts, a stacked
// gate-and-up half); moe_combine's rounding order; sigmoid_scale_rows; and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "formats/quant.h"

namespace memra {
namespace {

std::unique_ptr<Ops> cpu() {
  return ops_cpu_create(CpuOpsOptions{.n_threads = 2});
}

struct Route {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Route route(Ops& ops, const std::vector<float>& logits, int n_expert, int k, bool normalize,
            const float* scale = nullptr) {
  const auto n = static_cast<int64_t>(logits.size() / n_expert);
  Route r{std::vector<int32_t>(n * k), std::vector<float>(n * k)};
  ops.moe_route(logits.data(), n, {n_expert, k, normalize, scale}, r.ids.data(), r.weights.data());
  return r;
}

TEST(MoeOps, RouteTakesTheLargestInExpertOrderWithTiesToTheLowerExpert) {
  auto ops = cpu();
  // Expert 5 largest, then 1 and 3 tied (1 wins the last place), 0 smallest.
  const std::vector<float> logits = {-3.0f, 1.0f, 0.5f, 1.0f, 0.0f, 2.0f};
  const Route r = route(*ops, logits, 6, 2, /*normalize=*/false);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 5}));  // increasing expert index, not rank
  double sum = 0;
  for (float l : logits) sum += std::exp(double{l} - 2.0);
  EXPECT_FLOAT_EQ(r.weights[0], static_cast<float>(std::exp(-1.0) / sum));
  EXPECT_FLOAT_EQ(r.weights[1], static_cast<float>(1.0 / sum));
  const Route n = route(*ops, logits, 6, 3, /*normalize=*/true);
  EXPECT_EQ(n.ids, (std::vector<int32_t>{1, 3, 5}));
  EXPECT_NEAR(n.weights[0] + n.weights[1] + n.weights[2], 1.0f, 1e-6f);
  EXPECT_EQ(n.weights[0], n.weights[1]);  // tied logits, tied weights
}

TEST(MoeOps, RouteScalesEachExpertsWeightAndSurvivesANanRow) {
  auto ops = cpu();
  const std::vector<float> scale = {1.0f, 2.0f, 0.5f, 4.0f};
  const std::vector<float> logits = {0.0f, 3.0f,
                                     2.0f, -1.0f,                                    // token 0
                                     1.0f, std::numeric_limits<float>::quiet_NaN(),  // token 1
                                     0.0f, 2.0f};
  const Route r = route(*ops, logits, 4, 2, /*normalize=*/true, scale.data());
  ASSERT_EQ(r.ids.size(), 4u);
  EXPECT_EQ(r.ids[0], 1);
  EXPECT_EQ(r.ids[1], 2);
  const double p1 = std::exp(1.0), p2 = 1.0;  // relative to exp(2): renormalized over the two
  EXPECT_FLOAT_EQ(r.weights[0], static_cast<float>(p1 / (p1 + p2) * 2.0));
  EXPECT_FLOAT_EQ(r.weights[1], static_cast<float>(p2 / (p1 + p2) * 0.5));
  // A NaN logit makes every probability NaN, ranked last: the lowest experts, each 1/k.
  EXPECT_EQ(r.ids[2], 0);
  EXPECT_EQ(r.ids[3], 1);
  EXPECT_FLOAT_EQ(r.weights[2], 0.5f * 1.0f);
  EXPECT_FLOAT_EQ(r.weights[3], 0.5f * 2.0f);
}

TEST(MoeOps, RouteRefusesMoreExpertsATokenThanThereAre) {
  auto ops = cpu();
  EXPECT_FALSE(ops->moe_route_supported(4, 5));
  EXPECT_TRUE(ops->moe_route_supported(4, 4));
  EXPECT_THROW(route(*ops, std::vector<float>(4, 0.0f), 4, 5, true), Error);
}

// n_expert stacked Q8_0 matrices of [n_in, rows] and the x rows the pairs read.
struct Stack {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Stack stack(int64_t n_in, int64_t rows, int64_t n_expert, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint64_t row_bytes = dtype_row_bytes(DType::q8_0, n_in, "test");
  Stack s;
  s.bytes.resize(row_bytes * rows * n_expert);
  std::vector<float> row(n_in);
  for (int64_t r = 0; r < rows * n_expert; ++r) {
    for (float& v : row) v = normal(rng);
    quant::quantize_row(DType::q8_0, row.data(), s.bytes.data() + r * row_bytes, n_in);
  }
  s.view = TensorView{std::string("experts"),
                      DType::q8_0,
                      3,
                      {static_cast<uint64_t>(n_in), static_cast<uint64_t>(rows),
                       static_cast<uint64_t>(n_expert), 1},
                      s.bytes.data(),
                      s.bytes.size()};
  return s;
}

TEST(MoeOps, MatmulExpertsIsEachPairsRowThroughItsExpertsMatrix) {
  auto ops = cpu();
  std::mt19937 rng(5);
  constexpr int64_t n_in = 64, ff = 32, n_expert = 5, n_tokens = 7, k = 3;
  const Stack gate_up = stack(n_in, 2 * ff, n_expert, rng);  // gemma4's layout: gate rows first
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_tokens * n_in), xp(n_tokens * k * n_in);
  for (float& v : x) v = normal(rng);
  for (float& v : xp) v = normal(rng);
  std::vector<int32_t> ids(n_tokens * k);
  for (int32_t& e : ids) e = static_cast<int32_t>(rng() % n_expert);  // repeats allowed here
  const int64_t pairs = n_tokens * k;
  for (const bool per_pair : {false, true}) {
    const ExpertMatrix gate{&gate_up.view, 0, ff}, up{&gate_up.view, ff, ff};
    const ExpertMatrix ws[] = {gate, up};
    std::vector<float> yg(pairs * ff), yu(pairs * ff);
    float* const ys[] = {yg.data(), yu.data()};
    const std::vector<float>& in = per_pair ? xp : x;
    ops->matmul_experts(ws, in.data(), per_pair ? 1 : static_cast<int>(k), ids.data(), pairs, ys);
    for (int64_t p = 0; p < pairs; ++p) {
      const float* row = in.data() + (per_pair ? p : p / k) * n_in;
      std::vector<float> want_g(ff), want_u(ff);
      ops->matmul(expert_view(gate, ids[p]), row, 1, want_g.data());
      ops->matmul(expert_view(up, ids[p]), row, 1, want_u.data());
      for (int64_t i = 0; i < ff; ++i) {
        ASSERT_EQ(yg[p * ff + i], want_g[i]) << "pair " << p << " gate row " << i;
        ASSERT_EQ(yu[p * ff + i], want_u[i]) << "pair " << p << " up row " << i;
      }
    }
  }
  ids[4] = n_expert;  // out of range: named, not read past the stack
  const ExpertMatrix all[] = {{&gate_up.view, 0, 2 * ff}};
  std::vector<float> y(pairs * 2 * ff);
  float* const ys[] = {y.data()};
  try {
    ops->matmul_experts(all, x.data(), static_cast<int>(k), ids.data(), pairs, ys);
    ADD_FAILURE() << "an expert id past the stack was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pair 4 routes to expert 5 of 5"), std::string::npos)
        << e.what();
  }
}

TEST(MoeOps, CombineAddsTheWeightedRowsInExpertOrderFromTheFirstProduct) {
  auto ops = cpu();
  // One token, three experts' rows of 2. Column 0 depends on the order: (1e8 + -1e8) + 0.1 is
  // 0.1; any other order loses the 0.1 in 1e8.
  const std::vector<float> y = {1e8f, 1.0f, -1e8f, 3.0f, 0.1f, 0.7f};
  std::vector<float> out(2);
  const std::vector<float> ones = {1.0f, 1.0f, 1.0f};
  ops->moe_combine(y.data(), ones.data(), 1, 3, 2, out.data());
  EXPECT_EQ(out[0], 0.1f);
  EXPECT_EQ(out[1], (1.0f + 3.0f) + 0.7f);
  // Weights that are powers of two keep each product exact, so the expected sums are plain.
  const std::vector<float> w = {0.5f, 0.25f, 2.0f};
  ops->moe_combine(y.data(), w.data(), 1, 3, 2, out.data());
  EXPECT_EQ(out[0], (5e7f + -2.5e7f) + 0.2f);
  EXPECT_EQ(out[1], (0.5f + 0.75f) + 1.4f);
}

TEST(MoeOps, SigmoidScaleRowsScalesEachRowByItsGate) {
  auto ops = cpu();
  std::vector<float> y = {1.0f, 2.0f, -3.0f, 4.0f};
  const std::vector<float> g = {0.0f, -2.0f};
  ops->sigmoid_scale_rows(y.data(), g.data(), 2, 2);
  const auto s1 = static_cast<float>(1.0 / (1.0 + std::exp(2.0)));
  EXPECT_EQ(y, (std::vector<float>{0.5f, 1.0f, -3.0f * s1, 4.0f * s1}));
}

}  // namespace
}  // namespace memra
