// The attention block's prologue in one launch: per-head RMS norm of q and k (and of v, Gemma 4's
// unweighted v norm), rope of q and k, and k and v into their cache slots. A decode step ran these
// as five (six) launches a layer (the norms, two ropes, the store), each a few microseconds of
// launch and ramp for a few kilobytes of work.
//
// Bits: every value is computed by the same rounding steps as the separate kernels (the shared
// norm_math.cuh and rope_table.cuh), and a head's sum of squares is reduced in the norm kernel's
// order: its 256 threads own the head's 4-element chunks c = tid (one each, head_dim <= 1024), a
// warp adds its lanes' sums with the xor butterfly, and the warp sums are added in warp order from
// +0. One warp here walks the same chunks as those warps, 32 at a time, with the same butterfly
// and the same additions (warps of the norm kernel past the head's chunks only add +0). So the
// output is bit-identical to [rms_norm(v),] rms_norm, rms_norm, rope, rope, kv_store (kernel-check
// compares them), and, per token, independent of the step around it.
#include <algorithm>
#include <cstdint>

#include "core/env.h"
#include "kernels/attention/cache_convert.cuh"
#include "kernels/attention/head_prologue4.cuh"
#include "kernels/common.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/elementwise/norm_math.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/rope/rope_table.cuh"

namespace memra::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 1024;  // one 4-element chunk per thread of the norm kernel

using detail::to_cache;

struct PrologueArgs {
  float* q;
  float* k;
  float* v;
  const float* q_norm;  // [head_dim] or null (no q norm)
  const float* k_norm;
  const float* v_norm;  // [head_dim] or null: v normed in place before it is stored
  float eps;
  int n_heads, n_kv_heads, head_dim, n_rot;
  bool neox;
  const int32_t* positions;
  const int32_t* slots;
  const double* inv_freq;
  void* k_cache;
  void* v_cache;
  const float* angle_table;  // the step's angles (qk_angle_table), or null: computed here
  int heads_per_warp;        // heads of one token a warp takes (heads_per_warp())
  bool vec;                  // rows copied 16 bytes at a time (copy_row)
};

// The angle table's floats, rounded up so that the rows after it start 16-byte aligned.
__host__ __device__ constexpr int table_floats(int n_rot) {
  return (n_rot + 3) & ~3;
}

// buf holds one head's row; normed in place with w (the rms_norm kernel's arithmetic on one
// head), or left as is (w null).
__device__ __forceinline__ void head_norm(float* buf, const float* w, int head_dim, float eps,
                                          int lane) {
  if (!w) return;
  const int n_chunks = (head_dim + 3) / 4;
  float total = 0.0f;
  for (int c0 = 0; c0 < n_chunks; c0 += 32) {  // one warp of the norm kernel
    const int c = c0 + lane;
    float v[4];
    int n = 0;
    if (c < n_chunks) {
      n = min(4, head_dim - 4 * c);
      for (int j = 0; j < n; ++j) v[j] = buf[4 * c + j];
    }
    total += detail::warp_butterfly_sum(detail::add_squares(0.0f, v, n));
  }
  const float inv = detail::inv_rms(total, head_dim, eps);
  __syncwarp();  // every lane has read its chunk before any is overwritten
  for (int i = lane; i < head_dim; i += 32) buf[i] = detail::norm_out(buf[i], inv, w, i);
  __syncwarp();
}

// An L1 prefetch of a head's n floats (lane's share): what a warp reads only after a reduction
// or a store, so that the load then finds it on chip instead of starting a memory round trip.
__device__ __forceinline__ void prefetch_head(const float* p, int n, int lane) {
  if (!p) return;
  for (int i = 32 * lane; i < n; i += 32 * 32)  // one 128-byte line a lane
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p + i));
}

// A head's row into its shared-memory buffer: 16-byte asynchronous copies where the rows allow
// them (vec: head_dim a multiple of 4, q and k 16-byte aligned), so that every row of a warp is in
// flight at once; else element by element.
__device__ __forceinline__ void copy_row(float* buf, const float* row, int hd, bool vec, int lane) {
  if (vec) {
    for (int c = lane; c < hd / 4; c += 32) detail::cp_async16(buf + 4 * c, row + 4 * c);
  } else {
    for (int i = lane; i < hd; i += 32) buf[i] = row[i];
  }
}

// One head of token t (warp-wide): normed and rotated from its row in buf into its row of q or k
// and, for a k head, into the cache with that head's v.
template <typename T>
__device__ __forceinline__ void head_prologue(const PrologueArgs& a, int64_t t, int h, float* buf,
                                              const float* cos_t, const float* sin_t, int lane) {
  const int half = a.n_rot / 2, hd = a.head_dim;
  const bool is_q = h < a.n_heads;
  const int kh = h - a.n_heads;
  const int64_t kv_row = int64_t{a.n_kv_heads} * hd;
  float* row = is_q ? a.q + (t * a.n_heads + h) * hd : a.k + t * kv_row + int64_t{kh} * hd;
  const int32_t slot = a.slots[t];
  T* cache = !is_q && slot >= 0
                 ? static_cast<T*>(a.k_cache) + int64_t{slot} * kv_row + int64_t{kh} * hd
                 : nullptr;
  head_norm(buf, is_q ? a.q_norm : a.k_norm, hd, a.eps, lane);
  for (int i = lane; i < half; i += 32) {
    const int2 d = detail::rope_pair(i, half, a.neox);
    const float2 r = detail::rope_rotate(buf[d.x], buf[d.y], cos_t[i], sin_t[i]);
    row[d.x] = r.x;
    row[d.y] = r.y;
    if (cache) {
      cache[d.x] = to_cache<T>(r.x);
      cache[d.y] = to_cache<T>(r.y);
    }
  }
  for (int i = a.n_rot + lane; i < hd; i += 32) {  // past the rotated dims: the norm alone
    row[i] = buf[i];
    if (cache) cache[i] = to_cache<T>(buf[i]);
  }
  if (is_q) return;
  // v normed in place for every token, padding included, so its buffer ends as rms_norm leaves it.
  float* v = a.v + t * kv_row + int64_t{kh} * hd;
  const float* v_out = v;
  if (a.v_norm) {
    __syncwarp();  // every lane has read k from buf
    for (int i = lane; i < hd; i += 32) buf[i] = v[i];
    __syncwarp();  // head_norm reads the lanes' elements in chunks
    head_norm(buf, a.v_norm, hd, a.eps, lane);
    for (int i = lane; i < hd; i += 32) v[i] = buf[i];
    v_out = buf;
  }
  if (!cache) return;  // a padding token: nothing to store
  T* v_cache = static_cast<T*>(a.v_cache) + int64_t{slot} * kv_row + int64_t{kh} * hd;
  for (int i = lane; i < hd; i += 32) v_cache[i] = to_cache<T>(v_out[i]);
}

// Block (t, y): token t; warp w takes heads (y * heads_per_warp + j) * kWarps + w of q then k for
// j < heads_per_warp (a k head's warp also norms and stores that head's v). A decode step's few
// tokens take one head a warp, so that its heads run on many SMs; a prompt's take several, so
// that the token's angle table is computed once for all its heads and every row of a warp is
// copied at once (the 8B's heads, measured: 512 tokens 26.4 -> 23.9 us, 2,048 92.6 -> 57.5; what
// holds the 512-token launch at ~24 us in every form tried is not yet found: PERFORMANCE.md,
// thirty-sixth round). Dynamic shared memory: the token's cos and sin table (n_rot
// floats), then heads_per_warp rows of head_dim a warp. Each warp starts its rows' copies, its
// cache slot's load, and (into L1) its norm weight and v rows before the table is computed, so
// those latencies overlap.
template <typename T>
__global__ void __launch_bounds__(kThreads) qk_prologue_kernel(const PrologueArgs a) {
  detail::wait_for_inputs();
  extern __shared__ float smem[];
  const int half = a.n_rot / 2, hd = a.head_dim, hpw = a.heads_per_warp;
  float* cos_t = smem;
  float* sin_t = smem + half;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* bufs = smem + table_floats(a.n_rot) + warp * hpw * hd;
  const int64_t t = blockIdx.x;
  const int h0 = static_cast<int>(blockIdx.y) * hpw * kWarps + warp;
  const int n_all = a.n_heads + a.n_kv_heads;
  const int64_t kv_row = int64_t{a.n_kv_heads} * hd;
  for (int j = 0; j < hpw; ++j) {
    const int h = h0 + j * kWarps;
    if (h >= n_all) break;
    const bool is_q = h < a.n_heads;
    const int kh = h - a.n_heads;
    copy_row(bufs + j * hd,
             is_q ? a.q + (t * a.n_heads + h) * hd : a.k + t * kv_row + int64_t{kh} * hd, hd, a.vec,
             lane);
    if (j == 0 || is_q != (h - kWarps < a.n_heads))
      prefetch_head(is_q ? a.q_norm : a.k_norm, hd, lane);
    if (!is_q) {
      prefetch_head(a.v + t * kv_row + int64_t{kh} * hd, hd, lane);
      prefetch_head(a.v_norm, hd, lane);
    }
  }
  if (a.angle_table) {  // the token's row of angles, copied beside the rows
    const float* angles = a.angle_table + t * table_floats(a.n_rot);
    for (int c = threadIdx.x; c < table_floats(a.n_rot) / 4; c += kThreads)
      detail::cp_async16(cos_t + 4 * c, angles + 4 * c);
  }
  if (a.vec || a.angle_table) detail::cp_async_commit();
  if (!a.angle_table)
    detail::rope_table(cos_t, sin_t, half, a.positions[t], a.inv_freq, threadIdx.x, kThreads);
  if (a.vec || a.angle_table) detail::cp_async_wait_all();
  __syncthreads();  // the table, and each warp's rows (its lanes' copies)
  for (int j = 0; j < hpw; ++j) {
    const int h = h0 + j * kWarps;
    if (h >= n_all) return;
    head_prologue<T>(a, t, h, bufs + j * hd, cos_t, sin_t, lane);
  }
}

// The 128-dim heads with every dim rotated (Qwen3's, Llama 3's) four elements a lane, from the
// step's angle table, without v's norm: qk_prologue_kernel4.
constexpr int kHd4 = detail::kHeadDim4;

// Lane l's four values of a cache row (elements 4l .. 4l + 3 of `row`, 4-element aligned) in one
// store, each value to_cache's bits. The bits are packed by hand and the row indexed by the lane:
// a four-element struct copy through a cast pointer was split into element stores (PTX).
template <typename T>
__device__ __forceinline__ void store4_cache(T* row, int lane, const float (&f)[4]) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "a cache element type");
  uint32_t b[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const T v = to_cache<T>(f[j]);
    if constexpr (sizeof(T) == 1) {
      b[j] = *reinterpret_cast<const uint8_t*>(&v);
    } else if constexpr (sizeof(T) == 2) {
      b[j] = *reinterpret_cast<const uint16_t*>(&v);
    } else {
      b[j] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  if constexpr (sizeof(T) == 1) {
    reinterpret_cast<uint32_t*>(row)[lane] = b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24;
  } else if constexpr (sizeof(T) == 2) {
    reinterpret_cast<uint2*>(row)[lane] = make_uint2(b[0] | b[1] << 16, b[2] | b[3] << 16);
  } else {
    reinterpret_cast<uint4*>(row)[lane] = make_uint4(b[0], b[1], b[2], b[3]);
  }
}

// head_prologue on a 128-dim, fully rotated head with lane l holding elements 4l .. 4l + 3 (the
// chunk the norm kernel's thread l owns) in registers instead of shared memory:
// head_prologue4.cuh's norm and rotation (the neox partner half from lane l ^ 16 by shuffles),
// every store four at a time. The same bits as head_prologue (kernel-check's prologue cases).
template <typename T>
__device__ __forceinline__ void head_prologue4(const PrologueArgs& a, int64_t t, int h,
                                               const float* buf, const float* cos_t,
                                               const float* sin_t, int32_t slot, int lane) {
  const bool is_q = h < a.n_heads;
  const int kh = h - a.n_heads;
  const int64_t kv_row = int64_t{a.n_kv_heads} * kHd4;
  float* row = is_q ? a.q + (t * a.n_heads + h) * kHd4 : a.k + t * kv_row + int64_t{kh} * kHd4;
  const float4 x4 = reinterpret_cast<const float4*>(buf)[lane];
  float v[4] = {x4.x, x4.y, x4.z, x4.w};
  const float* w = is_q ? a.q_norm : a.k_norm;
  const float4 w4 = w ? __ldg(reinterpret_cast<const float4*>(w) + lane) : float4{};
  float out[4];
  detail::norm_rope4(v, w != nullptr, w4, a.eps, detail::lane_angles4(cos_t, sin_t, a.neox, lane),
                     a.neox, lane, out);
  reinterpret_cast<float4*>(row)[lane] = make_float4(out[0], out[1], out[2], out[3]);
  if (is_q || slot < 0) return;  // a padding token stores nothing
  const int64_t at = int64_t{slot} * kv_row + int64_t{kh} * kHd4;
  store4_cache(static_cast<T*>(a.k_cache) + at, lane, out);
  const float4 v4 = reinterpret_cast<const float4*>(a.v + t * kv_row + int64_t{kh} * kHd4)[lane];
  const float vv[4] = {v4.x, v4.y, v4.z, v4.w};
  store4_cache(static_cast<T*>(a.v_cache) + at, lane, vv);
}

// qk_prologue_kernel's heads in head_prologue4's form. Each warp copies its own rows and its own
// copy of the token's angles (a lane's 16 bytes each) and needs no other warp's: no block barrier,
// so a warp starts its heads when its copies land (the 512-token launch's warps spent a third of
// their samples at qk_prologue_kernel's barrier, PERFORMANCE.md thirty-sixth round). Dynamic
// shared memory: a warp's angles (128 floats) then its heads_per_warp rows.
template <typename T>
__global__ void __launch_bounds__(kThreads) qk_prologue_kernel4(const PrologueArgs a) {
  detail::wait_for_inputs();
  extern __shared__ __align__(16) float smem4[];
  const int hpw = a.heads_per_warp;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* angles = smem4 + warp * (hpw + 1) * kHd4;
  float* bufs = angles + kHd4;
  const int64_t t = blockIdx.x;
  const int h0 = static_cast<int>(blockIdx.y) * hpw * kWarps + warp;
  const int n_all = a.n_heads + a.n_kv_heads;
  if (h0 >= n_all) return;
  const int64_t kv_row = int64_t{a.n_kv_heads} * kHd4;
  detail::cp_async16(angles + 4 * lane, a.angle_table + t * kHd4 + 4 * lane);
  for (int j = 0; j < hpw; ++j) {
    const int h = h0 + j * kWarps;
    if (h >= n_all) break;
    const bool is_q = h < a.n_heads;
    const int kh = h - a.n_heads;
    const float* row =
        is_q ? a.q + (t * a.n_heads + h) * kHd4 : a.k + t * kv_row + int64_t{kh} * kHd4;
    detail::cp_async16(bufs + j * kHd4 + 4 * lane, row + 4 * lane);
    if (!is_q) prefetch_head(a.v + t * kv_row + int64_t{kh} * kHd4, kHd4, lane);
  }
  detail::cp_async_commit();
  const int32_t slot = a.slots[t];
  detail::cp_async_wait_all();
  __syncwarp();  // the lanes' copies of the angles, which every lane reads
  for (int j = 0; j < hpw; ++j) {
    const int h = h0 + j * kWarps;
    if (h >= n_all) return;
    head_prologue4<T>(a, t, h, bufs + j * kHd4, angles, angles + kHd4 / 2, slot, lane);
  }
}

// qk_angle_table's rows: token t's cos then sin table, rope_table's values.
__global__ void __launch_bounds__(kThreads)
    qk_angle_table_kernel(const int32_t* positions, int n_rot, const double* inv_freq,
                          float* table) {
  detail::wait_for_inputs();
  float* row = table + static_cast<int64_t>(blockIdx.x) * table_floats(n_rot);
  detail::rope_table(row, row + n_rot / 2, n_rot / 2, positions[blockIdx.x], inv_freq, threadIdx.x,
                     blockDim.x);
}

// The 128-dim heads on qk_prologue_kernel4, the default since the fortieth round (512 tokens of
// the 8B's heads 21.3 -> 8.7 us; 0.6B pp512 +7.9%, tg128 +3.3%; the same bits, kernel-check's
// prologue cases with teeth). MEMRA_PROLOGUE_FOUR=0: every head on qk_prologue_kernel (the A/B).
bool four_lanes_enabled() {
  static const bool enabled = env_switch("MEMRA_PROLOGUE_FOUR", true);
  return enabled;
}

// Heads a warp takes (qk_prologue_kernel): one for each 64 tokens of the step (so one for decode
// steps of up to 64 tokens), at most the token's heads over the warps and 32 KB of rows a block.
// MEMRA_PROLOGUE_HEADS=0 keeps one head a warp at every token count (the A/B; the same bits).
int heads_per_warp(int64_t n_tokens, int n_all, int hd) {
  static const bool several = env_switch("MEMRA_PROLOGUE_HEADS", true);
  if (!several) return 1;
  const int most = std::max(1, (32 << 10) / (kWarps * hd * static_cast<int>(sizeof(float))));
  const int64_t by_tokens = std::max<int64_t>(1, n_tokens / 64);
  return static_cast<int>(
      std::min<int64_t>({by_tokens, int64_t{(n_all + kWarps - 1) / kWarps}, int64_t{most}}));
}

}  // namespace

void qk_prologue(const PagedKv& kv, const StepDev& step, float* q, float* k, float* v, int n_heads,
                 const float* q_norm, const float* k_norm, const float* v_norm, float eps,
                 int n_rot, bool neox, const double* inv_freq, cudaStream_t stream,
                 const float* angle_table) {
  detail::require_non_negative("qk_prologue", step.n_tokens, "token count");
  const int hd = kv.head_dim;
  if (n_heads <= 0 || kv.n_kv_heads <= 0 || hd <= 0 || hd > kMaxHeadDim)
    fail(ErrorCode::invalid_argument,
         "qk_prologue: {} query / {} kv heads of {} dims (at most {} dims)", n_heads, kv.n_kv_heads,
         hd, kMaxHeadDim);
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > hd)
    fail(ErrorCode::invalid_argument, "qk_prologue: n_rot {} must be even and in 2..head_dim ({})",
         n_rot, hd);
  if (step.n_tokens == 0) return;
  const int n_all = n_heads + kv.n_kv_heads;
  const int hpw = heads_per_warp(step.n_tokens, n_all, hd);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = hd % 4 == 0 && aligned(q) && aligned(k);
  const PrologueArgs a{
      q,   k,     v,    q_norm,         k_norm,     v_norm,   eps,  n_heads, kv.n_kv_heads,
      hd,  n_rot, neox, step.positions, step.slots, inv_freq, kv.k, kv.v,    angle_table,
      hpw, vec};
  const size_t smem = sizeof(float) * (static_cast<size_t>(table_floats(n_rot)) +
                                       size_t{kWarps} * static_cast<size_t>(hpw) * hd);
  const dim3 blocks(static_cast<unsigned>(step.n_tokens),
                    static_cast<unsigned>((n_all + kWarps * hpw - 1) / (kWarps * hpw)));
  if (angle_table && reinterpret_cast<uintptr_t>(angle_table) % 16 != 0)
    fail(ErrorCode::invalid_argument, "qk_prologue: the angle table must be 16-byte aligned");
  if (four_lanes_enabled() && vec && angle_table && hd == kHd4 && n_rot == kHd4 && !v_norm &&
      aligned(v) && aligned(q_norm) && aligned(k_norm) && aligned(kv.k) && aligned(kv.v)) {
    const size_t smem4 = sizeof(float) * kWarps * (static_cast<size_t>(hpw) + 1) * kHd4;
    detail::with_cache_type(kv.dtype, "qk_prologue", [&](auto tag) {
      detail::launch(qk_prologue_kernel4<decltype(tag)>, blocks, kThreads, smem4, stream, a);
    });
    return;
  }
  detail::with_cache_type(kv.dtype, "qk_prologue", [&](auto tag) {
    detail::launch(qk_prologue_kernel<decltype(tag)>, blocks, kThreads, smem, stream, a);
  });
}

int64_t qk_angle_table_floats(int n_rot) {
  return table_floats(n_rot);
}

void qk_angle_table(const StepDev& step, int n_rot, const double* inv_freq, float* table,
                    cudaStream_t stream) {
  detail::require_non_negative("qk_angle_table", step.n_tokens, "token count");
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > kMaxHeadDim)
    fail(ErrorCode::invalid_argument, "qk_angle_table: n_rot {} must be even and in 2..{}", n_rot,
         kMaxHeadDim);
  if (step.n_tokens == 0) return;
  // Threads a block: the table's half rounded up to a warp (at most kThreads, looping past it).
  const int threads = std::min(kThreads, (n_rot / 2 + 31) / 32 * 32);
  detail::launch(qk_angle_table_kernel, static_cast<unsigned>(step.n_tokens), threads, 0, stream,
                 step.positions, n_rot, inv_freq, table);
}

}  // namespace memra::kernels
