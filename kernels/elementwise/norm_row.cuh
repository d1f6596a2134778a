// Private to kernels/: one row of the RMS norm (and the fused residual add) by a block of
// kNormThreads threads, shared by the norm kernels (norm.cu: the plain ones and Gemma's fused
// chains) and the norm that also prepares the matmul input (matmul/matmul.cu), so all compute
// every y with the same steps. The sum of squares is reduced in an order that depends on dim alone
// (per-thread chunks of 4, warp xor tree, then the 8 warp sums in index order), so a row's result
// is the same in any batch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/env.h"
#include "kernels/elementwise/norm_math.cuh"

namespace memra::kernels::detail {

constexpr int kNormThreads = 256;
constexpr int kNormWarps = kNormThreads / 32;

// Thread `tid` owns the 4-element chunks c = tid, tid + 256, ... (elements 4c..4c+3, clipped to
// dim) and adds their squares in that order. The chunking is the same whether or not rows are
// 16-byte aligned, so alignment never changes the reduction order.
__device__ __forceinline__ float norm_block_sum(float v, float* warp_sums) {
  v = warp_butterfly_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kNormWarps; ++w) total += warp_sums[w];  // every thread, same order
  return total;
}

// Up to 4 elements of chunk c of a row: one 16-byte access when the row allows it, else scalar.
__device__ __forceinline__ int load4(const float* p, int64_t c, int64_t dim, bool vec, float v[4]) {
  if (vec) {
    const float4 t = reinterpret_cast<const float4*>(p)[c];
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    return 4;
  }
  const int n = static_cast<int>(min(int64_t{4}, dim - 4 * c));
  for (int k = 0; k < n; ++k) v[k] = p[4 * c + k];
  return n;
}

__device__ __forceinline__ void store4(float* p, int64_t c, bool vec, const float v[4], int n) {
  if (vec) {
    reinterpret_cast<float4*>(p)[c] = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
  for (int k = 0; k < n; ++k) p[4 * c + k] = v[k];
}

__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The first pass over a row: x's chunks (replaced by x + d when d is not null, then times s when
// kScaled, each step rounded alone as the add and scale kernels round it, and stored back to x),
// their sum of squares, and 1 / rms of the row. Every caller's reduction is this one.
template <bool kScaled = false>
__device__ __forceinline__ float norm_row_inv(float* xr, const float* dr, float s, int64_t dim,
                                              float eps, bool vec, float* warp_sums) {
  const int64_t n_chunks = (dim + 3) / 4;
  float sum = 0.0f;
  float v[4], dv[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = load4(xr, c, dim, vec, v);
    if (dr || kScaled) {
      if (dr) {
        load4(dr, c, dim, vec, dv);
        for (int k = 0; k < n; ++k) v[k] = __fadd_rn(v[k], dv[k]);
      }
      if constexpr (kScaled)
        for (int k = 0; k < n; ++k) v[k] = __fmul_rn(v[k], s);
      store4(xr, c, vec, v, n);
    }
    sum = add_squares(sum, v, n);
  }
  return inv_rms(norm_block_sum(sum, warp_sums), dim, eps);
}

// The second pass: y = x * inv * w over the thread's chunks; returns the largest |y| it wrote
// (fmaxf: NaN never wins). The thread rereads only the x it wrote itself in the first pass.
__device__ __forceinline__ float norm_row_out(const float* xr, const float* w, float inv,
                                              int64_t dim, bool vec, float* yr) {
  const int64_t n_chunks = (dim + 3) / 4;
  float m = 0.0f;
  float v[4];
  for (int64_t c = threadIdx.x; c < n_chunks; c += kNormThreads) {
    const int n = load4(xr, c, dim, vec, v);
    for (int k = 0; k < n; ++k) {
      v[k] = norm_out(v[k], inv, w, 4 * c + k);
      m = fmaxf(m, fabsf(v[k]));
    }
    store4(yr, c, vec, v, n);
  }
  return m;
}

// Row `row` of x (d == nullptr: plain rms_norm; else x += d first, stored back to x) into y;
// returns the largest |y| among the elements this thread wrote. Each thread rereads only the
// elements it wrote itself, so no extra barrier is needed.
__device__ __forceinline__ float norm_row(float* x, const float* d, const float* w, int64_t dim,
                                          float eps, float* y, int64_t row, float* warp_sums) {
  float* xr = x + row * dim;
  const float* dr = d ? d + row * dim : nullptr;
  float* yr = y + row * dim;
  const bool vec = dim % 4 == 0 && aligned16(xr) && aligned16(yr) && (!dr || aligned16(dr));
  const float inv = norm_row_inv(xr, dr, 1.0f, dim, eps, vec, warp_sums);
  return norm_row_out(xr, w, inv, dim, vec, yr);
}

// The register form of the passes above, for rows that are 16-byte aligned with dim a multiple
// of 4 and at most kN * 4 * kNormThreads: thread t loads its chunks t, t + 256, ... (the same
// chunks, so the same sums and products in the same order) all at once and keeps them across the
// passes. The loop form costs a memory round trip per chunk and pass (each chunk's store may alias
// the next chunk's load, so the loads cannot be issued ahead) plus the rereads of its own writes:
// ~10 round trips for a 4096-wide decode row, where this takes one.
template <int kN>
struct RowRegs {
  float v[kN][4];

  __device__ __forceinline__ static int64_t chunk(int i) {
    return threadIdx.x + int64_t{i} * kNormThreads;
  }
  __device__ __forceinline__ void load(const float* r, int64_t n_chunks) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (chunk(i) < n_chunks) t = reinterpret_cast<const float4*>(r)[chunk(i)];
      v[i][0] = t.x, v[i][1] = t.y, v[i][2] = t.z, v[i][3] = t.w;
    }
  }
  __device__ __forceinline__ void store(float* r, int64_t n_chunks) const {
#pragma unroll
    for (int i = 0; i < kN; ++i)
      if (chunk(i) < n_chunks)
        reinterpret_cast<float4*>(r)[chunk(i)] = make_float4(v[i][0], v[i][1], v[i][2], v[i][3]);
  }
  // x + d, then times s when kScaled: norm_row_inv's roundings.
  template <bool kScaled>
  __device__ __forceinline__ void add_scale(const RowRegs& d, float s) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[i][k] = __fadd_rn(v[i][k], d.v[i][k]);
        if constexpr (kScaled) v[i][k] = __fmul_rn(v[i][k], s);
      }
    }
  }
  // The thread's sum of squares, chunks in order (norm_row_inv's).
  __device__ __forceinline__ float squares(int64_t n_chunks) const {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kN; ++i)
      if (chunk(i) < n_chunks) sum = add_squares(sum, v[i], 4);
    return sum;
  }
};

// A row's copy in shared memory, where the register form hands y to the f16 preparation (its
// threads read other threads' elements); one float for the loop form, which rereads y itself.
template <int kN>
struct RowStage {
  __align__(16) float v[kN * 4 * kNormThreads];
};
template <>
struct RowStage<0> {
  float v[1];
};

// The chunks a thread of the register form holds for rows of dim whose every row and weight
// pointer in `rows` (nulls skipped) is 16-byte aligned: 4 up to 4096, 8 up to 8192, else 0 (the
// loop form; MEMRA_NORM_REGS=0: always, the A/B).
constexpr int kRowRegsMax = 8;
inline int row_regs(int64_t dim, std::initializer_list<const void*> rows) {
  static const bool enabled = env_switch("MEMRA_NORM_REGS", true);
  if (!enabled || dim % 4 != 0 || dim > int64_t{kRowRegsMax} * 4 * kNormThreads) return 0;
  for (const void* p : rows)
    if (p && (reinterpret_cast<uintptr_t>(p) & 15u) != 0) return 0;
  return dim <= 4 * 4 * kNormThreads ? 4 : kRowRegsMax;
}

// f(std::integral_constant<int, kN>) for the register form's kN of these rows (0: the loop form):
// the host's one dispatch to the kernels' instances.
template <typename F>
void with_row_regs(int64_t dim, std::initializer_list<const void*> rows, F&& f) {
  switch (row_regs(dim, rows)) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case kRowRegsMax:
      return f(std::integral_constant<int, kRowRegsMax>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

// y = x * inv * w of every chunk (w null: x * inv), as norm_row_out; returns the largest |y|.
template <int kN>
__device__ __forceinline__ float row_out(RowRegs<kN>& y, const RowRegs<kN>& x, float inv,
                                         const RowRegs<kN>& w, bool has_w, int64_t n_chunks) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      y.v[i][k] = norm_out_w(x.v[i][k], inv, w.v[i][k], has_w);
      if (RowRegs<kN>::chunk(i) < n_chunks) m = fmaxf(m, fabsf(y.v[i][k]));
    }
  }
  return m;
}

// norm_row in the register form (x, d, y: the rows' starts); ys (shared memory, or null) gets
// a copy of y for the block's other threads.
template <int kN>
__device__ __forceinline__ float norm_row_regs(float* xr, const float* dr, const float* w,
                                               int64_t dim, float eps, float* yr, float* ys,
                                               float* warp_sums) {
  const int64_t n = dim / 4;
  RowRegs<kN> x, d{}, wv{};
  x.load(xr, n);
  if (dr) d.load(dr, n);
  if (w) wv.load(w, n);
  if (dr) {
    x.add_scale<false>(d, 1.0f);
    x.store(xr, n);
  }
  const float inv = inv_rms(norm_block_sum(x.squares(n), warp_sums), dim, eps);
  const float m = row_out(x, x, inv, wv, w != nullptr, n);
  x.store(yr, n);
  if (ys) x.store(ys, n);
  return m;
}

}  // namespace memra::kernels::detail
