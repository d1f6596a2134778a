// Private to memra-kernel-check: products over an x whose matmul input a kernel other than the
// matmul prepared (kernels::rms_norm_for_matmul, the fused norms, act_mul_for_matmul), against
// the same products over an x the matmul prepares itself, bit for bit.
#pragma once

#include <vector>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

// Products over a prepared x: the matrices, in the layouts a decode step's norms feed (dim a
// multiple of 256, the K-quants' block).
class PreparedProducts {
 public:
  static constexpr int kOuts = 3;
  PreparedProducts(Context& ctx, int64_t dim) : dim_(dim) {
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

}  // namespace memra::kernel_check
