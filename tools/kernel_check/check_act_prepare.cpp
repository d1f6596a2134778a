// act_mul_for_matmul (a decode step's activation that also prepares the down projection's input,
// kernels/matmul/act_prepare.cu) == act_mul then matmul_shared_x preparing the input itself: the
// activation's output and every product bit for bit, for silu and gelu, in place (out == gate, as
// the decoder calls it) against a separate output. Widths: the 0.6B's and 8B's feed-forward
// (3,072 and 12,288: 12 and 48 groups a block), a last group of 16 (1,040) and of 32 at a width
// no multiple of 256 (1,056), and 73,728 (two groups a thread). The products read the prepared
// form's f16 row, its power of two and (Q4_K, Q4_1) its group sums.
#include <string>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

struct ActCase {
  int64_t n_cols;
  std::vector<DType> types;
  std::vector<kernels::WeightLayout> layouts;
};

void check_act_case(Context& ctx, const ActCase& c, kernels::Act act, int64_t rows) {
  const int n_outs = static_cast<int>(c.types.size());
  constexpr int64_t kOut = 48;  // each product's outputs
  std::vector<Dev<uint8_t>> ws;
  for (int i = 0; i < n_outs; ++i) {
    ws.emplace_back(ctx, random_weights(ctx, c.types[i], c.n_cols, kOut));
    if (c.layouts[i] == kernels::WeightLayout::tiled) {
      Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(c.types[i], c.n_cols, kOut));
      kernels::matmul_tile(c.types[i], ws.back().get(), c.n_cols, kOut, tiled.get(), ctx.stream());
      ctx.sync();
      ws.back() = std::move(tiled);
    }
  }
  // Gate values across silu's and gelu's interesting range; up around one.
  const std::vector<float> gate = ctx.uniform(rows * c.n_cols, -6.0f, 6.0f),
                           up = ctx.uniform(rows * c.n_cols, -2.0f, 2.0f);
  Dev<float> g1(ctx, gate), g2(ctx, gate), du(ctx, up), y1(rows * c.n_cols);
  y1.poison(ctx);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, c.n_cols)),
      s2(kernels::matmul_scratch_bytes(rows, c.n_cols));
  std::vector<Dev<float>> o1, o2;
  std::vector<kernels::MatmulOut> m1, m2;
  for (int i = 0; i < n_outs; ++i) {
    o1.emplace_back(rows * kOut);
    o2.emplace_back(rows * kOut);
    o1.back().poison(ctx);
    o2.back().poison(ctx);
    m1.push_back({c.types[i], ws[i].get(), kOut, o1[i].get(), kOut, c.layouts[i]});
    m2.push_back({c.types[i], ws[i].get(), kOut, o2[i].get(), kOut, c.layouts[i]});
  }
  kernels::act_mul(act, g1.get(), du.get(), rows, c.n_cols, c.n_cols, y1.get(), ctx.stream());
  kernels::matmul_shared_x(m1.data(), n_outs, c.n_cols, y1.get(), rows, s1.get(), ctx.stream());
  // --teeth: the fused kernel runs the other activation.
  const kernels::Act fused_act = !ctx.teeth()                ? act
                                 : act == kernels::Act::silu ? kernels::Act::gelu_tanh
                                                             : kernels::Act::silu;
  if (!kernels::act_mul_for_matmul(fused_act, g2.get(), du.get(), rows, c.n_cols, c.n_cols,
                                   g2.get(), s2.get(), ctx.stream()))
    return;  // no sm_90 code here: the backend runs act_mul, which the elementwise family checks
  kernels::matmul_shared_x(m2.data(), n_outs, c.n_cols, g2.get(), rows, s2.get(), ctx.stream(),
                           true);
  ctx.sync();
  double bad = bit_mismatches(g2.download(ctx), y1.download(ctx));
  for (int i = 0; i < n_outs; ++i) bad += bit_mismatches(o2[i].download(ctx), o1[i].download(ctx));
  std::string types;
  for (int i = 0; i < n_outs; ++i) {
    types.append(i ? "+" : " ");
    types.append(dtype_name(c.types[i]));
    if (c.layouts[i] == kernels::WeightLayout::tiled) types.append(" tiled");
  }
  ctx.add({"matmul act-prepared x",
           std::string(act == kernels::Act::silu ? "silu " : "gelu ") +
               shape_str({rows, c.n_cols}) + types,
           "mixed", "bits", bad, 0.0,
           ctx.teeth() ? "the other activation in the fused kernel" : ""});
}

}  // namespace

void check_act_prepare(Context& ctx) {
  if (!ctx.wants("matmul act-prepared x")) return;  // --filter matmul or act-prepared
  using L = kernels::WeightLayout;
  const ActCase cases[] = {
      {3072, {DType::q4_k, DType::q6_k}, {L::tiled, L::ggml}},
      {12288, {DType::q4_k, DType::q6_k}, {L::tiled, L::ggml}},
      {1040, {DType::f16}, {L::ggml}},
      {1056, {DType::q4_1, DType::f16}, {L::ggml, L::ggml}},
      {73728, {DType::q4_k, DType::f16}, {L::tiled, L::ggml}},
  };
  for (const ActCase& c : cases) {
    for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh}) {
      for (int64_t rows : {int64_t{1}, int64_t{5}, kernels::kPreparedRows})
        check_act_case(ctx, c, act, rows);
    }
  }
}

}  // namespace memra::kernel_check
