// Private to kernels/matmul: the pipelined Q4_K wgmma kernel for 17-64 tokens
// (matmul_wgmma_fold64.cu), in a header of its own so that the other kernels' files do not
// depend on it.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/matmul/matmul_launch.cuh"

namespace memra::kernels::matmul_detail {

// On unless MEMRA_WGMMA_FOLD64=0 (the A/B: the quantized wgmma kernel instead, the same bits).
bool wgmma_fold64_enabled();

// Up to kMultiOuts tiled Q4_K outputs over the same x in one launch: block row b runs 128-row
// block b - block_begin[o] of output o, the same instructions as that output's own launch (so the
// same bits), and outputs too narrow to fill the GPU alone (q, k and v of a layer) run side by side
// instead of one launch after another.
struct Fold64Outs {
  const uint8_t* w[kMultiOuts] = {};
  float* y[kMultiOuts] = {};
  int n_out[kMultiOuts] = {};
  int64_t ldy[kMultiOuts] = {};
  int block_begin[kMultiOuts + 1] = {};
  int n = 0;
  // Appends output (w, y, n_out, ldy); the caller launches first when n == kMultiOuts.
  void add(const uint8_t* w_, float* y_, int n_out_, int64_t ldy_) {
    w[n] = w_, y[n] = y_, n_out[n] = n_out_, ldy[n] = ldy_;
    block_begin[n + 1] = block_begin[n] + (n_out_ + 127) / 128;
    ++n;
  }
};

// x: the shared x in the wgmma layout (xp, xsum, xsum_stride, xinv, n_in, n_tokens <= 64).
void launch_wgmma_fold64(const MatmulArgs& x, const Fold64Outs& outs, cudaStream_t stream);
// One output (args.w, args.y, args.n_out, args.ldy).
void launch_wgmma_fold64(const MatmulArgs& args, cudaStream_t stream);

}  // namespace memra::kernels::matmul_detail
