// Checks of rms_norm, add_rms_norm (with the row-alone-equals-row-in-batch invariance) and rope
// (neox and normal pairs, partial n_rot, positions up to 100000) against double references.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr double kNormTol = 1e-5;
constexpr double kRopeTol = 1e-5;
constexpr float kEps = 1e-6f;

std::vector<double> rms_norm_ref(const std::vector<float>& x, const std::vector<float>& w,
                                 int64_t rows, int64_t dim, float eps) {
  std::vector<double> y(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double{x[r * dim + i]} * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inv * w[i];
  }
  return y;
}

void check_rms_norm(Context& ctx, int64_t rows, int64_t dim) {
  std::vector<float> x = ctx.uniform(rows * dim), w = ctx.uniform(dim, 0.5f, 1.5f);
  Dev<float> dx(ctx, x), dw(ctx, w), dy(rows * dim);
  dy.poison(ctx);
  const float eps = ctx.teeth() ? 1e-3f : kEps;  // teeth: wrong eps
  kernels::rms_norm(dx.get(), dw.get(), rows, dim, eps, dy.get(), ctx.stream());
  ctx.sync();
  ctx.add({"rms_norm", shape_str({rows, dim}), "f32", "rel",
           rel_error(dy.download(ctx), rms_norm_ref(x, w, rows, dim, kEps), 1e-3), kNormTol,
           ctx.teeth() ? "eps 1e-3 instead of 1e-6" : ""});
}

void check_add_rms_norm(Context& ctx, int64_t rows, int64_t dim) {
  std::vector<float> x = ctx.uniform(rows * dim), d = ctx.uniform(rows * dim);
  std::vector<float> w = ctx.uniform(dim, 0.5f, 1.5f);
  Dev<float> dx(ctx, x), dd(ctx, d), dw(ctx, w), dy(rows * dim);
  dy.poison(ctx);
  // teeth: the residual d is added to x after the norm instead of before (d ignored by the norm)
  if (ctx.teeth()) {
    kernels::rms_norm(dx.get(), dw.get(), rows, dim, kEps, dy.get(), ctx.stream());
    kernels::add(dx.get(), dd.get(), rows * dim, ctx.stream());
  } else {
    kernels::add_rms_norm(dx.get(), dd.get(), dw.get(), rows, dim, kEps, dy.get(), ctx.stream());
  }
  ctx.sync();
  std::vector<float> sum(rows * dim);  // float, as the kernel stores x + d
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = x[i] + d[i];
  const double err_y = rel_error(dy.download(ctx), rms_norm_ref(sum, w, rows, dim, kEps), 1e-3);
  const std::vector<double> sum_ref(sum.begin(), sum.end());
  const double err_x = rel_error(dx.download(ctx), sum_ref, 1e-3);
  ctx.add({"add_rms_norm", shape_str({rows, dim}), "f32", "rel", std::max(err_x, err_y), kNormTol,
           ctx.teeth() ? "residual added after the norm" : ""});
}

// Row r normalized alone must equal row r inside a call over many rows, bit for bit.
void check_norm_invariance(Context& ctx, int64_t rows, int64_t dim) {
  std::vector<float> x = ctx.uniform(rows * dim), w = ctx.uniform(dim, 0.5f, 1.5f);
  const int64_t r = rows / 2;
  std::vector<float> batch_x = x;
  // teeth: one input of the batched row 0.1% off (a 1-ulp change can round away in x * inv * w)
  if (ctx.teeth()) batch_x[r * dim] *= 1.001f;
  Dev<float> dx(ctx, batch_x), dw(ctx, w), dy(rows * dim), dy1(dim);
  Dev<float> dx1(ctx, std::vector<float>(x.begin() + r * dim, x.begin() + (r + 1) * dim));
  dy.poison(ctx);
  dy1.poison(ctx);
  kernels::rms_norm(dx.get(), dw.get(), rows, dim, kEps, dy.get(), ctx.stream());
  kernels::rms_norm(dx1.get(), dw.get(), 1, dim, kEps, dy1.get(), ctx.stream());
  ctx.sync();
  const std::vector<float> all = dy.download(ctx);
  const std::vector<float> row(all.begin() + r * dim, all.begin() + (r + 1) * dim);
  ctx.add({"rms_norm invariance", "row alone vs " + shape_str({rows, dim}), "f32", "bits",
           bit_mismatches(row, dy1.download(ctx)), 0.0,
           ctx.teeth() ? "one input 0.1% off in the batch" : ""});
}

// The two forms of a norm row (kernels/elementwise/norm_row.cuh): 16-byte aligned rows up to 8192
// wide take the register form, the same rows one float off that alignment the loop form; x + d
// and y must agree bit for bit (add_rms_norm: both passes and the residual store).
void check_norm_forms(Context& ctx, int64_t rows, int64_t dim) {
  const int64_t n = rows * dim;
  const std::vector<float> x = ctx.uniform(n), d = ctx.uniform(n), w = ctx.uniform(dim, 0.5f, 1.5f);
  const auto padded = [](const std::vector<float>& v) {
    std::vector<float> p(v.size() + 1, 0.0f);
    std::copy(v.begin(), v.end(), p.begin() + 1);
    return p;
  };
  Dev<float> dw(ctx, w), rx(ctx, x), rd(ctx, d), ry(n);
  Dev<float> lx(ctx, padded(x)), ld(ctx, padded(d)), ly(n + 1);
  ry.poison(ctx);
  ly.poison(ctx);
  kernels::add_rms_norm(rx.get(), rd.get(), dw.get(), rows, dim, kEps, ry.get(), ctx.stream());
  // teeth: the loop form's eps 1e-3
  kernels::add_rms_norm(lx.get() + 1, ld.get() + 1, dw.get(), rows, dim, ctx.teeth() ? 1e-3f : kEps,
                        ly.get() + 1, ctx.stream());
  ctx.sync();
  const auto unpad = [](std::vector<float> v) {
    return std::vector<float>(v.begin() + 1, v.end());
  };
  ctx.add({"rms_norm forms", "registers vs loop " + shape_str({rows, dim}), "f32", "bits",
           bit_mismatches(ry.download(ctx), unpad(ly.download(ctx))) +
               bit_mismatches(rx.download(ctx), unpad(lx.download(ctx))),
           0.0, ctx.teeth() ? "eps 1e-3 in the loop form" : ""});
}

// x: [tokens rows of stride ld] of heads x head_dim, rotated in place in double.
void rope_ref(std::vector<double>& x, int64_t tokens, int64_t ld, int heads, int head_dim,
              int n_rot, bool neox, const std::vector<int32_t>& pos,
              const std::vector<double>& inv_freq) {
  const int half = n_rot / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      double* v = x.data() + t * ld + int64_t{h} * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = pos[t] * inv_freq[i];
        // The kernel's cos/sin are the double values rounded to float (as the CPU backend's).
        const double c = static_cast<float>(std::cos(angle));
        const double s = static_cast<float>(std::sin(angle));
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const double a = v[i0], b = v[i1];
        v[i0] = a * c - b * s;
        v[i1] = a * s + b * c;
      }
    }
  }
}

void check_rope(Context& ctx, int64_t tokens, int heads, int head_dim, int n_rot, bool neox,
                int32_t max_pos, int variant) {
  const int64_t ld = int64_t{heads} * head_dim + 8;  // padded rows: the stride is honored
  std::vector<float> x = ctx.uniform(tokens * ld);
  std::vector<int32_t> pos(tokens);
  for (int32_t& p : pos) p = ctx.randint(0, max_pos);
  pos[0] = max_pos;
  std::vector<double> inv_freq(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) inv_freq[i] = std::pow(10000.0, -2.0 * i / n_rot);
  // teeth: even variants swap the pair layout, odd ones rotate to position + 1
  std::vector<int32_t> gpu_pos = pos;
  bool gpu_neox = neox;
  if (ctx.teeth() && variant % 2 == 0) gpu_neox = !neox;
  if (ctx.teeth() && variant % 2 == 1)
    for (int32_t& p : gpu_pos) ++p;
  Dev<float> dx(ctx, x);
  Dev<int32_t> dpos(ctx, gpu_pos);
  Dev<double> dfreq(ctx, inv_freq);
  kernels::rope(dx.get(), tokens, ld, heads, head_dim, n_rot, gpu_neox, dpos.get(), dfreq.get(),
                ctx.stream());
  ctx.sync();
  std::vector<double> ref(x.begin(), x.end());
  rope_ref(ref, tokens, ld, heads, head_dim, n_rot, neox, pos, inv_freq);
  ctx.add({neox ? "rope neox" : "rope normal",
           shape_str({tokens, heads, head_dim}) + " rot " + std::to_string(n_rot) +
               " p<=" + std::to_string(max_pos),
           "f32", "rel", rel_error(dx.download(ctx), ref, 1e-2), kRopeTol,
           !ctx.teeth()       ? ""
           : variant % 2 == 0 ? "pair layout swapped"
                              : "position off by one"});
}

}  // namespace

void check_norm(Context& ctx) {
  if (ctx.wants("rms_norm")) {
    for (int64_t dim : {64, 896, 1000, 4096, 8192}) check_rms_norm(ctx, dim == 1000 ? 1 : 37, dim);
    check_rms_norm(ctx, 301, 2048);
    check_norm_invariance(ctx, 129, 4096);
    check_norm_invariance(ctx, 33, 999);
    // Decode widths of the register form (1 to 8 chunks a thread) and its limit.
    for (int64_t dim : {1024, 2816, 4096, 5376, 8192}) check_norm_forms(ctx, 3, dim);
  }
  if (ctx.wants("add_rms_norm")) {
    for (int64_t dim : {64, 2560, 8191}) check_add_rms_norm(ctx, 13, dim);
  }
}

void check_rope(Context& ctx) {
  if (!ctx.wants("rope")) return;
  int variant = 0;
  for (bool neox : {true, false}) {
    check_rope(ctx, 1, 1, 64, 64, neox, 5, variant++);
    check_rope(ctx, 37, 8, 128, 128, neox, 100000, variant++);
    check_rope(ctx, 9, 3, 256, 64, neox, 4096, variant++);  // partial rotation
    check_rope(ctx, 300, 16, 64, 32, neox, 131071, variant++);
  }
}

}  // namespace memra::kernel_check
