// Private to src/engine: the engine thread's state (EngineImpl) and a request in flight (Active),
// shared by the files that implement it: engine_impl.cpp (submission, scheduling, generation,
// sampling, streaming) and engine_embed.cpp (the prefill-only embedding path).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_impl.h"
#include "engine/kv_block_manager.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/stop_matcher.h"
#include "models/model.h"
#include "structured/token_constraint.h"

namespace memra::detail {

// MEMRA_ENGINE_FAULT=step:N (tests of the error paths), read once per engine.
int64_t step_fault_from_env();

// A request in flight: its scheduling state plus sampling, detokenization and stop state.
struct Active : SeqState {
  Active(RequestId rid, Request req, const Tokenizer& tok, uint64_t seed)
      : id(rid),
        request(std::move(req)),
        sampler(request.sampling, request.prompt, seed),
        stops(request.stop.stop_strings),
        decoder(tok, /*skip_special=*/true) {}
  RequestId id;
  Request request;
  Sampler sampler;
  StopMatcher stops;
  StreamDecoder decoder;
  std::unique_ptr<structured::TokenConstraint> constraint;  // when request.grammar is set
  int32_t n_generated = 0;
  // RequestKind::embed: the pooled hidden state so far (mean: a sum over pooled_rows rows).
  std::vector<double> pool;
  int32_t pooled_rows = 0;
  bool done = false;  // its final event is out (or its sink failed): nothing more is sent
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineParts parts, const EngineOptions& options);
  ~EngineImpl() override;

  RequestId submit(Request request) override;
  void cancel(RequestId id) override;
  const Tokenizer& tokenizer() const override { return *parts_.tokenizer; }
  const ChatTemplate* chat_template() const override { return parts_.chat_template.get(); }
  const EngineModelInfo& model_info() const override { return parts_.info; }
  EngineStats stats() const override;

 private:
  uint64_t cache_budget(uint64_t& free_bytes, uint64_t& total_bytes) const;
  // Recurrent-state slots (models with linear-attention layers): the running sequences' and the
  // prefix cache's snapshots; both 0 for other models.
  struct StateSlotCounts {
    int32_t running = 0;
    int32_t snapshots = 0;
  };
  StateSlotCounts state_slots() const;
  int64_t default_kv_blocks(int64_t ctx_blocks, int32_t block_size, uint64_t reserved) const;
  void validate(const Request& r) const;
  std::shared_ptr<const structured::TokenVocabulary> vocabulary();
  void run();
  void iterate();
  void step();
  bool plain_greedy_step(const StepPlan& plan) const;
  void sample_row(Active& a, std::span<const float> row);
  // Steps sampled on the backend (engine_sample.cpp): the rows' parameters before the forward
  // pass, then each row's token from its RowResult.
  bool backend_sampling_step() const;
  void backend_rows_build(const StepPlan& plan);
  void backend_row(Active& a, size_t row);
  void backend_score_row(Active& a, size_t row);
  void on_token(Active& a, const GeneratedToken& token);
  void score_row(Active& a, std::span<const float> row);
  void finish(Active& a, StreamEvent& event, FinishReason reason);
  void finish_with_error(Active& a, std::string message);
  void fail_all_in_flight(const std::string& message);
  void erase_finished();
  void deliver(Active& a, StreamEvent& event);
  void publish_stats();
  // Prefill-only embedding steps (embed_scheduler_): KV blocks only while an input is prefilled.
  Scheduler& scheduler_of(const Active& a);
  bool embed_work() const;
  void embed_step();
  void pool_rows(Active& a, const float* rows, int32_t n_rows);
  void finish_embedding(Active& a);

  EngineParts parts_;
  EngineOptions options_;
  int32_t n_vocab_ = 0;   // logit rows the model writes
  int32_t n_tokens_ = 0;  // ids with a token: a padded checkpoint has more rows than tokens
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<KvBlockManager> blocks_;
  std::unique_ptr<StatePool> states_;  // recurrent-state slots (0 slots: the model has none)
  std::unique_ptr<StateSnapshots> snapshots_;  // the prefix cache's state snapshots (0: none)
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Scheduler> embed_scheduler_;  // RequestKind::embed: no prefix cache, no decode
  std::vector<float> hidden_;                   // an embedding step's final-norm rows
  std::unordered_map<RequestId, std::unique_ptr<Active>> active_;  // engine thread only
  std::vector<float> logits_;
  std::vector<int32_t> greedy_ids_;  // a plain greedy step's tokens (Model::forward_greedy)
  // A step sampled on the backend: each row's spec (its own parameter lists), the flattened
  // lists handed to Ops::sample_rows, the results, and a host row for deferred rows.
  struct BackendRows {
    std::vector<SampleSpec> specs;
    std::vector<uint8_t> blocked;  // 1: the grammar allows no token (an error, no draw)
    std::vector<sampling::RowParams> params;
    std::vector<sampling::Penalty> penalties;
    std::vector<sampling::Bias> bias;
    std::vector<uint64_t> mask_words;
    std::vector<sampling::RowResult> results;
    std::vector<float> row;
  };
  BackendRows backend_;
  std::vector<Active*> finished_;  // removed after the step's events are out
  // The token trie for constrained decoding, built by the first request with a grammar.
  std::once_flag vocabulary_once_;
  std::shared_ptr<const structured::TokenVocabulary> vocabulary_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Active>> inbox_;
  std::vector<RequestId> cancels_;
  bool stopping_ = false;
  std::string fatal_;  // why the engine stopped serving (stats_.fatal_error too), under mu_
  RequestId next_id_ = 1;
  uint64_t seed_base_ = 0;
  EngineStats stats_;
  int64_t fault_step_ = step_fault_from_env();  // engine thread only, as steps_started_
  int64_t steps_started_ = 0;
  std::thread thread_;
};

}  // namespace memra::detail
