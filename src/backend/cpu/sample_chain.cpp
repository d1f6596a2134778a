// The sampling chain on one host row (sample_chain.h). Ranks are the total order (value
// descending, id ascending), so whichever partial sort finds them, the ranked prefix is the
// same; sums and the draw follow core/sampling_math.h's canonical chunks, which the device
// reproduces.
#include "backend/cpu/sample_chain.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace memra {

namespace {

using sampling::RowParams;
using sampling::RowResult;

constexpr float kInf = std::numeric_limits<float>::infinity();

// a ranks before b: larger value, then smaller id.
bool before(const std::vector<float>& v, int32_t a, int32_t b) {
  return v[a] > v[b] || (v[a] == v[b] && a < b);
}

// The largest of v (no NaN in v): lanes of 8 so the loop vectorizes. Only its value is used (a
// -0 / +0 pick does not change any difference taken from it).
float max_of(const std::vector<float>& v) {
  float lane[8] = {-kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf};
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8)
    for (size_t j = 0; j < 8; ++j) lane[j] = lane[j] < v[i + j] ? v[i + j] : lane[j];
  for (; i < v.size(); ++i) lane[0] = lane[0] < v[i] ? v[i] : lane[0];
  return *std::max_element(lane, lane + 8);
}

int32_t argmax(std::span<const float> v) {
  // First maximum wins, so ties resolve the same way on every run.
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// -inf stays -inf through penalties, bias and temperature, so a masked token can never be drawn.
void mask_disallowed(const uint64_t* words, int32_t n_words, std::vector<float>& logits) {
  for (size_t w = 0; w < static_cast<size_t>(n_words); ++w) {
    const uint64_t bits = words[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 64);
    for (size_t id = w * 64; id < end; ++id)
      if (!((bits >> (id & 63)) & 1)) logits[id] = -kInf;
  }
}

// The raw logits' statistics for logprobs: max, canonical sum, the chosen and the top entries.
void fill_raw_stats(std::span<const float> raw, const RowParams& p, SampleScratch& s,
                    RowResult& out) {
  const float max = *std::max_element(raw.begin(), raw.end());
  out.raw_max = max + 0.0f;  // -0 as +0: the device's max may pick either zero
  out.raw_sum = sample_chunked_sum(raw, max, s.chunk, [](int32_t) { return true; });
  out.raw_id = raw[out.id];
  out.n_top = std::max(0, std::min<int32_t>(p.top_logprobs, static_cast<int32_t>(raw.size())));
  if (out.n_top == 0) return;
  s.order.resize(raw.size());
  std::iota(s.order.begin(), s.order.end(), 0);
  std::partial_sort(
      s.order.begin(), s.order.begin() + out.n_top, s.order.end(),
      [&](int32_t a, int32_t b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); });
  for (int32_t i = 0; i < out.n_top; ++i) {
    out.top_id[i] = s.order[i];
    out.top_raw[i] = raw[s.order[i]];
  }
}

// The draw (sampling_math.h): r = uniform * mass; walk the chunk sums subtracting each until
// one would take r below zero, then walk that chunk's kept weights in id order and return the
// first that takes r below zero. Rounding may leave none: the chunk's last kept token of
// positive weight (past the end: the last chunk of positive sum) stands in.
int32_t draw_chunks(const std::vector<float>& v, double max, double mass, double uniform,
                    const std::vector<double>& chunk, const auto& keep) {
  double r = uniform * mass;
  size_t c = 0;
  for (; c < chunk.size(); ++c) {
    if (r - chunk[c] < 0.0) break;
    r -= chunk[c];
  }
  const bool walk = c < chunk.size();
  if (!walk)
    for (c = chunk.size(); c-- > 0;)
      if (chunk[c] > 0.0) break;
  const size_t begin = c * sampling::kSumChunk;
  const size_t end = std::min(v.size(), begin + sampling::kSumChunk);
  int32_t last = -1;
  for (size_t i = begin; i < end; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (!keep(id)) continue;
    const double w = sampling::sampling_exp(double(v[i]) - max);
    if (w > 0.0) last = id;
    if (walk) {
      r -= w;
      if (r < 0.0) return id;
    }
  }
  return last;
}

// The same sum over an explicit set of ids (sorted here by id): adding only the members in id
// order gives the bits of the full pass, whose other terms are +0.0.
double chunked_sum_of(std::span<const float> v, double max, std::vector<int32_t>& ids,
                      std::vector<double>& chunk) {
  std::sort(ids.begin(), ids.end());
  chunk.assign((v.size() + sampling::kSumChunk - 1) / sampling::kSumChunk, 0.0);
  for (int32_t i : ids)
    chunk[i / sampling::kSumChunk] += sampling::sampling_exp(double(v[i]) - max);
  double total = 0.0;
  for (double c : chunk) total += c;
  return total;
}

// Temperature, top-k, top-p, min-p, then the draw. Candidates are ranked only as far as needed:
// a small top-k by partial sort, a large one by nth_element (its set), top-p a head of 256 more
// on demand. Sums over a rank-cut set add its members only.
bool draw(const RowParams& p, SampleScratch& s, RowResult& out) {
  std::vector<float>& v = s.work;
  const auto n = static_cast<int32_t>(v.size());
  // Loops without early exits, so they vectorize; a NaN or +inf (rare) is then looked up.
  int32_t n_bad = 0;
  for (int32_t i = 0; i < n; ++i) {
    v[i] *= p.inv_t;
    n_bad += !(v[i] < kInf);
  }
  if (n_bad > 0) {
    // NaN or +inf would make the weights NaN (and break the rank order); -inf is a masked token
    // and stays out of the draw.
    const int32_t i = static_cast<int32_t>(
        std::find_if(v.begin(), v.end(), [](float x) { return !(x < kInf); }) - v.begin());
    out.status = sampling::kRowNonFinite;
    out.err_id = i;
    out.err_value = v[i];
    return false;
  }
  const float max_f = max_of(v);
  if (max_f == -kInf) {
    out.status = sampling::kRowNoFinite;
    out.err_total = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  const double max = max_f;
  const int32_t k = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  auto by_rank = [&](int32_t a, int32_t b) { return before(v, a, b); };
  std::vector<int32_t>& order = s.order;
  int32_t sorted = 0, last = -1;  // last: the last token of the kept rank prefix (-1: no cut)
  if (k < n || p.top_p < 1.0f) {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
  }
  if (k < n && k <= 1024) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), by_rank);
    sorted = k;
  } else if (k < n) {
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), by_rank);
  }
  if (k < n) last = order[k - 1];
  const auto ranks_at_or_before = [&](int32_t i, int32_t end) {
    return i == end || before(v, i, end);
  };
  int32_t m = k;  // the kept rank prefix is order[0, m) (m == n: every token)
  std::vector<int32_t>& ids = s.ids;
  if (p.top_p < 1.0f) {
    // The top-k mass: at least 1 (the best token's weight), so finite and positive.
    double total = 0.0;
    if (k < n) {
      ids.assign(order.begin(), order.begin() + k);
      total = chunked_sum_of(v, max, ids, s.chunk);
    } else {
      total = sample_chunked_sum(v, max, s.chunk, [](int32_t) { return true; });
    }
    double cum = 0.0;
    for (int32_t j = 0;; ++j) {
      if (j == sorted) {  // the next part of the ranked top-k set
        const int32_t next = std::min(k, std::max(256, 2 * sorted));
        std::partial_sort(order.begin() + sorted, order.begin() + next, order.begin() + k, by_rank);
        sorted = next;
      }
      cum += sampling::sampling_exp(double(v[order[j]]) - max) / total;
      if (cum >= p.top_p || j + 1 == k) {
        m = j + 1;
        last = order[j];
        out.top_p_ranks = m;
        break;
      }
    }
  }
  // min-p: p_i >= min_p * p_max  <=>  l_i - max >= log(min_p); -inf when off.
  const auto keep = [&](int32_t i) {
    return (last < 0 || ranks_at_or_before(i, last)) && double(v[i]) - max >= p.min_p_log;
  };
  double mass = 0.0;
  if (m < n) {
    ids.clear();
    for (int32_t j = 0; j < m; ++j)
      if (double(v[order[j]]) - max >= p.min_p_log) ids.push_back(order[j]);
    mass = chunked_sum_of(v, max, ids, s.chunk);
  } else {
    mass = sample_chunked_sum(v, max, s.chunk, keep);
  }
  out.id = draw_chunks(v, max, mass, p.uniform, s.chunk, keep);
  return true;
}

}  // namespace

void sample_chain_run(std::span<const float> raw, const RowParams& p,
                      std::span<const sampling::Penalty> penalties,
                      std::span<const sampling::Bias> bias, const uint64_t* mask,
                      SampleScratch& scratch, RowResult& out) {
  out = RowResult{};
  if (p.greedy && penalties.empty() && bias.empty() && !mask) {
    out.id = argmax(raw);
  } else {
    std::vector<float>& work = scratch.work;
    work.assign(raw.begin(), raw.end());
    if (mask) mask_disallowed(mask, p.mask_words, work);
    for (const sampling::Penalty& e : penalties) {
      float& l = work[static_cast<size_t>(e.token)];
      if (e.seen > 0) l = l > 0.0f ? l / p.repetition : l * p.repetition;  // HF's rule
      if (e.generated > 0) l -= static_cast<float>(e.generated) * p.frequency + p.presence;
    }
    for (const sampling::Bias& e : bias) work[static_cast<size_t>(e.token)] += e.bias;
    if (p.greedy)
      out.id = argmax(work);
    else if (!draw(p, scratch, out))
      return;
  }
  if (p.top_logprobs >= 0) fill_raw_stats(raw, p, scratch, out);
}

float sample_logprob(const RowResult& r, float raw) {
  const double log_z = r.raw_max + std::log(r.raw_sum);
  return static_cast<float>(raw - log_z);
}

}  // namespace memra
