// sample_rows (the device sampling chain) against backend/cpu/sample_chain.h, the CPU sampler's
// own chain: random rows of many shapes (coarse values with many exact ties, -inf entries, rows
// fully masked, NaN and +inf logits, flat rows whose top-p nucleus outgrows the device's ranked
// head; most rows peaked, a few dozen tokens far above the rest) under random parameters (greedy or
// temperatures 0.3 to 1.5, top-k 1 to past n, top-p, min-p, repetition / presence / frequency
// penalties, duplicate logit biases, grammar bitmasks, uniforms, 0 to 20 logprobs). Exact: the
// metric counts rows whose token, status, raw max, raw exp-sum, top entries or top-p cut differ in
// any bit, plus rows deferred to the host without a reason (the host chain's error, a NaN, logprobs
// of a row with no finite maximum, a top-p cut past kSampleHead ranks).
// --teeth hands the device 1 - u instead of each row's uniform u.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/sample_chain.h"
#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

using sampling::RowParams;
using sampling::RowResult;

struct Rows {
  int64_t n_rows = 0, n_cols = 0;
  std::vector<float> logits;
  std::vector<RowParams> params;
  std::vector<sampling::Penalty> pen;
  std::vector<sampling::Bias> bias;
  std::vector<uint64_t> mask;
};

void random_params(Context& ctx, Rows& rows, int64_t r) {
  const auto n = static_cast<int32_t>(rows.n_cols);
  RowParams p;
  p.greedy = ctx.randint(0, 4) == 0;
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
  p.inv_t = 1.0f / temps[ctx.randint(0, 3)];
  const int32_t ks[] = {0, 0, 1, 5, 40, 1500, n - 1, n + 3};
  p.top_k = std::max(0, ks[ctx.randint(0, 7)]);
  const float tps[] = {1.0f, 1.0f, 0.9f, 0.5f, 0.95f};
  p.top_p = tps[ctx.randint(0, 4)];
  if (ctx.randint(0, 2) == 0) p.min_p_log = std::log(double(ctx.randint(0, 1) ? 0.05f : 0.2f));
  p.uniform = static_cast<double>(ctx.rng()() >> 11) * 0x1.0p-53;
  p.top_logprobs = ctx.randint(-1, 20);
  p.penalty_begin = static_cast<int32_t>(rows.pen.size());
  if (ctx.randint(0, 1)) {
    p.repetition = 1.3f;
    p.presence = 0.25f;
    p.frequency = -0.5f;
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(ctx.randint(0, n - 1));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int32_t t : ids) rows.pen.push_back({t, ctx.randint(0, 3), ctx.randint(0, 3)});
  }
  p.penalty_count = static_cast<int32_t>(rows.pen.size()) - p.penalty_begin;
  p.bias_begin = static_cast<int32_t>(rows.bias.size());
  if (ctx.randint(0, 1)) {
    std::vector<sampling::Bias> b;
    for (int i = 0; i < 12; ++i) b.push_back({ctx.randint(0, n - 1), ctx.uniform(1, -5, 5)[0]});
    b.push_back({b[0].token, 0.3f});  // added after the first, in list order
    std::stable_sort(b.begin(), b.end(), [](auto& x, auto& y) { return x.token < y.token; });
    rows.bias.insert(rows.bias.end(), b.begin(), b.end());
  }
  p.bias_count = static_cast<int32_t>(rows.bias.size()) - p.bias_begin;
  const int mask_kind = ctx.randint(0, 5);  // 0: a sparse mask; 1: all masked; else none
  if (mask_kind <= 1) {
    p.mask_begin = static_cast<int64_t>(rows.mask.size());
    p.mask_words = static_cast<int32_t>((n + 63) / 64);
    std::vector<uint64_t> words(static_cast<size_t>(p.mask_words), 0);
    for (int i = 0; mask_kind == 0 && i < std::max(1, n / 4); ++i) {
      const int32_t t = ctx.randint(0, n - 1);
      words[t / 64] |= uint64_t{1} << (t % 64);
    }
    rows.mask.insert(rows.mask.end(), words.begin(), words.end());
  }
  rows.params.push_back(p);
  float* row = rows.logits.data() + r * rows.n_cols;
  const int kind = ctx.randint(0, 9);
  if (kind == 0) {
    for (int i = 0; i < n / 4; ++i) row[ctx.randint(0, n - 1)] = -INFINITY;
  } else if (kind == 1) {
    std::fill(row, row + n, -INFINITY);
  } else if (kind == 2) {
    row[ctx.randint(0, n - 1)] = std::numeric_limits<float>::quiet_NaN();
  } else if (kind == 3) {
    row[ctx.randint(0, n - 1)] = INFINITY;
  } else if (kind == 4 && n > 4096) {
    std::fill(row, row + n, 0.5f);  // a nucleus of most of the row
    rows.params.back().top_p = 0.9f;
    rows.params.back().top_k = 0;
  }
}

Rows make_rows(Context& ctx, int64_t n_rows, int64_t n_cols) {
  Rows rows;
  rows.n_rows = n_rows;
  rows.n_cols = n_cols;
  // Rows of a few logits stay within 2 of each other, so most of their draws depend on u (far
  // apart, u and 1 - u pick the same token and the teeth case could miss; it did once).
  const bool narrow = n_cols <= 8;
  rows.logits = ctx.uniform(static_cast<size_t>(n_rows * n_cols), narrow ? -1.0f : -8.0f,
                            narrow ? 1.0f : 8.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = rows.logits.data() + r * n_cols;
    // Most rows peak as a model's do: a few dozen tokens far above the rest, so top-p cuts
    // inside the device's ranked head.
    if (r % 3 != 2 && !narrow)
      for (int i = 0; i < 60; ++i) row[ctx.randint(0, static_cast<int32_t>(n_cols - 1))] += 28.0f;
    if (r % 2 == 0)
      for (int64_t i = 0; i < n_cols; ++i) row[i] = std::round(row[i] * 2.0f) / 2.0f;  // ties
  }
  for (int64_t r = 0; r < n_rows; ++r) random_params(ctx, rows, r);
  // The last row draws for sure: flat logits, temperature 1, no filter, penalty, bias or mask,
  // u = 0.3, so u picks a token in the first half and 1 - u one in the second. Random rows alone
  // can all be peaked, greedy or masked (a 32-row shape once was), and the teeth case then missed.
  RowParams& last = rows.params.back();
  last = RowParams{};
  last.uniform = 0.3;
  last.top_logprobs = 2;
  std::fill_n(rows.logits.data() + (n_rows - 1) * n_cols, n_cols, 0.0f);
  return rows;
}

bool same_bits(const void* a, const void* b, size_t n) {
  return std::memcmp(a, b, n) == 0;
}

// The host chain's result for row r, or why a deferred device row is justified.
double row_mismatch(const Rows& rows, int64_t r, const RowResult& got, SampleScratch& scratch) {
  const RowParams& p = rows.params[r];
  const std::span<const float> raw(rows.logits.data() + r * rows.n_cols,
                                   static_cast<size_t>(rows.n_cols));
  RowResult want;
  sample_chain_run(raw, p, std::span(rows.pen).subspan(p.penalty_begin, p.penalty_count),
                   std::span(rows.bias).subspan(p.bias_begin, p.bias_count),
                   p.mask_begin >= 0 ? rows.mask.data() + p.mask_begin : nullptr, scratch, want);
  if (got.status == sampling::kRowDeferred) {
    const bool nan = std::any_of(raw.begin(), raw.end(), [](float v) { return std::isnan(v); });
    const float top = *std::max_element(raw.begin(), raw.end());
    const bool reason = want.status != sampling::kRowOk ||
                        want.top_p_ranks > kernels::kSampleHead || nan ||
                        (p.top_logprobs >= 0 && !std::isfinite(top));
    return reason ? 0.0 : 1.0;
  }
  if (got.status != want.status || got.id != want.id || got.top_p_ranks != want.top_p_ranks)
    return 1.0;
  if (want.status != sampling::kRowOk || p.top_logprobs < 0) return 0.0;
  if (!same_bits(&got.raw_max, &want.raw_max, 4) || !same_bits(&got.raw_sum, &want.raw_sum, 8) ||
      !same_bits(&got.raw_id, &want.raw_id, 4) || got.n_top != want.n_top)
    return 1.0;
  for (int32_t i = 0; i < want.n_top; ++i)
    if (got.top_id[i] != want.top_id[i] || !same_bits(&got.top_raw[i], &want.top_raw[i], 4))
      return 1.0;
  return 0.0;
}

void check_one(Context& ctx, int64_t n_rows, int64_t n_cols, int64_t ld) {
  Rows rows = make_rows(ctx, n_rows, n_cols);
  std::vector<float> strided(static_cast<size_t>(n_rows * ld), 0.0f);
  for (int64_t r = 0; r < n_rows; ++r)
    std::copy_n(rows.logits.data() + r * n_cols, n_cols, strided.data() + r * ld);
  std::vector<RowParams> dev_params = rows.params;
  if (ctx.teeth())
    for (RowParams& p : dev_params) p.uniform = 1.0 - p.uniform;
  const auto at_least_one = [](auto v) {
    if (v.empty()) v.resize(1);
    return v;
  };
  Dev<float> dx(ctx, strided);
  Dev<RowParams> dp(ctx, dev_params);
  Dev<sampling::Penalty> dpen(ctx, at_least_one(rows.pen));
  Dev<sampling::Bias> dbias(ctx, at_least_one(rows.bias));
  Dev<uint64_t> dmask(ctx, at_least_one(rows.mask));
  Dev<float> scratch(static_cast<size_t>(n_rows * n_cols));
  Dev<RowResult> out(static_cast<size_t>(n_rows));
  out.poison(ctx);
  kernels::sample_rows(dx.get(), n_rows, n_cols, ld, dp.get(), dpen.get(), dbias.get(), dmask.get(),
                       scratch.get(), out.get(), ctx.stream());
  ctx.sync();
  const std::vector<RowResult> got = out.download(ctx);
  SampleScratch host;
  double mismatches = 0;
  for (int64_t r = 0; r < n_rows; ++r) mismatches += row_mismatch(rows, r, got[r], host);
  ctx.add({"sample_rows", shape_str({n_rows, n_cols, ld}), "f32", "bits", mismatches, 0.0,
           ctx.teeth() ? "1 - u drawn instead of u" : ""});
}

}  // namespace

void check_sample_rows(Context& ctx) {
  if (!ctx.wants("sample_rows")) return;
  check_one(ctx, 96, 1000, 1000);
  check_one(ctx, 64, 5000, 5056);
  check_one(ctx, 24, 151936, 151936);
  check_one(ctx, 12, 262144, 262208);
  check_one(ctx, 32, 40, 40);
  check_one(ctx, 64, 2, 2);
}

}  // namespace memra::kernel_check
