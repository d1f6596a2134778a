// Checks of the pointwise kernels (add, add_row, scale, softcap, act_mul, gather_rows) against
// double-precision references. --teeth: each runs with a named defect that must turn it red.
#include <algorithm>
#include <cmath>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr double kArithTol = 1e-6;  // one float rounding of a single add/multiply
constexpr double kTransTol = 1e-5;  // float exp/tanh vs double
// gelu's 1 + tanh(...) cancels for g < -3 in float (the CPU backend's formula, kept term for
// term): a few ulps of tanh (2^-24 near -1) become 0.5 |g u| 2^-24 each in the product, however
// small the product is. So each element's bound is kTransTol of its value (floored at 1e-3 of
// the largest) plus 8 such ulps, and the check reports the worst error over its bound (a fixed
// floor alone failed on a seed whose 11 elements were all small: 5.6e-5 against 5e-5).
constexpr double kGeluUlps = 8.0 / (1 << 24);

std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

void check_add(Context& ctx, int64_t n) {
  std::vector<float> y = ctx.uniform(n), x = ctx.uniform(n);
  Dev<float> dy(ctx, y), dx(ctx, x);
  kernels::add(dy.get(), dx.get(), n, ctx.stream());
  if (ctx.teeth()) kernels::add(dy.get(), dx.get(), n, ctx.stream());
  ctx.sync();
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = double{y[i]} + x[i];
  ctx.add({"add", shape_str({n}), "f32", "rel", rel_error(dy.download(ctx), ref, 1e-3), kArithTol,
           ctx.teeth() ? "x added twice" : ""});
}

void check_add_row(Context& ctx, int64_t rows, int64_t dim, int64_t ld) {
  std::vector<float> y = ctx.uniform(rows * ld), b = ctx.uniform(dim + 1);
  Dev<float> dy(ctx, y), db(ctx, b);
  // teeth: the bias read one element late
  kernels::add_row(dy.get(), db.get() + (ctx.teeth() ? 1 : 0), rows, dim, ld, ctx.stream());
  ctx.sync();
  std::vector<double> ref = to_double(y);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < dim; ++c) ref[r * ld + c] += b[c];  // padding columns untouched
  ctx.add({"add_row", shape_str({rows, dim}) + " ld " + std::to_string(ld), "f32", "rel",
           rel_error(dy.download(ctx), ref, 1e-3), kArithTol,
           ctx.teeth() ? "bias shifted by one" : ""});
}

void check_scale(Context& ctx, int64_t n) {
  std::vector<float> y = ctx.uniform(n);
  const float s = 0.37f;
  Dev<float> dy(ctx, y);
  kernels::scale(dy.get(), ctx.teeth() ? s * 1.00002f : s, n, ctx.stream());
  ctx.sync();
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = double{y[i]} * s;
  ctx.add({"scale", shape_str({n}), "f32", "rel", rel_error(dy.download(ctx), ref, 1e-3), kArithTol,
           ctx.teeth() ? "factor off by 2e-5" : ""});
}

void check_softcap(Context& ctx, int64_t n) {
  std::vector<float> y = ctx.uniform(n, -60.0f, 60.0f);
  const float cap = 30.0f;
  Dev<float> dy(ctx, y);
  kernels::softcap(dy.get(), ctx.teeth() ? cap * 1.001f : cap, n, ctx.stream());
  ctx.sync();
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = cap * std::tanh(double{y[i]} / cap);
  ctx.add({"softcap", shape_str({n}), "f32", "rel", rel_error(dy.download(ctx), ref, 1e-3),
           kTransTol, ctx.teeth() ? "cap off by 0.1%" : ""});
}

void check_act_mul(Context& ctx, kernels::Act act, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> gate = ctx.uniform(rows * ld, -6.0f, 6.0f), up = ctx.uniform(rows * ld);
  Dev<float> dg(ctx, gate), du(ctx, up), dout(rows * cols);
  dout.poison(ctx);
  const bool teeth = ctx.teeth();  // gate and up swapped
  kernels::act_mul(act, teeth ? du.get() : dg.get(), teeth ? dg.get() : du.get(), rows, cols, ld,
                   dout.get(), ctx.stream());
  ctx.sync();
  std::vector<double> ref(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double g = gate[r * ld + c], u = up[r * ld + c];
      double a;
      if (act == kernels::Act::silu) {
        a = g / (1.0 + std::exp(-g));
      } else {
        a = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
      }
      ref[r * cols + c] = a * u;
    }
  }
  const std::vector<float> got = dout.download(ctx);
  const std::string shape = shape_str({rows, cols}) + " ld " + std::to_string(ld);
  const std::string broken = teeth ? "gate and up swapped" : "";
  if (act == kernels::Act::silu) {
    ctx.add({"act_mul silu", shape, "f32", "rel", rel_error(got, ref, 1e-3), kTransTol, broken});
    return;
  }
  double max_ref = 0, worst = 0;
  for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double want = ref[r * cols + c], have = got[r * cols + c];
      const double cancel = 0.5 * std::fabs(gate[r * ld + c] * up[r * ld + c]) * kGeluUlps;
      const double bound = kTransTol * std::max(std::fabs(want), 1e-3 * max_ref) + cancel;
      const double e = std::isfinite(have) ? std::fabs(have - want) / bound : INFINITY;
      worst = std::max(worst, e);
    }
  }
  ctx.add({"act_mul gelu_tanh", shape, "f32", "err/bound", worst, 1.0, broken});
}

void check_gather_rows(Context& ctx, int64_t n_src, int64_t dim, int64_t n_rows) {
  std::vector<float> x = ctx.uniform(n_src * dim);
  std::vector<int32_t> rows(n_rows);
  for (int32_t& r : rows) r = ctx.randint(0, static_cast<int32_t>(n_src - 1));
  std::vector<int32_t> gpu_rows = rows;
  if (ctx.teeth()) gpu_rows[0] = (gpu_rows[0] + 1) % static_cast<int32_t>(n_src);
  Dev<float> dx(ctx, x), dout(n_rows * dim);
  Dev<int32_t> drows(ctx, gpu_rows);
  dout.poison(ctx);
  kernels::gather_rows(dx.get(), dim, drows.get(), n_rows, dout.get(), ctx.stream());
  ctx.sync();
  std::vector<float> ref(n_rows * dim);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < dim; ++c) ref[r * dim + c] = x[rows[r] * dim + c];
  ctx.add({"gather_rows", shape_str({n_rows, dim}), "f32", "bits",
           bit_mismatches(dout.download(ctx), ref), 0.0, ctx.teeth() ? "row id off by one" : ""});
}

}  // namespace

void check_elementwise(Context& ctx) {
  if (ctx.wants("add")) {
    for (int64_t n : {1, 7, 4099, 1000003}) check_add(ctx, n);
  }
  if (ctx.wants("add_row")) {
    check_add_row(ctx, 1, 5, 5);
    check_add_row(ctx, 37, 896, 896);
    check_add_row(ctx, 5, 1000, 1536);  // a bias added into part of a wider fused row
  }
  if (ctx.wants("scale")) {
    for (int64_t n : {1, 333, 1 << 20}) check_scale(ctx, n);
  }
  if (ctx.wants("softcap")) {
    for (int64_t n : {3, 151936}) check_softcap(ctx, n);
  }
  if (ctx.wants("act_mul")) {
    for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh}) {
      check_act_mul(ctx, act, 1, 11, 11);
      check_act_mul(ctx, act, 37, 3072, 3072);
      check_act_mul(ctx, act, 3, 1000, 2000);  // halves of a fused [gate | up] row
    }
  }
  if (ctx.wants("gather_rows")) {
    check_gather_rows(ctx, 2, 3, 1);  // two source rows, so an off-by-one id shows
    check_gather_rows(ctx, 300, 4096, 17);
  }
}

}  // namespace memra::kernel_check
