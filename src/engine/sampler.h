// Token sampling for one sequence: penalties, logit bias, temperature, top-k, top-p, min-p and a
// per-request RNG, so the same seed and request give the same tokens whatever else is batched.
// Order (as in llama.cpp's chain): grammar mask -> repetition / presence / frequency penalties ->
// logit bias -> greedy argmax, or temperature -> top-k -> top-p -> min-p -> draw. Log-probabilities
// are the model's own log-softmax of the raw logits (before mask, penalties, bias and temperature),
// as OpenAI reports them. The chain itself is backend/cpu/sample_chain.h (canonical arithmetic a
// device reproduces bit for bit); the Sampler keeps the request's state around it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "backend/cpu/sample_chain.h"
#include "core/sampling_math.h"
#include "memra/engine.h"
#include "structured/token_constraint.h"

namespace memra {

// Temperatures below this sample greedily. 1/T overflows float below ~3e-39 (and validation
// accepts any T >= 0); vLLM uses the same 1e-5 threshold.
inline constexpr float kGreedyBelowTemperature = 1e-5f;

// Throws Error(invalid_argument) naming the first out-of-range field.
void sampling_params_validate(const SamplingParams& params, int32_t n_vocab);

// xoshiro256** seeded through splitmix64: small, fast and identical on every platform.
class SamplerRng {
 public:
  explicit SamplerRng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

// One draw's parameters (Sampler::prepare): what a backend's sample_rows needs for the row.
// Penalty and bias ranges in params are relative to these vectors (begin 0).
struct SampleSpec {
  sampling::RowParams params;
  std::vector<sampling::Penalty> penalties;  // one entry per token, by token
  std::vector<sampling::Bias> bias;          // logit_bias stable-sorted by token
  const structured::TokenMask* mask = nullptr;
};

class Sampler {
 public:
  // prompt: counted by the repetition penalty (HF applies it over prompt + generated tokens).
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed);

  // Picks the next token from raw logits [n_vocab]: prepare() then run(). `allowed`
  // (constrained decoding) removes every other token before the chain runs; it must allow at
  // least one. Log-probabilities stay the model's own, unmasked. Throws Error(internal) when a
  // NaN or +inf logit (or no finite one) leaves nothing to draw from, rather than picking an
  // arbitrary id.
  GeneratedToken sample(std::span<const float> logits,
                        const structured::TokenMask* allowed = nullptr);
  // The next draw's parameters into spec. A non-greedy sampler draws the step's uniform here
  // (one per token, so the RNG advances exactly as sample() advances it).
  void prepare(const structured::TokenMask* allowed, SampleSpec& spec);
  // The host chain (backend/cpu/sample_chain.h) on a prepared spec.
  GeneratedToken run(std::span<const float> logits, const SampleSpec& spec);
  // The token from a chain result computed for spec (here or on a device); throws as sample().
  GeneratedToken finish(const SampleSpec& spec, const sampling::RowResult& result) const;
  // Records a token the sequence generated (for the penalties).
  void accept(int32_t token);
  bool greedy() const {
    return params_.temperature < kGreedyBelowTemperature || params_.top_k == 1;
  }
  // The next token is the argmax of the raw logits (greedy, no penalty or bias in effect, no
  // logprobs): sample() would return exactly the first maximum, so a device argmax may stand in
  // for it (the engine's greedy fast path). A grammar mask is the caller's to rule out.
  bool plain_greedy() const {
    return greedy() && counts_.empty() && params_.logit_bias.empty() && params_.top_logprobs < 0;
  }

 private:
  SamplingParams params_;
  SamplerRng rng_;
  std::map<int32_t, sampling::Penalty> counts_;  // prompt + generated (seen), generated
  std::vector<sampling::Bias> bias_;             // logit_bias, stable-sorted by token
  SampleSpec spec_;                              // sample()'s
  SampleScratch scratch_;
};

}  // namespace memra
