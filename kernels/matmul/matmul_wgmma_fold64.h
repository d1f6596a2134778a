// Private to kernels/matmul: the pipelined Q4_K wgmma kernel for 17-64 tokens
// (matmul_wgmma_fold64.cu), in a header of its own so that the other kernels' files do not
// depend on it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/matmul/matmul_launch.cuh"

namespace memra::kernels::matmul_detail {

// On unless MEMRA_WGMMA_FOLD64=0 (the A/B: the quantized wgmma kernel instead, the same bits).
bool wgmma_fold64_enabled();

// x: the shared x in the wgmma layout (xp, xsum, xsum_stride, xinv, n_in, n_tokens <= 64).
void launch_wgmma_fold64(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream);
// One output (args.w, args.y, args.n_out, args.ldy).
void launch_wgmma_fold64(const MatmulArgs& args, cudaStream_t stream);

// The split form (matmul_wgmma_fold64_split.cu): 64-row blocks whose two warpgroups take the
// chunks in turn, the same bits. On unless MEMRA_FOLD64_SPLIT=0.
bool fold64_split_enabled();
// Whether a launch of row_blocks 128-row blocks (one 64-token tile) takes it: where enabled and
// twice the blocks still fit one wave. launch_wgmma_fold64 asks this itself.
bool fold64_split_takes(int64_t row_blocks);
// outs in 128-row blocks (BlockOuts::add), as launch_wgmma_fold64's; at most 64 tokens.
void launch_wgmma_fold64_split(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream);

}  // namespace memra::kernels::matmul_detail
