// Gemma's fused norm chains against the plain kernels they replace, run on copies of the same
// inputs, bit for bit (the chains claim the plain kernels' arithmetic; those are checked against
// double references in their own families): post_norm_add_norm == rms_norm(d, w_post) in place,
// add(x, d), scale(x, s) (s != 1), rms_norm(x, w_pre) into y; rms_norm_dual == rms_norm(x, w1)
// into y1, scale(y1, s1), rms_norm(x, w2) into y2. Where the fused kernel also prepares its output
// for a matmul (decode rows), a tiled Q4_K, a Q6_K and a tiled BF16 product over it must equal the
// same products over the plain kernels' output, which prepare it themselves. Widths: Gemma 4
// 26B-A4B's 2816 (16-byte rows, the prepared form) and 2817 (odd: scalar rows).
// --teeth: the prepared rows overwritten after the fused kernel (cases that prepare), the scale
// dropped (scaled cases), or the two norm weights swapped (the rest).
#include <cmath>
#include <vector>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr float kEps = 1e-6f;

// Products over a prepared x: the matrices, in the layouts a decode step's norms feed.
class Products {
 public:
  static constexpr int kOuts = 3;
  Products(Context& ctx, int64_t dim) : dim_(dim) {
    for (int i = 0; i < kOuts; ++i) {
      ws_.emplace_back(ctx, random_weights(ctx, kTypes[i], dim, kRows[i]));
      if (kLayouts[i] != kernels::WeightLayout::tiled) continue;
      Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(kTypes[i], dim, kRows[i]));
      kernels::matmul_tile(kTypes[i], ws_.back().get(), dim, kRows[i], tiled.get(), ctx.stream());
      ctx.sync();
      ws_.back() = std::move(tiled);
    }
  }
  // Output bits that differ between the products over y_plain (prepared by the matmul) and over
  // y_fused (prepared in fused_scratch by the fused kernel).
  double mismatches(Context& ctx, int64_t rows, const float* y_plain, const float* y_fused,
                    void* fused_scratch) const {
    Dev<uint8_t> plain_scratch(kernels::matmul_scratch_bytes(rows, dim_));
    double bad = 0;
    for (int i = 0; i < kOuts; ++i) {
      Dev<float> o1(rows * kRows[i]), o2(rows * kRows[i]);
      o1.poison(ctx);
      o2.poison(ctx);
      const kernels::MatmulOut m1{kTypes[i], ws_[i].get(), kRows[i],
                                  o1.get(),  kRows[i],     kLayouts[i]};
      const kernels::MatmulOut m2{kTypes[i], ws_[i].get(), kRows[i],
                                  o2.get(),  kRows[i],     kLayouts[i]};
      kernels::matmul_shared_x(&m1, 1, dim_, y_plain, rows, plain_scratch.get(), ctx.stream());
      kernels::matmul_shared_x(&m2, 1, dim_, y_fused, rows, fused_scratch, ctx.stream(), true);
      ctx.sync();
      bad += bit_mismatches(o2.download(ctx), o1.download(ctx));
    }
    return bad;
  }

 private:
  static constexpr DType kTypes[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
  static constexpr int64_t kRows[kOuts] = {160, 48, 64};
  static constexpr kernels::WeightLayout kLayouts[kOuts] = {
      kernels::WeightLayout::tiled, kernels::WeightLayout::ggml, kernels::WeightLayout::tiled};
  int64_t dim_;
  std::vector<Dev<uint8_t>> ws_;
};

struct SandwichCase {
  int64_t rows, dim;
  bool scaled, pre, prepared;
};

void check_post_norm_add_norm(Context& ctx, const SandwichCase& c, const Products* products) {
  const int64_t n = c.rows * c.dim;
  const std::vector<float> d = ctx.uniform(n, -4.0f, 4.0f), x = ctx.uniform(n, -8.0f, 8.0f);
  const std::vector<float> w_post = ctx.uniform(c.dim, 0.5f, 1.5f);
  const std::vector<float> w_pre = ctx.uniform(c.dim, 0.5f, 1.5f);
  const float s = c.scaled ? ctx.uniform(1, 0.1f, 2.0f)[0] : 1.0f;
  Dev<float> dwpost(ctx, w_post), dwpre(ctx, w_pre);

  // The plain kernels.
  Dev<float> pd(ctx, d), px(ctx, x), py(n);
  py.poison(ctx);
  kernels::rms_norm(pd.get(), dwpost.get(), c.rows, c.dim, kEps, pd.get(), ctx.stream());
  kernels::add(px.get(), pd.get(), n, ctx.stream());
  if (c.scaled) kernels::scale(px.get(), s, n, ctx.stream());
  if (c.pre) kernels::rms_norm(px.get(), dwpre.get(), c.rows, c.dim, kEps, py.get(), ctx.stream());

  // The fused kernel.
  Dev<float> fd(ctx, d), fx(ctx, x), fy(n);
  fy.poison(ctx);
  Dev<uint8_t> scratch(c.prepared ? kernels::matmul_scratch_bytes(c.rows, c.dim) : 0);
  const bool teeth_prep = ctx.teeth() && c.prepared;
  const bool teeth_scale = ctx.teeth() && !c.prepared && c.scaled;
  const bool teeth_swap = ctx.teeth() && !c.prepared && !c.scaled;
  kernels::post_norm_add_norm(fd.get(), teeth_swap ? dwpre.get() : dwpost.get(), fx.get(),
                              teeth_scale ? 1.0f : s, teeth_swap ? dwpost.get() : dwpre.get(),
                              c.pre ? fy.get() : nullptr, c.rows, c.dim, kEps,
                              c.prepared ? scratch.get() : nullptr, ctx.stream());
  ctx.sync();
  if (teeth_prep) scratch.poison(ctx);  // the products must read what the fused kernel wrote

  double bad = bit_mismatches(fd.download(ctx), pd.download(ctx)) +
               bit_mismatches(fx.download(ctx), px.download(ctx));
  if (c.pre) bad += bit_mismatches(fy.download(ctx), py.download(ctx));
  if (c.prepared) bad += products->mismatches(ctx, c.rows, py.get(), fy.get(), scratch.get());
  ctx.add({"post_norm_add_norm",
           shape_str({c.rows, c.dim}) + (c.scaled ? " scaled" : "") + (c.pre ? " +pre" : "") +
               (c.prepared ? " prepared" : ""),
           "f32", "bits", bad, 0.0,
           teeth_prep    ? "prepared rows overwritten"
           : teeth_scale ? "residual scale dropped"
           : teeth_swap  ? "post and pre weights swapped"
                         : ""});
}

void check_rms_norm_dual(Context& ctx, int64_t rows, int64_t dim, bool prepared,
                         const Products* products) {
  const int64_t n = rows * dim;
  const std::vector<float> x = ctx.uniform(n, -8.0f, 8.0f);
  const std::vector<float> w1 = ctx.uniform(dim, 0.5f, 1.5f), w2 = ctx.uniform(dim, 0.5f, 1.5f);
  const float s1 = 1.0f / std::sqrt(static_cast<float>(dim));  // Gemma 4's router scale
  Dev<float> dx(ctx, x), dw1(ctx, w1), dw2(ctx, w2);

  Dev<float> p1(n), p2(n);
  p1.poison(ctx);
  p2.poison(ctx);
  kernels::rms_norm(dx.get(), dw1.get(), rows, dim, kEps, p1.get(), ctx.stream());
  kernels::scale(p1.get(), s1, n, ctx.stream());
  kernels::rms_norm(dx.get(), dw2.get(), rows, dim, kEps, p2.get(), ctx.stream());

  Dev<float> f1(n), f2(n);
  f1.poison(ctx);
  f2.poison(ctx);
  Dev<uint8_t> scratch(prepared ? kernels::matmul_scratch_bytes(rows, dim) : 0);
  const bool teeth_prep = ctx.teeth() && prepared, teeth_swap = ctx.teeth() && !prepared;
  kernels::rms_norm_dual(dx.get(), teeth_swap ? dw2.get() : dw1.get(), s1, f1.get(),
                         teeth_swap ? dw1.get() : dw2.get(), f2.get(), rows, dim, kEps,
                         prepared ? scratch.get() : nullptr, ctx.stream());
  ctx.sync();
  if (teeth_prep) scratch.poison(ctx);  // the products must read what the fused kernel wrote

  double bad = bit_mismatches(f1.download(ctx), p1.download(ctx)) +
               bit_mismatches(f2.download(ctx), p2.download(ctx)) +
               bit_mismatches(dx.download(ctx), x);  // x is only read
  if (prepared) bad += products->mismatches(ctx, rows, p1.get(), f1.get(), scratch.get());
  ctx.add({"rms_norm_dual", shape_str({rows, dim}) + (prepared ? " prepared" : ""), "f32", "bits",
           bad, 0.0,
           teeth_prep   ? "prepared rows overwritten"
           : teeth_swap ? "the two weights swapped"
                        : ""});
}

}  // namespace

void check_norm_fused(Context& ctx) {
  constexpr int64_t kWide = 2816, kOdd = 2817;  // Gemma 4 26B-A4B's width; scalar rows
  constexpr int64_t kDecode = kernels::kPreparedRows;
  if (ctx.wants("post_norm_add_norm")) {
    const Products products(ctx, kWide);
    // Decode: a layer's end (scale and the next attn_norm), post_attn + ffn_norm, 16 rows.
    for (const SandwichCase& c :
         {SandwichCase{1, kWide, true, true, true}, SandwichCase{1, kWide, false, true, true},
          SandwichCase{kDecode, kWide, true, true, true},
          // No pre-norm: the MoE branch's add, the last layer's end.
          SandwichCase{1, kWide, false, false, false}, SandwichCase{3, kWide, true, false, false},
          // Prefill rows (no prepared form) and odd widths.
          SandwichCase{37, kWide, true, true, false}, SandwichCase{37, kWide, false, true, false},
          SandwichCase{5, kOdd, true, true, false}, SandwichCase{5, kOdd, false, true, false},
          SandwichCase{5, kOdd, false, false, false}})
      check_post_norm_add_norm(ctx, c, &products);
  }
  if (ctx.wants("rms_norm_dual")) {
    const Products products(ctx, kWide);
    check_rms_norm_dual(ctx, 1, kWide, true, &products);
    check_rms_norm_dual(ctx, kDecode, kWide, true, &products);
    check_rms_norm_dual(ctx, 37, kWide, false, nullptr);
    check_rms_norm_dual(ctx, 5, kOdd, false, nullptr);
  }
}

}  // namespace memra::kernel_check
