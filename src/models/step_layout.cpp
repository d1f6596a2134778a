// step_layout_build: one pass over the batch's sequences; `out` is reused across steps so its
// vectors keep their capacity.
#include "models/step_layout.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

void step_layout_build(const Batch& batch, int32_t block_size, int32_t n_blocks, StepLayout& out) {
  const int32_t n = batch.n_tokens();
  if (batch.positions.size() != batch.tokens.size())
    fail(ErrorCode::invalid_argument, "batch has {} tokens but {} positions", n,
         batch.positions.size());
  if (block_size <= 0) fail(ErrorCode::invalid_argument, "KV block size {} <= 0", block_size);
  out.block_size = block_size;
  out.tokens = batch.tokens;
  out.positions = batch.positions;
  out.slots.resize(n);
  out.token_seq.resize(n);
  out.max_blocks = 1;
  for (const BatchSeq& seq : batch.seqs)
    out.max_blocks = std::max(out.max_blocks, static_cast<int32_t>(seq.block_table.size()));
  out.block_tables.assign(batch.seqs.size() * static_cast<size_t>(out.max_blocks), -1);
  out.max_context = 0;
  int32_t next = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const BatchSeq& seq = batch.seqs[s];
    if (seq.first_token != next || seq.n_tokens <= 0 || seq.n_past < 0 || next + seq.n_tokens > n)
      fail(ErrorCode::invalid_argument, "batch sequence at token {} is not contiguous", next);
    const int64_t end = int64_t{seq.n_past} + seq.n_tokens;
    if (static_cast<int64_t>(seq.block_table.size()) * block_size < end)
      fail(ErrorCode::invalid_argument, "block table of {} blocks does not cover position {}",
           seq.block_table.size(), end - 1);
    for (size_t b = 0; b < seq.block_table.size(); ++b) {
      const int32_t id = seq.block_table[b];
      if (id < 0 || id >= n_blocks)
        fail(ErrorCode::invalid_argument, "KV block id {} outside the cache's {} blocks", id,
             n_blocks);
      out.block_tables[s * out.max_blocks + b] = id;
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int32_t t = next + i, pos = seq.n_past + i;
      if (batch.positions[t] != pos)
        fail(ErrorCode::invalid_argument, "token {} has position {}, expected n_past + {} = {}", t,
             batch.positions[t], i, pos);
      out.slots[t] = seq.block_table[pos / block_size] * block_size + pos % block_size;
      out.token_seq[t] = static_cast<int32_t>(s);
    }
    out.max_context = std::max(out.max_context, static_cast<int32_t>(end));
    next += seq.n_tokens;
  }
  if (next != n)
    fail(ErrorCode::invalid_argument, "batch sequences cover {} of {} tokens", next, n);
  for (int32_t t : batch.logit_tokens)
    if (t < 0 || t >= n) fail(ErrorCode::invalid_argument, "logit token {} outside the batch", t);
  out.logit_rows = batch.logit_tokens;
}

}  // namespace memra
