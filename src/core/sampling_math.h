// The sampling chain's shared definitions, compiled both by the host (the CPU sampler, the
// reference of every backend) and by nvcc (kernels/sampling): one row's flat parameters and
// result, and the arithmetic whose bits the device must reproduce: the exponential and the
// canonical order of the double sums. Nothing here allocates or knows a model.
//
// Canonical arithmetic (the exactness contract between the CPU sampler and the device):
// - float steps (penalties, bias, 1/T scaling) are single IEEE operations, never fused into an
//   FMA: the host file is built with -ffp-contract=off and the kernel with -fmad=false.
// - weights are w = sampling_exp(double(l) - double(max)): the polynomial below, written with
//   explicit fma, so every platform computes the same bits (std::exp and CUDA's exp may differ
//   in the last bit).
// - every sum of weights runs over token ids in ascending order, in chunks of kSumChunk ids: each
//   chunk summed left to right from +0.0, then the chunk sums left to right from +0.0. Tokens
//   outside the set add nothing (x + 0.0 == x), so the same chunk sums serve any subset.
// - the draw walks the same chunks (see draw_chunk in the implementations).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MEMRA_HD __host__ __device__
#else
#define MEMRA_HD
#endif

namespace memra::sampling {

inline constexpr int kSumChunk = 256;       // ids per chunk of the canonical sums
inline constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit

// One row's chain, flattened for a kernel. Indices point into the batch's shared lists.
struct RowParams {
  int32_t greedy = 0;         // 1: argmax of the penalized logits (no draw)
  int32_t top_k = 0;          // 0 = off
  int32_t top_logprobs = -1;  // -1: no logprobs; 0: the chosen token's; N <= 20: the top N
  float inv_t = 1.0f;         // 1.0f / temperature, a float division on the host
  float top_p = 1.0f;         // 1 = off
  float repetition = 1.0f;    // HF repetition penalty
  float presence = 0.0f;      // OpenAI presence / frequency penalties
  float frequency = 0.0f;
  double min_p_log = -INFINITY;  // log(double(min_p)) (std::log, on the host), -inf when off
  double uniform = 0.0;          // the step's draw in [0, 1) (SamplerRng::uniform)
  int32_t penalty_begin = 0, penalty_count = 0;  // Penalty entries, one per token
  int32_t bias_begin = 0, bias_count = 0;        // Bias entries, stable-sorted by token
  int64_t mask_begin = -1;                       // first uint64 word of the grammar mask; -1 none
  int32_t mask_words = 0;  // ids >= 64 * mask_words are not masked (as TokenMask)
};

// A token the penalties touch: seen > 0 applies the repetition penalty (prompt + generated),
// generated > 0 the presence and frequency penalties (count = generated).
struct Penalty {
  int32_t token = 0;
  int32_t seen = 0;
  int32_t generated = 0;
};

struct Bias {
  int32_t token = 0;
  float bias = 0.0f;
};

enum RowStatus : int32_t {
  kRowOk = 0,
  kRowDeferred = 1,   // the device left this row to the host chain (named reasons in kernels.h)
  kRowNonFinite = 2,  // a scaled logit is NaN or +inf: err_id, err_value
  kRowNoFinite = 3,   // no candidate has a finite weight: err_total
};

// One row's outcome: a few hundred bytes instead of the logits. Logprobs are finished on the
// host from raw_max, raw_sum and the raw logits (sample_logprob), the same code for both.
struct RowResult {
  int32_t status = kRowOk;
  int32_t id = 0;
  float raw_max = 0.0f;  // max of the raw logits (logprobs requested)
  float raw_id = 0.0f;   // raw logit of id
  double raw_sum = 0.0;  // canonical sum of sampling_exp(raw - raw_max)
  int32_t n_top = 0;
  int32_t top_id[kMaxTopLogprobs] = {};
  float top_raw[kMaxTopLogprobs] = {};
  int32_t top_p_ranks = 0;  // top-p: how many ranked tokens its cut kept (0: top-p off)
  int32_t err_id = 0;
  float err_value = 0.0f;
  double err_total = 0.0;
};

// exp(x) in double, identical bits on every IEEE platform: x = k ln2 + r (Cody-Waite, fdlibm's
// split of ln2, r in [-ln2/2, ln2/2]), exp(r) by its Taylor series to degree 13 (truncation
// < 5e-18 relative) in Horner form with explicit fma, then an exact scaling by 2^k (a product
// with a power of two whose result is normal). Within 2 ulp of exp for x in [-708, 709]; NaN
// stays NaN; x < -708 (and -inf) gives +0.0, so no result is subnormal; x > 709 gives +inf.
MEMRA_HD inline double sampling_exp(double x) {
  if (!(x >= -708.0)) return x != x ? x : 0.0;
  if (x > 709.0) return INFINITY;
  const double k = rint(x * 1.44269504088896338700e+00);
  double r = fma(-k, 6.93147180369123816490e-01, x);
  r = fma(-k, 1.90821492927058770002e-10, r);
  double p = 1.6059043836821613e-10;
  p = fma(p, r, 2.08767569878681e-09);
  p = fma(p, r, 2.505210838544172e-08);
  p = fma(p, r, 2.755731922398589e-07);
  p = fma(p, r, 2.7557319223985893e-06);
  p = fma(p, r, 2.48015873015873e-05);
  p = fma(p, r, 0.0001984126984126984);
  p = fma(p, r, 0.001388888888888889);
  p = fma(p, r, 0.008333333333333333);
  p = fma(p, r, 0.041666666666666664);
  p = fma(p, r, 0.16666666666666666);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  const uint64_t bits = static_cast<uint64_t>(static_cast<int64_t>(k) + 1023) << 52;  // 2^k
#if defined(__CUDA_ARCH__)
  const double scale = __longlong_as_double(static_cast<long long>(bits));
#else
  double scale = 0.0;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
#endif
  return p * scale;
}

// The rank order of candidates, (value descending, id ascending), as one unsigned key per token:
// larger key = better rank. -0.0 ranks as +0.0 (they compare equal); values must not be NaN.
MEMRA_HD inline uint64_t rank_key(float v, int32_t id) {
  uint32_t bits = 0;
  if (v != 0.0f) {
#if defined(__CUDA_ARCH__)
    bits = __float_as_uint(v);
#else
    __builtin_memcpy(&bits, &v, sizeof(bits));
#endif
  }
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}

}  // namespace memra::sampling
