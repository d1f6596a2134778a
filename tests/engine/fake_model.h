// Test doubles for the engine: a tokenizer whose tokens are single characters, and a model whose
// next-token logits depend on every token in its KV cache read back through the block table, so
// a wrong block table, a bad prefix-cache hit or a lost preemption changes the output. In its
// recurrent mode (a hybrid model's stand-in) the history comes from the sequence's state slot
// instead, which must hold exactly the sequence's n_past tokens: a slot shared, not reset or lost
// fails the step.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>

#include "core/error.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace memra::testing {

inline constexpr int32_t kFakeVocab = 40;
inline constexpr int32_t kFakeEos = 0;
inline constexpr int32_t kFakeBos = 1;

// Tokens 2..39 are the characters of kFakeChars.
inline constexpr const char* kFakeChars = "abcdefghijklmnopqrstuvwxyz .,!?ABCDEFGH";

class FakeTokenizer final : public Tokenizer {
 public:
  // poison: an id whose bytes cannot be read (throws as a real tokenizer's bad id does), to check
  // that one request's failure on the engine thread stays with that request.
  explicit FakeTokenizer(int32_t poison = -1) : poison_(poison) {}
  void to_gguf(gguf::Metadata&) const override {}
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override {
    std::vector<int32_t> ids;
    if (o.add_special) ids.push_back(kFakeBos);
    for (char c : text) {
      const char* p = std::strchr(kFakeChars, c);
      if (p == nullptr || c == 0) fail(ErrorCode::invalid_argument, "fake: no token for '{}'", c);
      ids.push_back(static_cast<int32_t>(p - kFakeChars) + 2);
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids)
      if (!(skip_special && is_special(id))) out += token_bytes(id);
    return out;
  }
  std::string token_bytes(int32_t id) const override {
    // Like BpeTokenizer::check_id: an id past the vocabulary (a padded logit row) throws.
    if (id < 0 || id >= kFakeVocab || id == poison_)
      fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary of {}", id,
           kFakeVocab);
    if (id == kFakeEos) return "</s>";
    if (id == kFakeBos) return "<s>";
    return std::string(1, kFakeChars[id - 2]);
  }
  const std::string& token_text(int32_t id) const override {
    static thread_local std::string s;
    s = token_bytes(id);
    return s;
  }
  int32_t n_vocab() const override { return kFakeVocab; }
  int32_t bos_id() const override { return kFakeBos; }
  std::vector<int32_t> eos_ids() const override { return {kFakeEos}; }
  bool is_special(int32_t id) const override { return id < 2; }
  std::string chat_template() const override { return {}; }

 private:
  int32_t poison_;
};

class FakeKvCache final : public KvCache {
 public:
  FakeKvCache(int32_t n_blocks, int32_t block_size, int32_t n_state_slots = 0)
      : n_blocks_(n_blocks),
        block_size_(block_size),
        slots_(static_cast<size_t>(n_blocks) * block_size, -1),
        states_(static_cast<size_t>(n_state_slots)) {}
  int32_t block_size() const override { return block_size_; }
  int32_t n_blocks() const override { return n_blocks_; }
  uint64_t bytes() const override { return slots_.size() * sizeof(int32_t); }
  int32_t n_state_slots() const override { return static_cast<int32_t>(states_.size()); }
  uint64_t state_bytes() const override { return states_.size() * 64; }
  // The "recurrent state" of a slot: the tokens the sequence has run through it so far.
  std::vector<int32_t>& state(int32_t slot) {
    if (slot < 0 || slot >= n_state_slots())
      fail(ErrorCode::invalid_argument, "fake: state slot {} outside {}", slot, n_state_slots());
    return states_[static_cast<size_t>(slot)];
  }
  // A prefix-cache state snapshot taken or restored: the whole token history moves.
  void copy_state_slot(int32_t src, int32_t dst) override { state(dst) = state(src); }
  void copy_block(int32_t src, int32_t dst) override {
    std::copy_n(slots_.begin() + src * block_size_, block_size_,
                slots_.begin() + dst * block_size_);
  }
  int32_t& slot(const std::vector<int32_t>& table, int32_t pos) {
    const int32_t block = table.at(static_cast<size_t>(pos / block_size_));
    return slots_.at(static_cast<size_t>(block * block_size_ + pos % block_size_));
  }

 private:
  int32_t n_blocks_, block_size_;
  std::vector<int32_t> slots_;  // one "KV entry" per slot: the token id written there
  std::vector<std::vector<int32_t>> states_;
};

// The next token after history h: a hash of h, avoiding EOS unless eos_after says so.
inline int32_t fake_next_token(std::span<const int32_t> history, int32_t eos_after = -1) {
  if (eos_after >= 0 && static_cast<int32_t>(history.size()) >= eos_after) return kFakeEos;
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return 2 + static_cast<int32_t>((h >> 17) % (kFakeVocab - 2));
}

inline constexpr int32_t kFakeEmbd = 4;

// The fake "final-norm hidden state" after history h: its length, last token, a hash, and 1.
inline std::array<float, kFakeEmbd> fake_hidden(std::span<const int32_t> history) {
  return {static_cast<float>(history.size()), static_cast<float>(history.back()),
          static_cast<float>(fake_next_token(history)), 1.0f};
}

class FakeModel final : public Model {
 public:
  // padded_rows: logit rows past the tokenizer's vocabulary, as padded HF checkpoints have
  // (Qwen2.5: 151,936 rows for ~151,665 tokens); they get the highest logit, so only masking keeps
  // them out.
  // recurrent: keeps a state per sequence (a hybrid model's stand-in), which the prefix cache
  // resumes from the engine's state snapshots.
  explicit FakeModel(int32_t n_ctx = 256, int32_t eos_after = -1, int32_t padded_rows = 0,
                     bool recurrent = false)
      : eos_after_(eos_after), n_rows_(kFakeVocab + padded_rows), recurrent_(recurrent) {
    info_.architecture = "fake";
    info_.n_vocab = n_rows_;
    info_.n_ctx_train = n_ctx;
    info_.n_embd = kFakeEmbd;
  }
  const ModelInfo& info() const override { return info_; }
  // Before the engine starts: a model that cannot resume from cached blocks at all.
  void refuse_prefix_cache(std::string why) { info_.prefix_cache_unsupported = std::move(why); }
  uint64_t kv_bytes_per_token() const override { return sizeof(int32_t); }
  uint64_t state_bytes_per_seq() const override { return recurrent_ ? 64 : 0; }
  using Model::kv_cache_create;
  std::unique_ptr<KvCache> kv_cache_create(int32_t n_blocks, int32_t bs,
                                           int32_t n_state_slots) const override {
    if (recurrent_ && n_state_slots < 1) fail(ErrorCode::invalid_argument, "fake: no state slots");
    return std::make_unique<FakeKvCache>(n_blocks, bs, recurrent_ ? n_state_slots : 0);
  }
  // Recurrent mode: runs each sequence's new tokens through its state slot (reset at n_past 0)
  // after checking that the slot holds exactly its n_past earlier tokens.
  void run_states(const Batch& batch, FakeKvCache& kv) {
    if (!recurrent_) return;
    for (const BatchSeq& s : batch.seqs) {
      std::vector<int32_t>& st = kv.state(s.state_slot);
      if (s.n_past == 0) st.clear();
      if (static_cast<int32_t>(st.size()) != s.n_past)
        fail(ErrorCode::internal, "fake: state slot {} holds {} tokens, the sequence {}",
             s.state_slot, st.size(), s.n_past);
      for (int32_t i = 0; i < s.n_tokens; ++i)
        st.push_back(batch.tokens[static_cast<size_t>(s.first_token + i)]);
    }
  }
  // The history a logit row sees: from the KV slots, or (recurrent) from the state slot.
  std::vector<int32_t> history_of(FakeKvCache& kv, const BatchSeq& seq, int32_t pos) const {
    if (recurrent_) {
      const std::vector<int32_t>& st = kv.state(seq.state_slot);
      return {st.begin(), st.begin() + pos + 1};
    }
    std::vector<int32_t> history;
    for (int32_t p = 0; p <= pos; ++p) history.push_back(kv.slot(seq.block_table, p));
    return history;
  }
  // Writes each token into its slot, then for each logit row rebuilds the history from the KV
  // slots (through the block table) and puts a peak of 10 on the next token, sloping off.
  void forward(const Batch& batch, KvCache& kv_base, std::span<float> logits) override {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    if (fail_forward) fail(ErrorCode::internal, "injected device fault");
    auto& kv = static_cast<FakeKvCache&>(kv_base);
    ++forwards;
    max_batch_tokens_seen = std::max(max_batch_tokens_seen.load(), batch.n_tokens());
    for (const BatchSeq& s : batch.seqs)
      for (int32_t i = 0; i < s.n_tokens; ++i)
        kv.slot(s.block_table, s.n_past + i) = batch.tokens[static_cast<size_t>(s.first_token + i)];
    run_states(batch, kv);
    for (size_t row = 0; row < batch.logit_tokens.size(); ++row) {
      const int32_t t = batch.logit_tokens[row];
      const BatchSeq* seq = nullptr;
      for (const BatchSeq& s : batch.seqs)
        if (t >= s.first_token && t < s.first_token + s.n_tokens) seq = &s;
      const int32_t pos = batch.positions[static_cast<size_t>(t)];
      const std::vector<int32_t> history = history_of(kv, *seq, pos);
      const int32_t next = fake_next_token(history, eos_after_);
      float* out = logits.data() + row * n_rows_;
      for (int32_t v = 0; v < kFakeVocab; ++v)
        out[v] = 10.0f - 0.5f * static_cast<float>((v - next + kFakeVocab) % kFakeVocab);
      for (int32_t v = kFakeVocab; v < n_rows_; ++v) out[v] = 20.0f;
    }
  }

  // Hidden row of a token: fake_hidden of its history read back from the KV slots.
  void forward_hidden(const Batch& batch, KvCache& kv_base, std::span<float> hidden) override {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    auto& kv = static_cast<FakeKvCache&>(kv_base);
    ++forwards;
    for (const BatchSeq& s : batch.seqs)
      for (int32_t i = 0; i < s.n_tokens; ++i)
        kv.slot(s.block_table, s.n_past + i) = batch.tokens[static_cast<size_t>(s.first_token + i)];
    run_states(batch, kv);
    for (size_t row = 0; row < batch.logit_tokens.size(); ++row) {
      const int32_t t = batch.logit_tokens[row];
      const BatchSeq* seq = nullptr;
      for (const BatchSeq& s : batch.seqs)
        if (t >= s.first_token && t < s.first_token + s.n_tokens) seq = &s;
      const int32_t pos = batch.positions[static_cast<size_t>(t)];
      const std::vector<int32_t> history = history_of(kv, *seq, pos);
      const std::array<float, kFakeEmbd> h = fake_hidden(history);
      std::copy(h.begin(), h.end(), hidden.begin() + static_cast<std::ptrdiff_t>(row * kFakeEmbd));
    }
  }

  std::atomic<int> delay_ms{0};
  std::atomic<bool> fail_forward{false};  // every forward throws (a device fault)
  std::atomic<int> forwards{0};
  std::atomic<int32_t> max_batch_tokens_seen{0};

 private:
  ModelInfo info_;
  int32_t eos_after_;
  int32_t n_rows_;
  bool recurrent_;
};

}  // namespace memra::testing
