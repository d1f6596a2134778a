// The sampling chain on one row of logits in host memory: the reference that the CPU sampler
// runs and that the device kernels (kernels/sampling/sample.cu) reproduce bit for bit. The
// arithmetic and its order are fixed in core/sampling_math.h; this file is built with
// -ffp-contract=off so that no float step is fused.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/sampling_math.h"

namespace memra {

// Reusable buffers of one caller (a sequence's sampler, a backend), so a step allocates nothing.
struct SampleScratch {
  std::vector<float> work;
  std::vector<int32_t> order;
  std::vector<int32_t> ids;
  std::vector<double> chunk;
};

// The chain on raw (the row's first n_cols logits): grammar mask -> repetition / presence /
// frequency penalties -> logit bias -> greedy argmax, or temperature -> top-k -> top-p -> min-p
// -> draw with p.uniform. Fills out (status kRowOk, or kRowNonFinite / kRowNoFinite with the
// reason; never kRowDeferred) and, when p.top_logprobs >= 0, the raw logits' statistics.
// mask: p.mask_words words (or null); penalties and bias: the row's entries.
void sample_chain_run(std::span<const float> raw, const sampling::RowParams& p,
                      std::span<const sampling::Penalty> penalties,
                      std::span<const sampling::Bias> bias, const uint64_t* mask,
                      SampleScratch& scratch, sampling::RowResult& out);

// The chain's double sum of sampling_exp(v[i] - max) over ids in canonical chunks, ids for which
// keep(i) is false adding nothing; chunk sums are left in `chunk` (for the draw). Each chunk's
// weights are computed first (a loop the compiler may vectorize), then added in id order.
double sample_chunked_sum(std::span<const float> v, double max, std::vector<double>& chunk,
                          const auto& keep) {
  const size_t n = v.size(), n_chunks = (n + sampling::kSumChunk - 1) / sampling::kSumChunk;
  chunk.assign(n_chunks, 0.0);
  double total = 0.0, w[sampling::kSumChunk];
  for (size_t c = 0; c < n_chunks; ++c) {
    const size_t begin = c * sampling::kSumChunk, len = std::min(n - begin, size_t{256});
    for (size_t j = 0; j < len; ++j) {
      const auto i = static_cast<int32_t>(begin + j);
      w[j] = keep(i) ? sampling::sampling_exp(double(v[i]) - max) : 0.0;
    }
    double s = 0.0;
    for (size_t j = 0; j < len; ++j) s += w[j];
    chunk[c] = s;
    total += s;
  }
  return total;
}

// The chosen token's logprob and the top entries from a result's raw statistics: log Z =
// raw_max + log(raw_sum) in double, logprob = float(raw - log Z).
float sample_logprob(const sampling::RowResult& r, float raw);

}  // namespace memra
