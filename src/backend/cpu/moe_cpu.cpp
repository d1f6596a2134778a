#include "backend/cpu/moe_cpu.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace memra::cpu {

void moe_route(const float* logits, int64_t n_tokens, const MoeRouteParams& p, int32_t* ids,
               float* weights) {
  const int n_expert = p.n_expert, k = p.k;
  if (n_expert < 1 || k < 1 || k > n_expert)
    fail(ErrorCode::invalid_argument, "moe_route: {} experts per token of {}", k, n_expert);
  std::vector<double> prob(static_cast<size_t>(n_expert));
  std::vector<int> order(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* l = logits + t * n_expert;
    const double max = *std::max_element(l, l + n_expert);
    double sum = 0;
    for (int e = 0; e < n_expert; ++e) sum += prob[e] = std::exp(double{l[e]} - max);
    // A NaN probability (from NaN activations) ranks last, keeping the comparison a strict weak
    // order; the token's output is NaN either way.
    for (int e = 0; e < n_expert; ++e) prob[e] = std::isnan(prob[e] / sum) ? -1.0 : prob[e] / sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return prob[a] > prob[b] || (prob[a] == prob[b] && a < b);
    });
    double top_sum = 0;
    for (int j = 0; j < k; ++j) top_sum += prob[order[j]];
    std::sort(order.begin(), order.begin() + k);  // the token's experts in increasing index
    for (int j = 0; j < k; ++j) {
      const int e = order[j];
      const double w = p.normalize ? prob[e] / top_sum : prob[e];
      ids[t * k + j] = e;
      weights[t * k + j] = static_cast<float>(p.scale ? w * p.scale[e] : w);
    }
  }
}

void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                 float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * dim;
    for (int j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* yj = y + (t * k + j) * dim;
      if (j == 0) {
        for (int64_t i = 0; i < dim; ++i) o[i] = w * yj[i];
      } else {
        for (int64_t i = 0; i < dim; ++i) o[i] += w * yj[i];
      }
    }
  }
}

void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto s = static_cast<float>(1.0 / (1.0 + std::exp(-double{g[r]})));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] *= s;
  }
}

}  // namespace memra::cpu
