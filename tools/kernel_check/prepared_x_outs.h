// Kernel-check's products over a prepared x (private to tools/kernel_check): the cases where a
// kernel writes its output's prepared rows for the products after it (the decode norms, the gated
// activation, attention) run the same products over x prepared by matmul_shared_x itself and over
// x handed prepared, and compare them bit for bit.
#pragma once

#include <utility>
#include <vector>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

// Three products over one x of `dim`, each run twice into outputs of its own: x prepared by
// matmul_shared_x (run 0) against x handed prepared by the kernel that wrote it (run 1). Q4_K
// tiled, Q6_K ggml-layout and BF16 tiled where dim is whole 256-element chunks (the K-quants'
// blocks, the tiled layout's chunks), else F16, BF16 and F16 in the ggml layout (any multiple of
// 16: the tensor-core kernels, which read the prepared rows).
class PreparedXOuts {
 public:
  static constexpr int kOuts = 3;
  PreparedXOuts(Context& ctx, int64_t dim) : dim_(dim), quants_(dim % 256 == 0) {
    for (int i = 0; i < kOuts; ++i) {
      ws_.emplace_back(ctx, random_weights(ctx, type(i), dim, kN[i]));
      if (layout(i) == kernels::WeightLayout::tiled) {
        Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(type(i), dim, kN[i]));
        kernels::matmul_tile(type(i), ws_.back().get(), dim, kN[i], tiled.get(), ctx.stream());
        ctx.sync();
        ws_.back() = std::move(tiled);
      }
    }
  }
  // Run `run`'s products of x (rows x dim), its matmul input prepared in `scratch` or not.
  void multiply(Context& ctx, int run, const float* x, int64_t rows, void* scratch,
                bool x_prepared) {
    std::vector<kernels::MatmulOut> outs;
    outs_[run].clear();
    for (int i = 0; i < kOuts; ++i) {
      outs_[run].emplace_back(rows * kN[i]);
      outs_[run].back().poison(ctx);
      outs.push_back({type(i), ws_[i].get(), kN[i], outs_[run][i].get(), kN[i], layout(i)});
    }
    kernels::matmul_shared_x(outs.data(), kOuts, dim_, x, rows, scratch, ctx.stream(), x_prepared);
  }
  // The two runs' outputs' bits that differ.
  double mismatches(Context& ctx) {
    double bad = 0;
    for (int i = 0; i < kOuts; ++i)
      bad += bit_mismatches(outs_[1][i].download(ctx), outs_[0][i].download(ctx));
    return bad;
  }
  const char* name() const { return quants_ ? "Q4_K tiled+Q6_K+BF16 tiled" : "F16+BF16+F16"; }

 private:
  DType type(int i) const {
    constexpr DType kQuants[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
    constexpr DType kHalves[kOuts] = {DType::f16, DType::bf16, DType::f16};
    return quants_ ? kQuants[i] : kHalves[i];
  }
  kernels::WeightLayout layout(int i) const {
    return quants_ && i != 1 ? kernels::WeightLayout::tiled : kernels::WeightLayout::ggml;
  }
  static constexpr int64_t kN[kOuts] = {160, 48, 64};
  int64_t dim_;
  bool quants_;
  std::vector<Dev<uint8_t>> ws_;
  std::vector<Dev<float>> outs_[2];
};

}  // namespace memra::kernel_check
