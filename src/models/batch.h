// One engine step's work, built once per step by the scheduler and passed to the model: the new
// tokens of every scheduled sequence (a prefill chunk or one decode token each), their positions,
// each sequence's KV block table, and which tokens need logits. Tokens are grouped by sequence.
#pragma once

#include <cstdint>
#include <vector>

namespace memra {

struct BatchSeq {
  int32_t first_token = 0;  // index of this sequence's first new token in Batch::tokens
  int32_t n_tokens = 0;     // new tokens this step (prefill chunk length, or 1 for decode)
  int32_t n_past = 0;       // tokens already in this sequence's KV cache (= position of the first)
  std::vector<int32_t> block_table;  // KV block ids covering positions [0, n_past + n_tokens)
  // The sequence's recurrent-state slot (models with linear-attention layers), -1 for none. It
  // holds the state after n_past tokens; n_past == 0 resets it.
  int32_t state_slot = -1;
};

struct Batch {
  std::vector<int32_t> tokens;     // [n_tokens]
  std::vector<int32_t> positions;  // [n_tokens]
  std::vector<BatchSeq> seqs;
  // Indices into `tokens` whose logits the caller wants, in the order rows are written (usually
  // the last token of each sequence that finishes its prefill or decodes).
  std::vector<int32_t> logit_tokens;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace memra
