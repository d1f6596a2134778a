// Private to kernels/matmul: what the two decode kernels (ggml layout: matmul_decode.cu, tiled
// layout: matmul_decode_tiled.cu) share: the B fragments and group sums of x, and the cross-warp
// sum of the chunk partials in chunk order (the canonical order of matmul.cu).
#pragma once

#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/mma_util.cuh"

namespace memra::kernels::matmul_detail {

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
    store_at(part + ((r & 1) * kWarps + warp) * kPartFloats, acc, g, t);
  }
  // The same into a slot of its own (mine: kPartFloats floats, [token][row]).
  template <int kTiles, int kNT>
  __device__ __forceinline__ static void store_at(float* mine, const float (&acc)[kTiles][kNT][4],
                                                  int g, int t) {
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

  // Packed blocks (one token, round 0 only): tile j of `pack` row tiles from row0 had chunk c's
  // partial in warp j * n_chunks + c. Thread i adds token 0's row i % 16 of tile i / 16 in chunk
  // order, as fold does, and writes it as write does.
  __device__ __forceinline__ void fold_write_packed(const MatmulArgs& a, int row0, int pack,
                                                    int n_chunks) const {
    static_assert(kRows == 16, "one m16 tile a warp");
    const int i = threadIdx.x, tile = i / 16, row = row0 + i;
    if (tile < pack && row < a.n_out) {
      const float* mine = part + tile * n_chunks * kPartFloats + i % 16;
      float sum = mine[0];
      for (int c = 1; c < n_chunks; ++c) sum = __fadd_rn(sum, mine[c * kPartFloats]);
      a.y[row] = sum * a.xinv[0];
    }
  }

  // Free rounds' slots for n_chunks chunks ([n_chunks][kPartFloats]): the round buffers where
  // they fit, else `dynamic`, the dynamic shared memory of dynamic_slot_bytes a launch passes.
  __device__ __forceinline__ static float* slots(int n_chunks, float* part, float* dynamic) {
    return n_chunks * kPartFloats <= kSmemFloats ? part : dynamic;
  }
  static int dynamic_slot_bytes(int n_chunks) {
    return n_chunks * kPartFloats > kSmemFloats ? n_chunks * kPartFloats * 4 : 0;
  }

  // Free rounds (a block barrier once, not every round): chunk c's partial in slot c of
  // parts[n_chunks][kPartFloats]; after the barrier each thread adds its elements' partials in
  // chunk order, as fold does, and writes them, as write does. The same additions, so the same
  // bits. thread: the caller's index of this thread (a block of several tiles gives each its own
  // threads: matmul_decode_pair.cu).
  __device__ __forceinline__ static void fold_write_chunks(const MatmulArgs& a, const float* parts,
                                                           int n_chunks, int row0,
                                                           int thread = threadIdx.x) {
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int idx = thread + kThreads * i;
      const int n = idx / kRows, row = row0 + idx % kRows;
      if (idx < kPartFloats && n < a.n_tokens && row < a.n_out) {
        float sum = parts[idx];
        for (int c = 1; c < n_chunks; ++c) sum = __fadd_rn(sum, parts[c * kPartFloats + idx]);
        a.y[n * a.ldy + row] = sum * a.xinv[n];
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
