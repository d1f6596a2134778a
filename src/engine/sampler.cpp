// Sampler: the sampling chain on one row of logits. Softmax sums run in double so ties and tiny
// probabilities behave the same whatever the vocabulary size.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace memra {

namespace {

constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit

bool finite_in(float v, float lo, float hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// -inf stays -inf through penalties, bias and temperature, so a masked token can never be drawn.
void mask_disallowed(const structured::TokenMask& allowed, std::vector<float>& logits) {
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < allowed.words.size(); ++w) {
    const uint64_t bits = allowed.words[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 64);
    for (size_t id = w * 64; id < end; ++id)
      if (!((bits >> (id & 63)) & 1)) logits[id] = kNever;
  }
}

int32_t argmax(std::span<const float> v) {
  // First maximum wins, so ties resolve the same way on every run.
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

void sampling_params_validate(const SamplingParams& p, int32_t n_vocab) {
  if (!finite_in(p.temperature, 0.0f, 100.0f))
    fail(ErrorCode::invalid_argument, "temperature {} is outside [0, 100]", p.temperature);
  if (p.top_k < 0) fail(ErrorCode::invalid_argument, "top_k {} is negative", p.top_k);
  if (!finite_in(p.top_p, 0.0f, 1.0f) || p.top_p <= 0.0f)
    fail(ErrorCode::invalid_argument, "top_p {} is outside (0, 1]", p.top_p);
  if (!finite_in(p.min_p, 0.0f, 1.0f))
    fail(ErrorCode::invalid_argument, "min_p {} is outside [0, 1]", p.min_p);
  if (!finite_in(p.repetition_penalty, 0.0f, 100.0f) || p.repetition_penalty <= 0.0f)
    fail(ErrorCode::invalid_argument, "repetition_penalty {} is outside (0, 100]",
         p.repetition_penalty);
  if (!finite_in(p.presence_penalty, -2.0f, 2.0f))
    fail(ErrorCode::invalid_argument, "presence_penalty {} is outside [-2, 2]", p.presence_penalty);
  if (!finite_in(p.frequency_penalty, -2.0f, 2.0f))
    fail(ErrorCode::invalid_argument, "frequency_penalty {} is outside [-2, 2]",
         p.frequency_penalty);
  if (p.top_logprobs < -1 || p.top_logprobs > kMaxTopLogprobs)
    fail(ErrorCode::invalid_argument, "top_logprobs {} is outside [0, {}]", p.top_logprobs,
         kMaxTopLogprobs);
  if (p.logit_bias.size() > static_cast<size_t>(n_vocab))
    fail(ErrorCode::invalid_argument, "logit_bias has {} entries, more than the vocabulary ({})",
         p.logit_bias.size(), n_vocab);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= n_vocab)
      fail(ErrorCode::invalid_argument, "logit_bias token id {} is outside the vocabulary [0, {})",
           id, n_vocab);
    if (!finite_in(bias, -100.0f, 100.0f))
      fail(ErrorCode::invalid_argument, "logit_bias for token {} is {}, outside [-100, 100]", id,
           bias);
  }
}

SamplerRng::SamplerRng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t SamplerRng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SamplerRng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed)
    : params_(params), rng_(seed) {
  if (params_.repetition_penalty != 1.0f)
    for (int32_t t : prompt) ++seen_[t];
}

void Sampler::accept(int32_t token) {
  if (params_.repetition_penalty != 1.0f) ++seen_[token];
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) ++generated_[token];
}

void Sampler::apply_penalties(std::vector<float>& logits) const {
  const float rep = params_.repetition_penalty;
  for (const auto& [id, count] : seen_) {
    float& l = logits[static_cast<size_t>(id)];
    l = l > 0.0f ? l / rep : l * rep;  // HF RepetitionPenaltyLogitsProcessor
  }
  for (const auto& [id, count] : generated_) {
    logits[static_cast<size_t>(id)] -=
        static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
  for (const auto& [id, bias] : params_.logit_bias) logits[static_cast<size_t>(id)] += bias;
}

// Temperature, top-k, top-p, min-p, then a draw from what is left. Candidates are sorted only as
// far as needed: top-k (or the first 256 for top-p) by partial sort, the rest only when top-p
// needs more mass than that.
int32_t Sampler::draw(std::vector<float>& logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  const float inv_t = 1.0f / params_.temperature;  // finite: greedy() covers T < 1e-5
  for (size_t i = 0; i < logits.size(); ++i) {
    float& l = logits[i];
    l *= inv_t;
    // NaN or +inf would make the weights NaN (and break the sort's ordering); -inf is a masked
    // token and stays out of the draw.
    if (!(l < std::numeric_limits<float>::infinity()))
      fail(ErrorCode::internal, "logit of token {} is {}: the sampling weights would not be finite",
           i, l);
  }
  order_.resize(static_cast<size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int32_t keep = n;
  if (params_.top_k > 0) keep = std::min(n, params_.top_k);
  // Sorting is needed only to cut by rank: top-k sorts its k, top-p a head of 256 (more on
  // demand). Plain temperature sampling draws in id order: sorting 262k logits per token cost
  // more than the CPU forward pass of Gemma 3 270M.
  int32_t sorted = params_.top_p < 1.0f ? std::min(keep, 256) : (keep < n ? keep : 0);
  std::partial_sort(order_.begin(), order_.begin() + sorted, order_.end(), by_logit);
  const double max_l =
      sorted > 0 ? logits[order_[0]] : *std::max_element(logits.begin(), logits.end());
  // One exp per candidate; the cuts and the draw below reuse the weights.
  weight_.resize(static_cast<size_t>(n));
  double total = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    const double w = std::exp(logits[order_[i]] - max_l);
    weight_[order_[i]] = w;
    total += w;
  }
  if (!std::isfinite(total) || total <= 0.0)
    fail(ErrorCode::internal, "no token has a finite logit to draw from (weights sum to {})",
         total);
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    int32_t i = 0;
    for (;; ++i) {
      if (i == sorted) {  // needs more than the sorted head: sort the rest of the kept range
        std::sort(order_.begin() + sorted, order_.begin() + keep, by_logit);
        sorted = keep;
      }
      cum += weight_[order_[i]] / total;
      if (cum >= params_.top_p || i + 1 == keep) break;
    }
    keep = i + 1;
  }
  if (params_.min_p > 0.0f) {
    // p_i >= min_p * p_max  <=>  l_i - max_l >= log(min_p); candidates are not necessarily sorted
    // past `sorted`, so filter rather than cut.
    const double cut = std::log(static_cast<double>(params_.min_p));
    auto end = std::stable_partition(order_.begin(), order_.begin() + keep,
                                     [&](int32_t id) { return logits[id] - max_l >= cut; });
    keep = static_cast<int32_t>(end - order_.begin());
  }
  double mass = 0.0;
  for (int32_t i = 0; i < keep; ++i) mass += weight_[order_[i]];
  double r = rng_.uniform() * mass;
  for (int32_t i = 0; i < keep; ++i) {
    r -= weight_[order_[i]];
    if (r < 0.0) return order_[i];
  }
  return order_[keep - 1];
}

void Sampler::fill_logprobs(std::span<const float> raw, GeneratedToken& out) const {
  const float max_l = *std::max_element(raw.begin(), raw.end());
  double sum = 0.0;
  for (float l : raw) sum += std::exp(static_cast<double>(l) - max_l);
  const double log_z = max_l + std::log(sum);
  out.logprob = static_cast<float>(raw[out.id] - log_z);
  const int32_t n_top = std::min<int32_t>(params_.top_logprobs, static_cast<int32_t>(raw.size()));
  if (n_top <= 0) return;
  std::vector<int32_t> ids(raw.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](int32_t a, int32_t b) {
    return raw[a] > raw[b] || (raw[a] == raw[b] && a < b);
  });
  for (int32_t i = 0; i < n_top; ++i)
    out.top.push_back({ids[i], static_cast<float>(raw[ids[i]] - log_z)});
}

GeneratedToken Sampler::sample(std::span<const float> logits,
                               const structured::TokenMask* allowed) {
  GeneratedToken out;
  const bool plain = seen_.empty() && generated_.empty() && params_.logit_bias.empty() && !allowed;
  if (greedy() && plain) {
    out.id = argmax(logits);
  } else {
    work_.assign(logits.begin(), logits.end());
    if (allowed) mask_disallowed(*allowed, work_);
    apply_penalties(work_);
    out.id = greedy() ? argmax(work_) : draw(work_);
  }
  if (params_.top_logprobs >= 0) fill_logprobs(logits, out);
  return out;
}

}  // namespace memra
