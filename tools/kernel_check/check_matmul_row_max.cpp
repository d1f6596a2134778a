// rms_norm_row_max + matmul_shared_x_row_max (a prefill step's norm handing the products its rows'
// largest |y|, kernels/row_max.h) == the norm kernel then matmul_shared_x finding them itself: x,
// y and every output bit for bit (and act_mul_row_max likewise), for add_rms_norm and rms_norm, at
// prompt-step token counts whose tiled outputs take x's wgmma form by token groups on sm_90a
// (elsewhere the products prepare x themselves and the maxima are not read; the comparison holds
// either way).
#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/row_max.h"

namespace memra::kernel_check {
namespace {

// Row 0's largest |x| in a matmul scratch made 2^17 times smaller, so that its f16 form overflows
// (a power of two within f16's range would not show: the row's scale is undone exactly, whichever
// power it is).
void shrink_row0_max(Context& ctx, void* scratch, int64_t rows, int64_t dim) {
  float* m0 = kernels::matmul_detail::scratch_row_max(scratch, rows, dim);
  float v = 0.0f;
  cuda::check(cudaMemcpyAsync(&v, m0, sizeof v, cudaMemcpyDeviceToHost, ctx.stream()), "read");
  ctx.sync();
  v = std::ldexp(v, -17);
  cuda::check(cudaMemcpyAsync(m0, &v, sizeof v, cudaMemcpyHostToDevice, ctx.stream()), "write");
  ctx.sync();
}

// Dim 1024 and 4096 take the norm's register form of 4 chunks a thread, 5120 of 8, 12288 its loop
// form (kernels/elementwise/norm_row.cuh).
void check_row_max_case(Context& ctx, int64_t dim, int64_t rows, bool residual,
                        const std::vector<Dev<uint8_t>>& ws, const Dev<float>& dw) {
  constexpr int kOuts = 3;
  const DType types[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
  const int64_t outs_n[kOuts] = {160, 48, 64};
  const std::vector<float> x = ctx.uniform(rows * dim), d = ctx.uniform(rows * dim);
  Dev<float> x1(ctx, x), x2(ctx, x), dd(ctx, d), y1(rows * dim), y2(rows * dim);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, dim)),
      s2(kernels::matmul_scratch_bytes(rows, dim));
  std::vector<Dev<float>> o1, o2;
  std::vector<kernels::MatmulOut> m1, m2;
  for (int i = 0; i < kOuts; ++i) {
    o1.emplace_back(rows * outs_n[i]);
    o2.emplace_back(rows * outs_n[i]);
    o1.back().poison(ctx);
    o2.back().poison(ctx);
    m1.push_back(
        {types[i], ws[i].get(), outs_n[i], o1[i].get(), outs_n[i], kernels::WeightLayout::tiled});
    m2.push_back(
        {types[i], ws[i].get(), outs_n[i], o2[i].get(), outs_n[i], kernels::WeightLayout::tiled});
  }
  // Teeth: row 0's largest |y| shrunk where the products read it (shrink_row0_max); where they
  // do not (no wgmma form on this device), a wrong eps in the norm.
  const bool read = kernels::row_max_pays(rows);
  const float eps = 1e-6f, row_max_eps = ctx.teeth() && !read ? 1e-3f : eps;
  if (residual)
    kernels::add_rms_norm(x1.get(), dd.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
  else
    kernels::rms_norm(x1.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
  kernels::matmul_shared_x(m1.data(), kOuts, dim, y1.get(), rows, s1.get(), ctx.stream());
  kernels::rms_norm_row_max(x2.get(), residual ? dd.get() : nullptr, dw.get(), rows, dim,
                            row_max_eps, y2.get(), s2.get(), ctx.stream());
  if (ctx.teeth() && read) shrink_row0_max(ctx, s2.get(), rows, dim);
  kernels::matmul_shared_x_row_max(m2.data(), kOuts, dim, y2.get(), rows, s2.get(), ctx.stream());
  ctx.sync();
  double bad = bit_mismatches(y2.download(ctx), y1.download(ctx)) +
               bit_mismatches(x2.download(ctx), x1.download(ctx));
  for (int i = 0; i < kOuts; ++i) bad += bit_mismatches(o2[i].download(ctx), o1[i].download(ctx));
  ctx.add({"matmul norm row-max x",
           std::string(residual ? "add_rms_norm " : "rms_norm ") + shape_str({rows, dim}) +
               " Q4_K+Q6_K+BF16 tiled",
           "mixed", "bits", bad, 0.0,
           !ctx.teeth() ? ""
           : read       ? "row 0's largest |y| 2^-17 of itself in the scratch"
                        : "eps 1e-3 in the norm"});
}

// act_mul_row_max + matmul_shared_x_row_max == act_mul then matmul_shared_x (the down
// projection's input): out and every output bit for bit. Teeth as above.
void check_act_row_max_case(Context& ctx, kernels::Act act, int64_t n_cols, int64_t rows,
                            const std::vector<Dev<uint8_t>>& ws) {
  constexpr int kOuts = 3;
  const DType types[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
  const int64_t outs_n[kOuts] = {160, 48, 64};
  const Dev<float> gate(ctx, ctx.uniform(rows * n_cols, -4.0f, 4.0f));
  const Dev<float> up(ctx, ctx.uniform(rows * n_cols));
  Dev<float> a1(rows * n_cols), a2(rows * n_cols);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, n_cols)),
      s2(kernels::matmul_scratch_bytes(rows, n_cols));
  std::vector<Dev<float>> o1, o2;
  std::vector<kernels::MatmulOut> m1, m2;
  for (int i = 0; i < kOuts; ++i) {
    o1.emplace_back(rows * outs_n[i]);
    o2.emplace_back(rows * outs_n[i]);
    o1.back().poison(ctx);
    o2.back().poison(ctx);
    m1.push_back(
        {types[i], ws[i].get(), outs_n[i], o1[i].get(), outs_n[i], kernels::WeightLayout::tiled});
    m2.push_back(
        {types[i], ws[i].get(), outs_n[i], o2[i].get(), outs_n[i], kernels::WeightLayout::tiled});
  }
  const bool read = kernels::row_max_pays(rows);
  // Teeth where the maxima are not read: the other activation.
  const kernels::Act act2 =
      ctx.teeth() && !read
          ? (act == kernels::Act::silu ? kernels::Act::gelu_tanh : kernels::Act::silu)
          : act;
  kernels::act_mul(act, gate.get(), up.get(), rows, n_cols, n_cols, a1.get(), ctx.stream());
  kernels::matmul_shared_x(m1.data(), kOuts, n_cols, a1.get(), rows, s1.get(), ctx.stream());
  if (!kernels::act_mul_row_max(act2, gate.get(), up.get(), rows, n_cols, a2.get(), s2.get(),
                                ctx.stream()))
    fail(ErrorCode::internal, "act_mul_row_max refused aligned rows of {}", n_cols);
  if (ctx.teeth() && read) shrink_row0_max(ctx, s2.get(), rows, n_cols);
  kernels::matmul_shared_x_row_max(m2.data(), kOuts, n_cols, a2.get(), rows, s2.get(),
                                   ctx.stream());
  ctx.sync();
  double bad = bit_mismatches(a2.download(ctx), a1.download(ctx));
  for (int i = 0; i < kOuts; ++i) bad += bit_mismatches(o2[i].download(ctx), o1[i].download(ctx));
  ctx.add({"matmul act row-max x",
           std::string(act == kernels::Act::silu ? "silu " : "gelu_tanh ") +
               shape_str({rows, n_cols}) + " Q4_K+Q6_K+BF16 tiled",
           "mixed", "bits", bad, 0.0,
           !ctx.teeth() ? ""
           : read       ? "row 0's largest |out| 2^-17 of itself in the scratch"
                        : "the other activation"});
}

}  // namespace

void check_matmul_row_max(Context& ctx) {
  constexpr int kOuts = 3;
  const DType types[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
  const int64_t outs_n[kOuts] = {160, 48, 64};
  for (int64_t dim : {1024, 4096, 5120, 12288}) {
    std::vector<Dev<uint8_t>> ws;
    for (int i = 0; i < kOuts; ++i) {
      Dev<uint8_t> ggml(ctx, random_weights(ctx, types[i], dim, outs_n[i]));
      ws.emplace_back(kernels::matmul_tiled_bytes(types[i], dim, outs_n[i]));
      kernels::matmul_tile(types[i], ggml.get(), dim, outs_n[i], ws.back().get(), ctx.stream());
      ctx.sync();
    }
    const Dev<float> dw(ctx, ctx.uniform(dim, 0.5f, 1.5f));
    for (int64_t rows : {int64_t{65}, int64_t{130}, int64_t{300}}) {
      if (dim >= 12288 && rows > 130) continue;  // the loop form's rows are alike past that
      for (bool residual : {true, false}) check_row_max_case(ctx, dim, rows, residual, ws, dw);
    }
    // The activation: one float4 round a thread (1,024 wide), three (12,288), a partial round.
    if (dim != 5120) {
      for (int64_t rows : {int64_t{65}, int64_t{300}})
        for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh})
          check_act_row_max_case(ctx, act, dim, rows, ws);
    } else {
      check_act_row_max_case(ctx, kernels::Act::silu, dim, 130, ws);
    }
  }
}

}  // namespace memra::kernel_check
