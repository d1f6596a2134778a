// step_layout_build: one pass over the batch's sequences; `out` is reused across steps so its
// vectors keep their capacity. The graph bucket rules and padding of decode steps.
#include "models/step_layout.h"

#include <algorithm>

#include "core/error.h"

namespace memra {

void step_layout_build(const Batch& batch, int32_t block_size, int32_t n_blocks, int32_t n_vocab,
                       StepLayout& out, int32_t n_state_slots) {
  const int32_t n = batch.n_tokens();
  if (batch.positions.size() != batch.tokens.size())
    fail(ErrorCode::invalid_argument, "batch has {} tokens but {} positions", n,
         batch.positions.size());
  if (block_size <= 0) fail(ErrorCode::invalid_argument, "KV block size {} <= 0", block_size);
  for (int32_t id : batch.tokens)
    if (id < 0 || id >= n_vocab)
      fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary ({} rows)", id,
           n_vocab);
  out.block_size = block_size;
  out.tokens = batch.tokens;
  out.positions = batch.positions;
  out.slots.resize(n);
  out.token_seq.resize(n);
  out.max_blocks = 1;
  for (const BatchSeq& seq : batch.seqs)
    out.max_blocks = std::max(out.max_blocks, static_cast<int32_t>(seq.block_table.size()));
  out.block_tables.assign(batch.seqs.size() * static_cast<size_t>(out.max_blocks), -1);
  out.state_slots.resize(batch.seqs.size());
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
    if (n_state_slots > 0 && (seq.state_slot < 0 || seq.state_slot >= n_state_slots))
      fail(ErrorCode::invalid_argument,
           "batch sequence {} has state slot {}, outside the cache's {} state slots", s,
           seq.state_slot, n_state_slots);
    out.state_slots[s] = seq.state_slot;
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

std::vector<int32_t> graph_batch_buckets(int32_t max_batch, BucketGrain grain) {
  std::vector<int32_t> out;
  // Buckets come in ascending order; one the grain already passed is skipped.
  const auto add = [&](int64_t b) {
    if (b < max_batch && (out.empty() || b > out.back())) out.push_back(static_cast<int32_t>(b));
  };
  switch (grain) {
    case BucketGrain::coarse:
      for (int64_t b = 1; b <= 8; b *= 2) add(b);
      break;
    case BucketGrain::small:
      for (int64_t b = 1; b <= 8; ++b) add(b);
      add(12);
      break;
    case BucketGrain::fine:
      for (int64_t b = 1; b <= 16; ++b) add(b);
      for (int64_t b = 20; b <= 32; b += 4) add(b);
      for (int64_t b = 40; b <= 64; b += 8) add(b);
      break;
  }
  for (int64_t p = 16; p < max_batch; p *= 2) {  // powers of two and their midpoints
    add(p);
    add(p + p / 2);
  }
  if (max_batch >= 1) out.push_back(max_batch);
  return out;
}

int32_t graph_batch_bucket(const std::vector<int32_t>& buckets, int32_t n) {
  for (int32_t b : buckets)
    if (b >= n) return b;
  return 0;
}

int32_t graph_context_bucket(int32_t max_context, int32_t context_limit) {
  if (max_context > context_limit) return 0;
  int64_t c = 4096;
  while (c < max_context) c *= 2;
  return static_cast<int32_t>(std::min<int64_t>(c, context_limit));
}

bool step_is_pure_decode(const StepLayout& step) {
  const int32_t n = step.n_tokens();
  if (n == 0 || step.n_seqs() != n || step.n_logits() != n) return false;
  for (int32_t t = 0; t < n; ++t)
    if (step.token_seq[t] != t) return false;
  return true;
}

void graph_pad(StepLayout& step, int32_t n, int32_t max_blocks, int32_t context,
               int32_t scratch_block, int32_t scratch_state_slot) {
  const int32_t real = step.n_tokens();
  if (!step_is_pure_decode(step) || n < real || max_blocks < step.max_blocks ||
      context < step.max_context || int64_t{max_blocks} * step.block_size < context)
    fail(ErrorCode::internal,
         "graph_pad: a step of {} tokens, {} blocks per table, context {} does not fit {} tokens, "
         "{} blocks, context {}",
         real, step.max_blocks, step.max_context, n, max_blocks, context);
  std::vector<int32_t> tables(static_cast<size_t>(n) * max_blocks, -1);
  for (int32_t s = 0; s < real; ++s)
    std::copy_n(step.block_tables.begin() + int64_t{s} * step.max_blocks, step.max_blocks,
                tables.begin() + int64_t{s} * max_blocks);
  for (int32_t s = real; s < n; ++s) tables[static_cast<size_t>(s) * max_blocks] = scratch_block;
  step.block_tables = std::move(tables);
  step.state_slots.resize(n, scratch_state_slot);
  step.max_blocks = max_blocks;
  step.tokens.resize(n, 0);
  step.positions.resize(n, 0);
  step.slots.resize(n, scratch_block * step.block_size);
  for (int32_t t = real; t < n; ++t) step.token_seq.push_back(t);
  for (int32_t t = real; t < n; ++t) step.logit_rows.push_back(t);
  step.max_context = context;
}

}  // namespace memra
