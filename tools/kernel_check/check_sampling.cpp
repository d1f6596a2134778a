// argmax_rows (the device greedy token) against std::max_element, the CPU sampler's pick: rows of
// coarsely rounded values (many ties), NaNs sprinkled in, a row led by NaN, an all -inf row, and
// row strides wider than the columns searched. Exact: the metric counts rows whose id differs.
// --teeth searches one column too few while row 0's unique maximum sits in its last column.
#include <algorithm>
#include <cmath>
#include <limits>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

void check_one(Context& ctx, int64_t n_rows, int64_t n_cols, int64_t ld) {
  std::vector<float> x = ctx.uniform(static_cast<size_t>(n_rows * ld), -4.0f, 4.0f);
  for (float& v : x) v = std::round(v * 4.0f) / 4.0f;  // ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x.data() + r * ld;
    for (int i = 0; i < 3; ++i) row[ctx.randint(1, static_cast<int32_t>(n_cols - 1))] = nan;
    if (r % 5 == 1) row[0] = nan;  // max_element keeps a leading NaN: id 0
    if (r % 5 == 2) std::fill(row, row + n_cols, -inf);
    if (r % 5 == 3) row[ctx.randint(0, static_cast<int32_t>(n_cols - 1))] = inf;
  }
  x[n_cols - 1] = 100.0f;  // row 0: a unique maximum in its last searched column
  Dev<float> dx(ctx, x);
  Dev<int32_t> ids(static_cast<size_t>(n_rows));
  ids.poison(ctx);
  kernels::argmax_rows(dx.get(), n_rows, ctx.teeth() ? n_cols - 1 : n_cols, ld, ids.get(),
                       ctx.stream());
  ctx.sync();
  const std::vector<int32_t> got = ids.download(ctx);
  double mismatches = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = x.data() + r * ld;
    mismatches += got[r] != std::max_element(row, row + n_cols) - row;
  }
  ctx.add({"argmax_rows", shape_str({n_rows, n_cols, ld}), "f32", "bits", mismatches, 0.0,
           ctx.teeth() ? "one column too few searched" : ""});
}

}  // namespace

void check_sampling(Context& ctx) {
  if (!ctx.wants("argmax_rows")) return;
  check_one(ctx, 1, 151936, 151936);
  check_one(ctx, 7, 262144, 262208);
  check_one(ctx, 64, 1000, 1024);
  check_one(ctx, 5, 40, 40);
  check_one(ctx, 3, 2, 2);
}

}  // namespace memra::kernel_check
