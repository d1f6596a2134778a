// act_mul_for_matmul (a decode step's gated activation that also prepares the down projection's
// input) == act_mul then matmul_shared_x preparing y itself: y and every output bit for bit, for
// silu and gelu_tanh, in place (y = gate, as the models call it) and not, at 1, 3 and
// kPreparedRows rows of 256, 4144 (130 groups of 32, the last 16 wide), 4192 (131 groups) and
// 12288 columns (Qwen3-8B's n_ff: two of the kernel's load batches). Each row's largest |y| sits
// in its last float4, so a kernel that missed the row's tail would pick the wrong power of two.
// Teeth, one defect a case that only one half of the comparison can see: in place, y one ulp off
// in one element after the fused kernel (its prepared form still right); not in place, the fused
// kernel reads one element of up 1% off and act_mul then rewrites y correctly (only the prepared
// form is wrong).
#include <cmath>
#include <string>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

struct ActCase {
  int64_t dim;
  DType types[2];
  int64_t n_outs[2];
  kernels::WeightLayout layouts[2];
};

void check_act_case(Context& ctx, const ActCase& c) {
  const int64_t dim = c.dim;
  std::vector<Dev<uint8_t>> ws;
  for (int i = 0; i < 2; ++i) {
    ws.emplace_back(ctx, random_weights(ctx, c.types[i], dim, c.n_outs[i]));
    if (c.layouts[i] == kernels::WeightLayout::tiled) {
      Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(c.types[i], dim, c.n_outs[i]));
      kernels::matmul_tile(c.types[i], ws.back().get(), dim, c.n_outs[i], tiled.get(),
                           ctx.stream());
      ctx.sync();
      ws.back() = std::move(tiled);
    }
  }
  const std::string types =
      std::string(dtype_name(c.types[0])) + "+" + std::string(dtype_name(c.types[1]));
  for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh}) {
    for (int64_t rows : {int64_t{1}, int64_t{3}, kernels::kPreparedRows}) {
      for (bool in_place : {true, false}) {
        std::vector<float> gate = ctx.uniform(rows * dim, -6.0f, 6.0f),
                           up = ctx.uniform(rows * dim);
        for (int64_t r = 0; r < rows; ++r) {  // the row's largest |y|, in its last float4
          gate[r * dim + dim - 1 - r % 4] = 8.0f;
          up[r * dim + dim - 1 - r % 4] = 1.5f;
        }
        // The teeth's element: an activation near the row's largest, so a 1% change moves its f16
        // value and every output (a gate drawn near -6 makes gelu ~1e-8, whose change the sums
        // lost: measured, one seed in the H200's first run missed it).
        gate[1] = 3.0f;
        up[1] = 1.0f;
        std::vector<float> up_bad = up;
        up_bad[1] *= 1.01f;
        Dev<float> g1(ctx, gate), g2(ctx, gate), u(ctx, up), u_bad(ctx, up_bad), y1(rows * dim),
            y2(rows * dim);
        float* out1 = in_place ? g1.get() : y1.get();
        float* out2 = in_place ? g2.get() : y2.get();
        const Dev<float>& r1 = in_place ? g1 : y1;
        Dev<float>& r2 = in_place ? g2 : y2;
        Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, dim)),
            s2(kernels::matmul_scratch_bytes(rows, dim));
        std::vector<Dev<float>> o1, o2;
        std::vector<kernels::MatmulOut> m1, m2;
        for (int i = 0; i < 2; ++i) {
          o1.emplace_back(rows * c.n_outs[i]);
          o2.emplace_back(rows * c.n_outs[i]);
          o1.back().poison(ctx);
          o2.back().poison(ctx);
          m1.push_back(
              {c.types[i], ws[i].get(), c.n_outs[i], o1[i].get(), c.n_outs[i], c.layouts[i]});
          m2.push_back(
              {c.types[i], ws[i].get(), c.n_outs[i], o2[i].get(), c.n_outs[i], c.layouts[i]});
        }
        kernels::act_mul(act, g1.get(), u.get(), rows, dim, dim, out1, ctx.stream());
        kernels::matmul_shared_x(m1.data(), 2, dim, out1, rows, s1.get(), ctx.stream());
        const bool bad_up = ctx.teeth() && !in_place;
        kernels::act_mul_for_matmul(act, g2.get(), bad_up ? u_bad.get() : u.get(), rows, dim, out2,
                                    s2.get(), ctx.stream());
        if (bad_up) kernels::act_mul(act, g2.get(), u.get(), rows, dim, dim, out2, ctx.stream());
        if (ctx.teeth() && in_place) {
          std::vector<float> y = r2.download(ctx);
          y[0] = std::nextafter(y[0], INFINITY);
          r2.upload(ctx, y);
        }
        kernels::matmul_shared_x(m2.data(), 2, dim, out2, rows, s2.get(), ctx.stream(), true);
        ctx.sync();
        double bad = bit_mismatches(r2.download(ctx), r1.download(ctx));
        for (int i = 0; i < 2; ++i) bad += bit_mismatches(o2[i].download(ctx), o1[i].download(ctx));
        const char* broken = !ctx.teeth() ? ""
                             : in_place   ? "y one ulp off in one element"
                                          : "prepared from up 1% off in one element";
        ctx.add({"matmul act-prepared x",
                 std::string(act == kernels::Act::silu ? "silu " : "gelu ") +
                     shape_str({rows, dim}) + (in_place ? " in place " : " ") + types,
                 "f32", "bits", bad, 0.0, broken});
      }
    }
  }
}

}  // namespace

void check_matmul_act(Context& ctx) {
  if (!ctx.wants("matmul act-prepared x")) return;
  using kernels::WeightLayout;
  const WeightLayout tiled = WeightLayout::tiled, ggml = WeightLayout::ggml;
  check_act_case(ctx, {256, {DType::q4_k, DType::q6_k}, {96, 48}, {tiled, ggml}});
  check_act_case(ctx, {4144, {DType::f16, DType::bf16}, {40, 64}, {ggml, ggml}});
  check_act_case(ctx, {4192, {DType::q8_0, DType::bf16}, {48, 32}, {ggml, ggml}});
  check_act_case(ctx, {12288, {DType::q4_k, DType::q6_k}, {64, 32}, {tiled, tiled}});
}

}  // namespace memra::kernel_check
