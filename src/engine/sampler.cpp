// Sampler: a sequence's sampling state (penalty counts, sorted bias, RNG) around the chain of
// backend/cpu/sample_chain.h, which a device backend reproduces bit for bit (Ops::sample_rows).
// Softmax sums run in double so ties and tiny probabilities behave the same whatever the
// vocabulary size.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memra {

namespace {

constexpr int32_t kMaxTopLogprobs = sampling::kMaxTopLogprobs;

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
    for (int32_t t : prompt) {
      sampling::Penalty& e = counts_[t];
      e.token = t;
      ++e.seen;
    }
  for (const auto& [id, bias] : params_.logit_bias) bias_.push_back({id, bias});
  // Entries of one token keep their order (their float additions do not commute).
  std::stable_sort(
      bias_.begin(), bias_.end(),
      [](const sampling::Bias& a, const sampling::Bias& b) { return a.token < b.token; });
}

void Sampler::accept(int32_t token) {
  const bool seen = params_.repetition_penalty != 1.0f;
  const bool generated = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!seen && !generated) return;
  sampling::Penalty& e = counts_[token];
  e.token = token;
  e.seen += seen;
  e.generated += generated;
}

void Sampler::prepare(const structured::TokenMask* allowed, SampleSpec& spec) {
  sampling::RowParams& p = spec.params;
  p = sampling::RowParams{};
  p.greedy = greedy();
  p.top_k = params_.top_k;
  p.top_logprobs = params_.top_logprobs;
  if (!p.greedy) p.inv_t = 1.0f / params_.temperature;  // finite: greedy() covers T < 1e-5
  p.top_p = params_.top_p;
  p.repetition = params_.repetition_penalty;
  p.presence = params_.presence_penalty;
  p.frequency = params_.frequency_penalty;
  if (params_.min_p > 0.0f) p.min_p_log = std::log(static_cast<double>(params_.min_p));
  if (!p.greedy) p.uniform = rng_.uniform();
  spec.penalties.clear();
  for (const auto& [id, e] : counts_) spec.penalties.push_back(e);
  spec.bias = bias_;
  p.penalty_count = static_cast<int32_t>(spec.penalties.size());
  p.bias_count = static_cast<int32_t>(spec.bias.size());
  spec.mask = allowed;
  if (allowed) {
    p.mask_begin = 0;
    p.mask_words = static_cast<int32_t>(allowed->words.size());
  }
}

GeneratedToken Sampler::run(std::span<const float> logits, const SampleSpec& spec) {
  sampling::RowResult result;
  sample_chain_run(logits, spec.params, spec.penalties, spec.bias,
                   spec.mask ? spec.mask->words.data() : nullptr, scratch_, result);
  return finish(spec, result);
}

GeneratedToken Sampler::finish(const SampleSpec& spec, const sampling::RowResult& r) const {
  switch (r.status) {
    case sampling::kRowOk:
      break;
    case sampling::kRowNonFinite:
      fail(ErrorCode::internal, "logit of token {} is {}: the sampling weights would not be finite",
           r.err_id, r.err_value);
    case sampling::kRowNoFinite:
      fail(ErrorCode::internal, "no token has a finite logit to draw from (weights sum to {})",
           r.err_total);
    default:
      fail(ErrorCode::internal, "sampling result status {} has no token", r.status);
  }
  GeneratedToken out;
  out.id = r.id;
  if (spec.params.top_logprobs < 0) return out;
  out.logprob = sample_logprob(r, r.raw_id);
  for (int32_t i = 0; i < r.n_top; ++i)
    out.top.push_back({r.top_id[i], sample_logprob(r, r.top_raw[i])});
  return out;
}

GeneratedToken Sampler::sample(std::span<const float> logits,
                               const structured::TokenMask* allowed) {
  prepare(allowed, spec_);
  return run(logits, spec_);
}

}  // namespace memra
