// Private to the CUDA backend: Ops::matmul_experts for the steps its one-launch device path does
// not take (dtypes without the expert-mode kernel, the ggml layout, more than
// kernels::expert_pairs_on_device() pairs). The ids are read on the host (a wait, so never inside a
// recording), the pairs' x rows gathered in expert order, each expert's matrix run over its rows
// by the ordinary matmul kernels, and the rows gathered back into pair order: every row is what
// matmul() gives for it, as the device path's.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "backend/expert_groups.h"
#include "backend/ops.h"
#include "kernels/kernels.h"

namespace memra::cuda {

class ExpertsGrouped {
 public:
  using Grow = std::function<void*(Buffer&, size_t)>;  // the backend's scratch growth
  using Form = std::function<std::pair<const void*, kernels::WeightLayout>(const TensorView&)>;

  void run(Ops& ops, cudaStream_t stream, const Grow& grow, const Form& form,
           Buffer& matmul_scratch, std::span<const ExpertMatrix> ws, const float* x, int x_div,
           const int32_t* ids, int64_t n_pairs, std::span<float* const> ys);

 private:
  ExpertGroups groups_;
  std::vector<int32_t> host_;  // the downloaded ids, then the two row maps
  Buffer rows_, x_, y_;
};

}  // namespace memra::cuda
