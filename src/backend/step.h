// One engine step's metadata in the flat form backends consume: built once per step on the host
// (models/step_layout.cpp builds it from the engine's Batch) and handed to the backend once
// (Ops::step_begin), which keeps its own copy (device memory for CUDA). Per-layer ops then read it
// instead of receiving per-sequence block-table vectors again for every layer.
#pragma once

#include <cstdint>
#include <vector>

namespace memra {

struct StepLayout {
  int32_t block_size = 0;             // tokens per KV block
  std::vector<int32_t> tokens;        // [n_tokens] token ids, grouped by sequence
  std::vector<int32_t> positions;     // [n_tokens] position of each token in its sequence
  std::vector<int32_t> slots;         // [n_tokens] KV slot = block id * block_size + offset
  std::vector<int32_t> token_seq;     // [n_tokens] index of each token's sequence
  int32_t max_blocks = 0;             // row stride of block_tables
  std::vector<int32_t> block_tables;  // [n_seqs x max_blocks] block ids, -1 past the end
  std::vector<int32_t> state_slots;   // [n_seqs] recurrent-state slot per sequence, -1 for none
  std::vector<int32_t> logit_rows;    // token indices whose logits are wanted, in output order
  int32_t max_context = 0;            // largest position + 1 in the step

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_seqs() const {
    return max_blocks > 0 ? static_cast<int32_t>(block_tables.size()) / max_blocks : 0;
  }
  int32_t n_logits() const { return static_cast<int32_t>(logit_rows.size()); }
};

}  // namespace memra
