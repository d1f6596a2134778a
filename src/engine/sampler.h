// Token sampling for one sequence: penalties, logit bias, temperature, top-k, top-p, min-p and a
// per-request RNG, so the same seed and request give the same tokens whatever else is batched.
// Order (as in llama.cpp's chain): grammar mask -> repetition / presence / frequency penalties ->
// logit bias -> greedy argmax, or temperature -> top-k -> top-p -> min-p -> draw. Log-probabilities
// are the model's own log-softmax of the raw logits (before mask, penalties, bias and temperature),
// as OpenAI reports them.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

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

class Sampler {
 public:
  // prompt: counted by the repetition penalty (HF applies it over prompt + generated tokens).
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed);

  // Picks the next token from raw logits [n_vocab]. `allowed` (constrained decoding) removes every
  // other token before the chain runs; it must allow at least one. Log-probabilities stay the
  // model's own, unmasked. Throws Error(internal) when a NaN or +inf logit (or no finite one)
  // leaves nothing to draw from, rather than picking an arbitrary id.
  GeneratedToken sample(std::span<const float> logits,
                        const structured::TokenMask* allowed = nullptr);
  // Records a token the sequence generated (for the penalties).
  void accept(int32_t token);
  bool greedy() const {
    return params_.temperature < kGreedyBelowTemperature || params_.top_k == 1;
  }
  // The next token is the argmax of the raw logits (greedy, no penalty or bias in effect, no
  // logprobs): sample() would return exactly the first maximum, so a device argmax may stand in
  // for it (the engine's greedy fast path). A grammar mask is the caller's to rule out.
  bool plain_greedy() const {
    return greedy() && seen_.empty() && generated_.empty() && params_.logit_bias.empty() &&
           params_.top_logprobs < 0;
  }

 private:
  void apply_penalties(std::vector<float>& logits) const;
  int32_t draw(std::vector<float>& logits);
  void fill_logprobs(std::span<const float> raw, GeneratedToken& out) const;

  SamplingParams params_;
  SamplerRng rng_;
  std::unordered_map<int32_t, int32_t> seen_;       // prompt + generated (repetition penalty)
  std::unordered_map<int32_t, int32_t> generated_;  // token -> count (presence / frequency)
  std::vector<float> work_;
  std::vector<int32_t> order_;
  std::vector<double> weight_;  // exp(logit - max) of the candidates, by token id
};

}  // namespace memra
