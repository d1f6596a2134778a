// matmul (kernels.h): y = W x for ggml weight types, batch-invariant by construction.
//
// Design. x is rounded to bf16 (RNE) into scratch; weights are decoded to bf16 by a pure function
// of their block bytes (weight_frag.cuh, the CPU dequantizer's f32 value rounded to bf16); the
// product runs on mma.sync m16n8k16 bf16 with f32 accumulation.
// - Swap AB: weights are the mma A operand (M = output rows), tokens the B operand (N = 8 per
//   mma), so a 1-token decode still fills whole 16-row weight tiles and streams each weight byte
//   once, while prefill tiles the same instruction over 128 x 128 blocks.
// - The canonical order, the only one any configuration uses: K is cut into 256-element chunks
//   (the last may be shorter); chunk c's partial p_c is an mma chain over its k16 steps in
//   increasing order, starting from +0; y = (((p_0 + p_1) + p_2) + ...) in f32. The chunk size
//   is a constant, so the split depends on K alone. A plain chain over all of K would make every
//   output wait on K/16 dependent mmas (~12 us for K = 12288) and leave a 4096-row matrix with
//   256 warps for 132 SMs; fixed chunks let the decode kernel spread one row tile's K over 8
//   warps and add their partials in chunk order, while the prefill kernel keeps a running sum in
//   registers and folds each chunk as it ends. No split depends on the batch, the tile shape or
//   the device.
// - Invariance: an mma output element depends only on its A row, its B column and its
//   accumulator; A rows are the decoded weights of that output row, B columns the bf16 x of that
//   token (zero columns for absent tokens, which touch no other column). Both kernels compute
//   every p_c with the same instruction sequence on the same operands and fold in the same
//   order, so y[t][o] is bit-identical for any n_tokens, chunking of prefill, or batch mates.
// - F32 weights take a separate exact path (test fixtures): FFMA over a lane-strided partition
//   of K and a fixed xor-shuffle tree, the same code for any n_tokens.
#include <cstdint>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels {
namespace {

using matmul_detail::kDecodeTokens;
using matmul_detail::MatmulArgs;
using matmul_detail::pack_bf16;

// One thread per 16-element group of x: rounds to bf16 and stores the group in B-fragment order
// (positions 4t..4t+3 = elements 2t, 2t+1, 2t+8, 2t+9), so lane t reads its b[0], b[1] at once.
__global__ void x_to_bf16_kernel(const float* __restrict__ x, int64_t n_groups,
                                 uint16_t* __restrict__ xb) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_groups) return;
  const float4* src = reinterpret_cast<const float4*>(x) + 4 * i;
  float e[16];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const float4 f = __ldg(src + v);
    e[4 * v] = f.x;
    e[4 * v + 1] = f.y;
    e[4 * v + 2] = f.z;
    e[4 * v + 3] = f.w;
  }
  uint32_t o[8];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    o[2 * t] = pack_bf16(e[2 * t], e[2 * t + 1]);
    o[2 * t + 1] = pack_bf16(e[2 * t + 8], e[2 * t + 9]);
  }
  uint4* dst = reinterpret_cast<uint4*>(xb) + 2 * i;
  dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
  dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// F32 weights: one warp per output row; lane l sums elements l, l + 32, ... in order with FFMA,
// then a fixed xor tree (every lane ends with the same bits). Tokens go four at a time, each with
// its own accumulator, so the per-element order never depends on n_tokens.
constexpr int kF32Warps = 8;
__global__ void matmul_f32_kernel(const float* __restrict__ w, int n_in, int n_out,
                                  const float* __restrict__ x, int n_tokens, float* __restrict__ y,
                                  int64_t ldy) {
  const int lane = threadIdx.x & 31;
  const int o = blockIdx.x * kF32Warps + (threadIdx.x >> 5);
  if (o >= n_out) return;
  const float* wr = w + static_cast<int64_t>(o) * n_in;
  for (int t0 = 0; t0 < n_tokens; t0 += 4) {
    const int nt = min(4, n_tokens - t0);
    const float* xt = x + static_cast<int64_t>(t0) * n_in;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = lane; i < n_in; i += 32) {
      const float wv = __ldg(wr + i);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j < nt) acc[j] = fmaf(wv, __ldg(xt + static_cast<int64_t>(j) * n_in + i), acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        acc[j] = __fadd_rn(acc[j], __shfl_xor_sync(0xffffffffu, acc[j], off));
      }
      if (lane == 0 && j < nt) y[(t0 + j) * ldy + o] = acc[j];
    }
  }
}

template <DType D>
void run_mma(const MatmulArgs& args, cudaStream_t stream) {
  if (args.n_tokens <= kDecodeTokens) {
    matmul_detail::launch_decode<D>(args, stream);
  } else {
    matmul_detail::launch_prefill<D>(args, stream);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool matmul_supports(DType wtype) {
  switch (wtype) {
    case DType::f32:
#define MEMRA_CASE(D) case D:
      MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_CASE)
#undef MEMRA_CASE
      return true;
    default:
      return false;
  }
}

size_t matmul_scratch_bytes(int64_t n_tokens, int64_t n_in) {
  return static_cast<size_t>(n_tokens < 0 ? 0 : n_tokens) * static_cast<size_t>(n_in) * 2;
}

void matmul(DType wtype, const void* w, int64_t n_in, int64_t n_out, const float* x,
            int64_t n_tokens, float* y, int64_t ldy, void* scratch, cudaStream_t stream) {
  if (!matmul_supports(wtype)) {
    fail(ErrorCode::unsupported, "matmul: no CUDA kernel for weight type {}", dtype_name(wtype));
  }
  const int64_t block = dtype_traits(wtype).block_size;
  if (n_in <= 0 || n_in % 16 != 0 || n_in % block != 0 || n_in > (int64_t{1} << 30)) {
    fail(ErrorCode::invalid_argument,
         "matmul: n_in {} must be a positive multiple of 16 and of the {} block size {}", n_in,
         dtype_name(wtype), block);
  }
  // 65535 row tiles of 128 in the prefill grid's y dimension.
  if (n_out < 0 || n_out > 65535 * 128 || n_tokens < 0 || n_tokens > (int64_t{1} << 30)) {
    fail(ErrorCode::invalid_argument, "matmul: unsupported sizes n_out {} n_tokens {}", n_out,
         n_tokens);
  }
  if (ldy < n_out) fail(ErrorCode::invalid_argument, "matmul: ldy {} < n_out {}", ldy, n_out);
  if (n_out == 0 || n_tokens == 0) return;
  const int in = static_cast<int>(n_in), out = static_cast<int>(n_out);
  const int tokens = static_cast<int>(n_tokens);
  if (wtype == DType::f32) {
    const unsigned blocks = static_cast<unsigned>((n_out + kF32Warps - 1) / kF32Warps);
    matmul_f32_kernel<<<blocks, kF32Warps * 32, 0, stream>>>(static_cast<const float*>(w), in, out,
                                                             x, tokens, y, ldy);
    return;
  }

  // 16-byte pieces: cp.async of weight blocks, float4 reads of x, uint4 writes of scratch.
  if (!aligned16(w) || !aligned16(x) || !aligned16(scratch)) {
    fail(ErrorCode::invalid_argument, "matmul: w, x and scratch must be 16-byte aligned");
  }
  const int64_t groups = n_tokens * n_in / 16;
  auto* xb = static_cast<uint16_t*>(scratch);
  x_to_bf16_kernel<<<static_cast<unsigned>((groups + 255) / 256), 256, 0, stream>>>(x, groups, xb);

  MatmulArgs args;
  args.w = static_cast<const uint8_t*>(w);
  args.row_bytes = n_in / block * dtype_traits(wtype).type_size;
  args.n_in = in;
  args.n_out = out;
  args.xb = xb;
  args.n_tokens = tokens;
  args.y = y;
  args.ldy = ldy;
  switch (wtype) {  // the one place a runtime dtype becomes a template parameter
#define MEMRA_CASE(D)         \
  case D:                     \
    run_mma<D>(args, stream); \
    break;
    MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_CASE)
#undef MEMRA_CASE
    default:
      fail(ErrorCode::internal, "matmul: dtype {} passed the support check", dtype_name(wtype));
  }
}

}  // namespace memra::kernels
