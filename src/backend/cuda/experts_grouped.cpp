#include "backend/cuda/experts_grouped.h"

#include <algorithm>

namespace memra::cuda {

void ExpertsGrouped::run(Ops& ops, cudaStream_t stream, const Grow& grow, const Form& form,
                         Buffer& matmul_scratch, std::span<const ExpertMatrix> ws, const float* x,
                         int x_div, const int32_t* ids, int64_t n_pairs,
                         std::span<float* const> ys) {
  const auto n_in = static_cast<int64_t>(ws[0].stacked->ne[0]);
  host_.resize(static_cast<size_t>(n_pairs));
  ops.download(host_.data(), ids, host_.size() * sizeof(int32_t));  // waits for the routing
  expert_groups_build(host_.data(), n_pairs, static_cast<int64_t>(ws[0].stacked->ne[2]), groups_);
  // rows[i]: the x row of the i-th pair in expert order; rows[n_pairs + p]: where pair p landed.
  host_.resize(static_cast<size_t>(2 * n_pairs));
  int64_t most = 0;  // the largest expert's rows
  for (size_t e = 0; e + 1 < groups_.begin.size(); ++e)
    most = std::max(most, groups_.begin[e + 1] - groups_.begin[e]);
  for (int64_t i = 0; i < n_pairs; ++i) {
    host_[i] = groups_.pairs[i] / x_div;
    host_[n_pairs + groups_.pairs[i]] = static_cast<int32_t>(i);
  }
  auto* rows = static_cast<int32_t*>(grow(rows_, host_.size() * sizeof(int32_t)));
  ops.upload(rows, host_.data(), host_.size() * sizeof(int32_t));
  auto* xg = static_cast<float*>(grow(x_, static_cast<size_t>(n_pairs * n_in) * sizeof(float)));
  kernels::gather_rows(x, n_in, rows, n_pairs, xg, stream);
  void* scratch = grow(matmul_scratch, kernels::matmul_scratch_bytes(most, n_in));
  for (size_t o = 0; o < ws.size(); ++o) {
    const TensorView& s = *ws[o].stacked;
    const int64_t n_out = ws[o].n_out;
    const auto [data, layout] = form(s);
    const bool tiled = layout == kernels::WeightLayout::tiled;
    if (tiled && ws[o].row_begin % 16 != 0)
      fail(ErrorCode::unsupported, "matmul_experts: rows from {} of tiled {}", ws[o].row_begin,
           s.name);
    const size_t expert_bytes =
        tiled ? kernels::matmul_tiled_bytes(s.dtype, n_in, static_cast<int64_t>(s.ne[1])) : 0;
    const size_t skip = tiled ? kernels::matmul_tiled_bytes(s.dtype, n_in, ws[o].row_begin) : 0;
    auto* yg = static_cast<float*>(grow(y_, static_cast<size_t>(n_pairs * n_out) * sizeof(float)));
    for (int64_t e = 0; e + 1 < static_cast<int64_t>(groups_.begin.size()); ++e) {
      const int64_t b = groups_.begin[e], m = groups_.begin[e + 1] - b;
      if (m == 0) continue;
      const void* w = tiled ? static_cast<const uint8_t*>(data) + e * expert_bytes + skip
                            : expert_view(ws[o], e).data;
      const kernels::MatmulOut out{s.dtype, w, n_out, yg + b * n_out, n_out, layout};
      kernels::matmul_shared_x(&out, 1, n_in, xg + b * n_in, m, scratch, stream);
    }
    kernels::gather_rows(yg, n_out, rows + n_pairs, n_pairs, ys[o], stream);
  }
}

}  // namespace memra::cuda
