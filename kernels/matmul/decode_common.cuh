// Private to kernels/matmul: what the two decode kernels (ggml layout: matmul_decode.cu, tiled
// layout: matmul_decode_tiled.cu) share: the B fragments and group sums of x, and the cross-warp
// sum of the chunk partials in chunk order (the canonical order of matmul.cu).
#pragma once

#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

// Starts the first min(n, a.prefetch_bytes) bytes of [p, p + n) of a weight matrix into L2
// (launch.cuh's prefetch_l2), in 16 KiB pieces spread over the block's threads. The weights are
// constant during a forward pass, so the decode kernels issue this before wait_for_inputs(): under
// programmatic launch it overlaps the kernels that produce x. The span is widened down to a
// 16-byte boundary (the matrix starts on one) and its ragged end of under 16 bytes left to the
// kernel's own loads, so nothing outside the matrix is touched.
__device__ __forceinline__ void prefetch_span_l2(const MatmulArgs& a, const uint8_t* p, int64_t n) {
  constexpr int64_t kPiece = 16 * 1024;
  n = min(n, a.prefetch_bytes);
  const int64_t skew = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) & 15u);
  p -= skew;
  n += skew;
  for (int64_t off = threadIdx.x * kPiece; off < n; off += blockDim.x * kPiece) {
    const int64_t len = min(kPiece, n - off) & ~int64_t{15};
    if (len > 0) detail::prefetch_l2(p + off, static_cast<uint32_t>(len));
  }
}

// The same for the block's rows [row0, row0 + rows) of a ggml-layout matrix (contiguous rows).
__device__ __forceinline__ void prefetch_rows_l2(const MatmulArgs& a, int64_t row0, int rows) {
  const int64_t end = min(row0 + rows, static_cast<int64_t>(a.n_out));
  if (end > row0) prefetch_span_l2(a, a.w + row0 * a.row_bytes, (end - row0) * a.row_bytes);
}

// The B fragment (token 8n + g) of k16 step s of the chunk at k0; zero past the batch or K.
__device__ __forceinline__ uint2 x_frag(const MatmulArgs& a, int n, int g, int t, int k0, int s,
                                        int steps) {
  const int tok = 8 * n + g;
  return tok < a.n_tokens && s < steps
             ? __ldg(reinterpret_cast<const uint2*>(a.xh + static_cast<int64_t>(tok) * a.n_in + k0 +
                                                    4 * t + 16 * s))
             : make_uint2(0u, 0u);
}

// The sums of 32-element group `group` of x for this lane's C columns in token tile n (tokens
// 8n + 2t and 8n + 2t + 1).
__device__ __forceinline__ float2 group_sums(const MatmulArgs& a, int n, int t, int group) {
  const int tok = 8 * n + 2 * t;
  float2 v;
  v.x = tok < a.n_tokens ? __ldg(a.xsum + tok * a.xsum_stride + group) : 0.0f;
  v.y = tok + 1 < a.n_tokens ? __ldg(a.xsum + (tok + 1) * a.xsum_stride + group) : 0.0f;
  return v;
}

// The chunk partials of a block of kRows rows (kRows / 16 m16 tiles) x kTokens tokens, computed
// by kWarps warps that take chunks c = r * kWarps + warp in rounds r, summed in chunk order.
// Shared memory: kSmemFloats floats ([2][warp][token][row]: two rounds' buffers).
template <int kWarps, int kRows, int kTokens>
struct ChunkSum {
  static constexpr int kPartFloats = kTokens * kRows;  // one warp's chunk partial
  static constexpr int kSmemFloats = 2 * kWarps * kPartFloats;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kOuts = (kPartFloats + kThreads - 1) / kThreads;
  float* part;
  float total[kOuts] = {};

  // This warp's partial of round r: acc[m][n] is m16 tile m x token tile n.
  template <int kTiles, int kNT>
  __device__ __forceinline__ void store(const float (&acc)[kTiles][kNT][4], int r, int warp, int g,
                                        int t) {
    float* mine = part + ((r & 1) * kWarps + warp) * kPartFloats;
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const int tok = 8 * n + 2 * t;
        mine[tok * kRows + 16 * m + g] = acc[m][n][0];
        mine[(tok + 1) * kRows + 16 * m + g] = acc[m][n][1];
        mine[tok * kRows + 16 * m + g + 8] = acc[m][n][2];
        mine[(tok + 1) * kRows + 16 * m + g + 8] = acc[m][n][3];
      }
    }
  }

  // After a barrier: adds round r's partials to the running totals in chunk order. The two
  // buffers alternate, so round r + 1 writes the other one while these are still read.
  __device__ __forceinline__ void fold(int r, int n_chunks) {
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int idx = threadIdx.x + kThreads * i;
      if (idx < kPartFloats) {
        const float* mine = part + (r & 1) * kWarps * kPartFloats + idx;
        for (int w = 0; w < kWarps; ++w) {
          const int cw = r * kWarps + w;
          if (cw < n_chunks) {
            const float v = mine[w * kPartFloats];
            total[i] = cw == 0 ? v : __fadd_rn(total[i], v);
          }
        }
      }
    }
  }

  __device__ __forceinline__ void write(const MatmulArgs& a, int row0) const {
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int idx = threadIdx.x + kThreads * i;
      const int n = idx / kRows, row = row0 + idx % kRows;
      if (idx < kPartFloats && n < a.n_tokens && row < a.n_out)
        a.y[n * a.ldy + row] = total[i] * a.xinv[n];
    }
  }
};

}  // namespace memra::kernels::matmul_detail
