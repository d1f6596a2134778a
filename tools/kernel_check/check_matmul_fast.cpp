// The fast, not batch-invariant matmul of `--deterministic off` (kernels.h "matmul, fast mode",
// backend/cuda/fast_gemm.h): the f16 copy of a tiled matrix against the CPU dequantizer, element
// by element, and the whole path (x prepared, copy, cuBLASLt, the rows' scaling) against the
// double reference. Tolerances: the copy rounds each weight once to f16 (2^-11 relative, plus
// f16's subnormal step under 2^-14), measured against max |w|; the product adds x's f16 rounding
// and cuBLASLt's f32 accumulation: 2e-3 of the largest output (per row for wide-range x), twice
// the canonical kernels' bound. Teeth: the scale exponent flipped in row 0 on the GPU. F16 and
// BF16 copies are checked too, though the backend keeps them on the canonical kernels.
#include <cmath>

#include "backend/cuda/fast_gemm.h"
#include "check.h"
#include "core/half.h"
#include "formats/quant.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr double kCopyTol = 1e-3, kProductTol = 2e-3;

// The tiled form of w in `tiled` (row 0's scales broken under --teeth, as gpu_weights does).
void tiled_copy(Context& ctx, DType dtype, const std::vector<uint8_t>& w, int64_t n_in,
                int64_t n_out, Dev<uint8_t>& tiled) {
  Dev<uint8_t> ggml(ctx, gpu_weights(ctx, dtype, w, n_out));
  kernels::matmul_tile(dtype, ggml.get(), n_in, n_out, tiled.get(), ctx.stream());
  ctx.sync();
}

// The CPU dequantizer's rows of a ggml matrix: [n_out][n_in].
std::vector<float> dequantized(DType dtype, const std::vector<uint8_t>& w, int64_t n_in,
                               int64_t n_out) {
  std::vector<float> rows(n_out * n_in);
  const uint64_t row_bytes = w.size() / n_out;
  for (int64_t o = 0; o < n_out; ++o)
    quant::dequantize_row(dtype, w.data() + o * row_bytes, rows.data() + o * n_in, n_in);
  return rows;
}

void check_copy(Context& ctx, DType dtype, int64_t n_in, int64_t n_out) {
  const std::vector<uint8_t> w = random_weights(ctx, dtype, n_in, n_out);
  Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(dtype, n_in, n_out));
  tiled_copy(ctx, dtype, w, n_in, n_out, tiled);
  Dev<uint16_t> out(n_out * n_in);
  kernels::matmul_dequant_f16(dtype, tiled.get(), n_in, n_out, out.get(), ctx.stream());
  ctx.sync();
  const std::vector<uint16_t> got16 = out.download(ctx);
  const std::vector<float> want = dequantized(dtype, w, n_in, n_out);
  const std::vector<double> ref(want.begin(), want.end());
  std::vector<float> got(got16.size());
  for (size_t i = 0; i < got16.size(); ++i) got[i] = f16_to_f32(got16[i]);
  ctx.add({"matmul fast f16 copy", shape_str({n_out, n_in}), std::string(dtype_name(dtype)),
           "rel-max", rel_max_error(got, ref), kCopyTol,
           ctx.teeth() ? "scale exponent flipped in row 0 on the GPU" : ""});
}

void check_product(Context& ctx, cuda::FastGemm& fast, DType dtype, int64_t n_in, int64_t n_out,
                   int64_t n_tokens, bool wide_range) {
  const std::vector<uint8_t> w = random_weights(ctx, dtype, n_in, n_out);
  Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(dtype, n_in, n_out));
  tiled_copy(ctx, dtype, w, n_in, n_out, tiled);
  const std::vector<float> x =
      wide_range ? wide_range_x(ctx, n_tokens, n_in) : ctx.uniform(n_tokens * n_in);
  const int64_t ldy = n_out + 3;  // the padding columns must stay poisoned
  Dev<float> dx(ctx, x), dy(n_tokens * ldy);
  Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, n_in));
  Dev<uint16_t> w16(n_out * n_in);
  dy.poison(ctx);
  const kernels::MatmulOut out{dtype,    tiled.get(), n_out,
                               dy.get(), ldy,         kernels::WeightLayout::tiled};
  fast.matmul(&out, 1, n_in, dx.get(), n_tokens, scratch.get(), w16.get(), ctx.stream());
  ctx.sync();
  const std::vector<float> y = dy.download(ctx);
  const std::vector<float> rows = dequantized(dtype, w, n_in, n_out);
  std::vector<float> got(n_tokens * n_out);
  std::vector<double> ref(n_tokens * n_out);
  for (int64_t o = 0; o < n_out; ++o) {
    const float* row = rows.data() + o * n_in;
    for (int64_t t = 0; t < n_tokens; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < n_in; ++i) acc += double{row[i]} * x[t * n_in + i];
      ref[t * n_out + o] = acc;
      got[t * n_out + o] = y[t * ldy + o];
    }
  }
  bool padding_written = false;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = n_out; c < ldy; ++c) padding_written |= !std::isnan(y[t * ldy + c]);
  double err = wide_range ? row_rel_max_error(got, ref, n_out) : rel_max_error(got, ref);
  if (padding_written) err = INFINITY;
  std::string shape = shape_str({n_tokens, n_in, n_out}) + " ldy " + std::to_string(ldy);
  if (wide_range) shape += " x rows 2^-20..3e5";
  ctx.add({"matmul fast", shape, std::string(dtype_name(dtype)), wide_range ? "row-rel" : "rel-max",
           err, kProductTol, ctx.teeth() ? "scale exponent flipped in row 0 on the GPU" : ""});
}

}  // namespace

void check_matmul_fast(Context& ctx) {
  if (!ctx.wants("matmul fast")) return;
  cuda::FastGemm fast;
  for (DType dtype : {DType::q4_k, DType::q6_k, DType::q8_0, DType::f16, DType::bf16}) {
    if (!kernels::matmul_dequant_supported(dtype, kernels::WeightLayout::tiled)) continue;
    check_copy(ctx, dtype, 512, 40);  // a partial last row tile
    check_product(ctx, fast, dtype, 1024, 200, 65, false);
    check_product(ctx, fast, dtype, 4096 + 256, 96, 300, false);
    check_product(ctx, fast, dtype, 512, 130, 77, true);
  }
}

}  // namespace memra::kernel_check
