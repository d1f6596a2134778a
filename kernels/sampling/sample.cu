// sample_rows: the whole sampling chain on the device, one 1024-thread block per logit row, so a
// decode step copies a RowResult per row to the host instead of the row. It reproduces
// backend/cpu/sample_chain.cpp bit for bit: the same single-rounding float steps (this file is
// built with -fmad=false), the same rank order (a unique 64-bit key per token,
// core/sampling_math.h's rank_key), the same sampling_exp and the same chunked sums (one thread
// per 256-id chunk, chunk sums added in order by one thread), and the same draw walk.
// Rows it does not finish it marks kRowDeferred (reasons in kernels.h); the host runs the chain.
#include <cfloat>
#include <climits>

#include "core/sampling_math.h"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

using sampling::RowParams;
using sampling::RowResult;

constexpr int kThreads = 1024;
constexpr int kHead = kSampleHead;  // the ranked head top-p may walk
constexpr int kMaxChunks = kSampleMaxCols / sampling::kSumChunk;

struct Shared {
  double chunk[kMaxChunks];
  unsigned long long head[kHead];
  double q[kHead];  // top-p: each head token's w / total; the draw: the chosen chunk's weights
  int hist[256];
  double red_d[kThreads / 32];
  float red_f[kThreads / 32];
  int red_i[kThreads / 32];
  unsigned long long thresh;
  int remaining, count, deferred, id, walk;
  double total, r;
  RowResult res;  // the row's outcome, written by thread 0
};

__device__ __forceinline__ bool is_kept(uint64_t key, uint64_t last_key, float v, double max,
                                        double min_p_log) {
  return key >= last_key && static_cast<double>(v) - max >= min_p_log;
}

// Leaves this row to the host chain. Uniform: every thread of the block calls it together.
__device__ void defer(Shared& sh) {
  if (threadIdx.x == 0) sh.res.status = sampling::kRowDeferred;
  __syncthreads();
}

// Block-wide max of v over n (NaN never wins); *nan set when any value is NaN.
__device__ float block_max(const float* v, int n, Shared& sh, bool* nan) {
  float m = -INFINITY;
  int saw_nan = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float x = v[i];
    if (x != x)
      saw_nan = 1;
    else if (x > m)
      m = x;
  }
  for (int off = 16; off > 0; off /= 2) {
    m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
    saw_nan |= __shfl_down_sync(0xffffffffu, saw_nan, off);
  }
  if (threadIdx.x % 32 == 0) {
    sh.red_f[threadIdx.x / 32] = m;
    sh.red_i[threadIdx.x / 32] = saw_nan;
  }
  __syncthreads();
  float all = -INFINITY;
  int any = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    all = fmaxf(all, sh.red_f[w]);
    any |= sh.red_i[w];
  }
  __syncthreads();
  *nan = any != 0;
  return all;
}

// The first index of the largest value (no NaN present): std::max_element's pick.
__device__ int block_argmax(const float* v, int n, Shared& sh) {
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x; i < n; i += kThreads)
    if (bi == INT_MAX || v[i] > bv) {
      bv = v[i];
      bi = i;
    }
  for (int off = 16; off > 0; off /= 2) {
    const float ov = __shfl_down_sync(0xffffffffu, bv, off);
    const int oi = __shfl_down_sync(0xffffffffu, bi, off);
    if (oi != INT_MAX && (bi == INT_MAX || ov > bv || (ov == bv && oi < bi))) {
      bv = ov;
      bi = oi;
    }
  }
  if (threadIdx.x % 32 == 0) {
    sh.red_f[threadIdx.x / 32] = bv;
    sh.red_i[threadIdx.x / 32] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      const float ov = sh.red_f[w];
      const int oi = sh.red_i[w];
      if (oi != INT_MAX && (bi == INT_MAX || ov > bv || (ov == bv && oi < bi))) {
        bv = ov;
        bi = oi;
      }
    }
    sh.id = bi == INT_MAX ? 0 : bi;
  }
  __syncthreads();
  return sh.id;
}

// The canonical chunked sum of sampling_exp(v - max) over ids with keep(i): chunk sums stay in
// sh.chunk for the draw. Every thread returns the total.
template <typename Keep>
__device__ double chunked_sum(const float* v, int n, double max, Shared& sh, Keep keep) {
  const int n_chunks = (n + sampling::kSumChunk - 1) / sampling::kSumChunk;
  for (int c = threadIdx.x; c < n_chunks; c += kThreads) {
    double s = 0.0;
    const int end = min(n, (c + 1) * sampling::kSumChunk);
    for (int i = c * sampling::kSumChunk; i < end; ++i)
      if (keep(i)) s = s + sampling::sampling_exp(static_cast<double>(v[i]) - max);
    sh.chunk[c] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int c = 0; c < n_chunks; ++c) total = total + sh.chunk[c];
    sh.total = total;
  }
  __syncthreads();
  return sh.total;
}

// The key of the k-th best token (1-based) of v by rank_key, MSB radix select over unique keys.
__device__ uint64_t select_kth(const float* v, int n, int k, Shared& sh) {
  uint64_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) sh.remaining = k;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    // Most keys share their leading digits: one atomic per distinct digit of a warp.
    for (int base = 0; base < n; base += kThreads) {
      const int i = base + threadIdx.x;
      int digit = -1;
      if (i < n) {
        const uint64_t key = sampling::rank_key(v[i], i);
        if ((key & mask) == prefix) digit = static_cast<int>((key >> shift) & 255);
      }
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit >= 0 && __ffs(peers) - 1 == static_cast<int>(threadIdx.x % 32))
        atomicAdd(&sh.hist[digit], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int rem = sh.remaining, d = 255;
      for (; d > 0 && rem > sh.hist[d]; --d) rem -= sh.hist[d];
      sh.remaining = rem;
      sh.thresh = static_cast<unsigned long long>(d);
    }
    __syncthreads();
    prefix |= static_cast<uint64_t>(sh.thresh) << shift;
    mask |= uint64_t{255} << shift;
    __syncthreads();
  }
  return prefix;
}

// The m >= 1 tokens whose key is >= last (m <= kHead) into sh.head, best first.
__device__ void gather_sorted(const float* v, int n, uint64_t last, Shared& sh) {
  if (threadIdx.x == 0) sh.count = 0;
  for (int i = threadIdx.x; i < kHead; i += kThreads) sh.head[i] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const uint64_t key = sampling::rank_key(v[i], i);
    if (key >= last) sh.head[atomicAdd(&sh.count, 1)] = key;
  }
  __syncthreads();
  // Bitonic sort, descending, kHead == kThreads elements.
  for (int size = 2; size <= kHead; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2) {
      const int i = threadIdx.x, j = i ^ stride;
      if (j > i) {
        const bool desc = (i & size) == 0;
        const unsigned long long a = sh.head[i], b = sh.head[j];
        if (desc ? a < b : a > b) {
          sh.head[i] = b;
          sh.head[j] = a;
        }
      }
      __syncthreads();
    }
}

__device__ __forceinline__ int key_id(uint64_t key) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(key));
}

// The raw logits' statistics for logprobs (sample_chain.cpp's fill_raw_stats).
__device__ void raw_stats(const float* raw, int n, const RowParams& p, Shared& sh) {
  RowResult& out = sh.res;
  bool nan = false;
  const float top = block_max(raw, n, sh, &nan);
  // NaN ranks are ill-defined and a -inf or +inf maximum makes the sum NaN: the host's.
  if (nan || !(fabsf(top) < INFINITY)) return defer(sh);
  const double sum = chunked_sum(raw, n, top, sh, [](int) { return true; });
  const int n_top = max(0, min(p.top_logprobs, n));
  if (n_top > 0) gather_sorted(raw, n, select_kth(raw, n, n_top, sh), sh);
  if (threadIdx.x == 0) {
    out.raw_max = top + 0.0f;  // -0 as +0, as the host reports it
    out.raw_sum = sum;
    out.n_top = n_top;
    for (int i = 0; i < n_top; ++i) {
      out.top_id[i] = key_id(sh.head[i]);
      out.top_raw[i] = raw[out.top_id[i]];
    }
  }
  __syncthreads();
}

// The grammar mask, penalties and logit bias into the row's work copy v (sample_chain_run).
__device__ void penalize(const float* raw, int n, const RowParams& p, const sampling::Penalty* pen,
                         const sampling::Bias* bias, const uint64_t* mask, float* v) {
  const int64_t masked_end = p.mask_begin >= 0 ? int64_t{64} * p.mask_words : 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float x = raw[i];
    if (i < masked_end && !((mask[i >> 6] >> (i & 63)) & 1)) x = -INFINITY;
    v[i] = x;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.penalty_count; e += kThreads) {
    const sampling::Penalty q = pen[e];
    float l = v[q.token];
    if (q.seen > 0) l = l > 0.0f ? l / p.repetition : l * p.repetition;
    if (q.generated > 0) l -= static_cast<float>(q.generated) * p.frequency + p.presence;
    v[q.token] = l;
  }
  __syncthreads();
  // One thread per token's group of entries, added in list order as the host does.
  for (int e = threadIdx.x; e < p.bias_count; e += kThreads) {
    const int t = bias[e].token;
    if (e > 0 && bias[e - 1].token == t) continue;
    float l = v[t];
    for (int j = e; j < p.bias_count && bias[j].token == t; ++j) l += bias[j].bias;
    v[t] = l;
  }
  __syncthreads();
}

// top-p over the ranked head (thread 0): the key of the last token kept, or 0 when the cut lies
// past the head (the row is then deferred).
__device__ uint64_t top_p_cut(const float* v, int n, int k, double max, double total,
                              uint64_t last_k, const RowParams& p, Shared& sh) {
  const int head = min(k, kHead);
  const uint64_t head_last = head == k ? last_k : select_kth(v, n, head, sh);
  gather_sorted(v, n, head_last, sh);
  for (int j = threadIdx.x; j < head; j += kThreads)
    sh.q[j] = sampling::sampling_exp(static_cast<double>(v[key_id(sh.head[j])]) - max) / total;
  __syncthreads();
  if (threadIdx.x == 0) {
    sh.thresh = 0;
    double cum = 0.0;
    for (int j = 0; j < head; ++j) {
      cum = cum + sh.q[j];
      if (cum >= p.top_p || j + 1 == k) {
        sh.thresh = sh.head[j];
        sh.res.top_p_ranks = j + 1;
        break;
      }
    }
  }
  __syncthreads();
  const uint64_t last = sh.thresh;
  __syncthreads();
  return last;
}

// The draw walk of sample_chain.cpp's draw_chunks: thread 0 finds the chunk, the block computes
// its kept weights, thread 0 walks them. Sets sh.res.id.
__device__ void draw_walk(const float* v, int n, double max, double mass, uint64_t last,
                          const RowParams& p, Shared& sh) {
  const int n_chunks = (n + sampling::kSumChunk - 1) / sampling::kSumChunk;
  if (threadIdx.x == 0) {
    double r = p.uniform * mass;
    int c = 0;
    for (; c < n_chunks; ++c) {
      if (r - sh.chunk[c] < 0.0) break;
      r = r - sh.chunk[c];
    }
    sh.walk = c < n_chunks;  // walk the chunk (else: its last kept token of positive weight)
    if (c == n_chunks)
      for (c = n_chunks; c-- > 0;)
        if (sh.chunk[c] > 0.0) break;
    sh.id = c;
    sh.r = r;
  }
  __syncthreads();
  const int begin = sh.id * sampling::kSumChunk, end = min(n, begin + sampling::kSumChunk);
  for (int i = begin + threadIdx.x; i < end; i += kThreads)
    sh.q[i - begin] = is_kept(sampling::rank_key(v[i], i), last, v[i], max, p.min_p_log)
                          ? sampling::sampling_exp(static_cast<double>(v[i]) - max)
                          : -1.0;  // not kept
  __syncthreads();
  if (threadIdx.x == 0) {
    double r = sh.r;
    int found = -1;
    for (int i = begin; i < end; ++i) {
      const double w = sh.q[i - begin];
      if (w < 0.0) continue;
      if (w > 0.0) found = i;
      if (sh.walk) {
        r = r - w;
        if (r < 0.0) {
          found = i;
          break;
        }
      }
    }
    sh.res.id = found;
  }
  __syncthreads();
}

// Temperature, top-k, top-p, min-p and the draw (sample_chain.cpp's draw); sets sh.res.
__device__ void draw(float* v, int n, const RowParams& p, Shared& sh) {
  if (threadIdx.x == 0) sh.deferred = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float s = v[i] * p.inv_t;
    if (!(s < INFINITY)) sh.deferred = 1;  // the host names the first such token in its error
    v[i] = s;
  }
  __syncthreads();
  bool nan = false;
  const float max_f = block_max(v, n, sh, &nan);
  if (sh.deferred || max_f == -INFINITY) return defer(sh);
  const double max = max_f;
  const int k = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  const uint64_t last_k = k < n ? select_kth(v, n, k, sh) : 0;
  uint64_t last = last_k;
  if (p.top_p < 1.0f) {
    // Only top-p reads the top-k mass: at least 1 (the best token's weight) and finite, as the
    // host checks.
    const double total =
        chunked_sum(v, n, max, sh, [&](int i) { return sampling::rank_key(v[i], i) >= last_k; });
    if (!(total > 0.0 && total < INFINITY)) return defer(sh);
    last = top_p_cut(v, n, k, max, total, last_k, p, sh);
    if (last == 0) return defer(sh);
  }
  const double mass = chunked_sum(v, n, max, sh, [&](int i) {
    return is_kept(sampling::rank_key(v[i], i), last, v[i], max, p.min_p_log);
  });
  draw_walk(v, n, max, mass, last, p, sh);
}

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* logits, int n, int64_t ld, const RowParams* params,
                       const sampling::Penalty* penalties, const sampling::Bias* bias,
                       const uint64_t* mask_words, float* scratch, RowResult* results) {
  detail::wait_for_inputs();
  __shared__ Shared sh;
  const int64_t row = blockIdx.x;
  const RowParams p = params[row];
  const float* raw = logits + row * ld;
  float* v = scratch + row * int64_t{n};
  if (threadIdx.x == 0) sh.res = RowResult{};
  penalize(raw, n, p, penalties + p.penalty_begin, bias + p.bias_begin,
           p.mask_begin >= 0 ? mask_words + p.mask_begin : nullptr, v);
  if (p.greedy) {
    bool nan = false;
    block_max(v, n, sh, &nan);
    if (nan) {
      defer(sh);
    } else {
      const int id = block_argmax(v, n, sh);
      if (threadIdx.x == 0) sh.res.id = id;
      __syncthreads();
    }
  } else {
    draw(v, n, p, sh);
  }
  if (sh.res.status == sampling::kRowOk && p.top_logprobs >= 0) raw_stats(raw, n, p, sh);
  if (threadIdx.x == 0) {
    if (sh.res.status == sampling::kRowOk && p.top_logprobs >= 0) sh.res.raw_id = raw[sh.res.id];
    results[row] = sh.res;
  }
}

}  // namespace

void sample_rows(const float* logits, int64_t n_rows, int64_t n_cols, int64_t ld,
                 const sampling::RowParams* params, const sampling::Penalty* penalties,
                 const sampling::Bias* bias, const uint64_t* mask_words, float* scratch,
                 sampling::RowResult* results, cudaStream_t stream) {
  detail::require_non_negative("sample_rows", n_rows, "n_rows");
  if (n_cols < 1 || n_cols > kSampleMaxCols || n_rows > INT_MAX || ld < n_cols)
    fail(ErrorCode::invalid_argument,
         "sample_rows: {} rows of {} columns at stride {} (at most {} columns)", n_rows, n_cols, ld,
         kSampleMaxCols);
  if (n_rows == 0) return;
  detail::launch(sample_rows_kernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, logits,
                 static_cast<int>(n_cols), ld, params, penalties, bias, mask_words, scratch,
                 results);
}

}  // namespace memra::kernels
