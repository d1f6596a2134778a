// The engine thread: takes submissions and cancellations at step boundaries, runs one scheduled
// batch through the model per step, samples, applies stop conditions and streams events. Only
// this thread touches sequences, the scheduler and the KV cache; submit/cancel/stats share a
// mutex-guarded inbox with it.
#include "engine/engine_impl.h"
#include "engine/engine_thread.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "engine/backend_select.h"
#include "engine/kv_block_manager.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/state_snapshots.h"
#include "engine/stop_matcher.h"
#include "models/model.h"
#include "structured/token_constraint.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace memra {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "none";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "unknown";
}

namespace detail {

constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 1024;
constexpr size_t kMaxStopTokenIds = 1024;
constexpr uint64_t kDefaultKvMaxBytes = 1ull << 30;  // when kv_blocks = 0

// Fault injection for tests of the error paths (never set in production): MEMRA_ENGINE_FAULT=
// step:N makes the N-th engine step (1-based) throw before its forward pass, as a transient bug
// would: only that step's requests fail and the engine serves on. 0 = off.
int64_t step_fault_from_env() {
  const char* v = std::getenv("MEMRA_ENGINE_FAULT");
  if (!v || !*v) return 0;
  const std::string s(v);
  char* end = nullptr;
  const long long n = s.starts_with("step:") ? std::strtoll(s.c_str() + 5, &end, 10) : 0;
  if (n <= 0 || !end || *end)
    fail(ErrorCode::invalid_argument, "MEMRA_ENGINE_FAULT={} is not step:N (N >= 1)", s);
  return n;
}

EngineImpl::EngineImpl(EngineParts parts, const EngineOptions& options)
    : parts_(std::move(parts)), options_(options) {
  const ModelInfo& mi = parts_.model->info();
  n_vocab_ = mi.n_vocab;
  // Rows past the tokenizer's end (HF checkpoints pad the embedding to a multiple of 64 or 128)
  // have no bytes to stream: they are cut from every row before sampling, so never drawn.
  n_tokens_ = std::min(n_vocab_, parts_.tokenizer->n_vocab());
  int32_t ctx = options_.context_length;
  const int32_t trained = mi.n_ctx_train > 0 ? mi.n_ctx_train : 8192;
  if (ctx == 0) ctx = std::min(trained, 8192);
  if (ctx < 2 || ctx > trained)
    fail(ErrorCode::invalid_argument,
         "context length {} is outside [2, {}] (the model's trained "
         "context length)",
         ctx, trained);
  const int32_t bs = options_.kv_block_size;
  if (bs <= 0 || bs > 1024)
    fail(ErrorCode::invalid_argument, "kv_block_size {} is outside [1, 1024]", bs);
  const int64_t ctx_blocks = (ctx + bs - 1) / bs;
  // Before the KV cache is sized: the model's step buffers (and graph buckets) take their memory.
  const std::vector<int32_t> buckets = parts_.model->prepare(
      {options_.max_batch_tokens, options_.max_sequences, ctx, options_.cuda_graphs});
  if (!buckets.empty()) {
    std::string list;
    for (int32_t b : buckets) {
      if (!list.empty()) list += ',';
      list += std::to_string(b);
    }
    MEMRA_LOG_INFO(
        "engine: CUDA graphs for decode steps of {} sequences (contexts in buckets "
        "of 4096 x 2^k up to {}), recorded on first use",
        list, ctx);
  } else if (parts_.ops && !parts_.ops->host_memory()) {
    MEMRA_LOG_INFO("engine: CUDA graphs off, every step runs eagerly");
  }
  const StateSlotCounts slots = state_slots();
  const int32_t n_slots = slots.running + slots.snapshots;
  const uint64_t state_reserved = uint64_t(n_slots) * parts_.model->state_bytes_per_seq();
  int64_t n_blocks = options_.kv_blocks;
  if (n_blocks == 0) n_blocks = default_kv_blocks(ctx_blocks, bs, state_reserved);
  if (n_blocks < ctx_blocks || n_blocks > (1 << 24))
    fail(ErrorCode::invalid_argument,
         "kv_blocks {} cannot hold one full context of {} tokens "
         "({} blocks of {}) or exceeds 2^24",
         n_blocks, ctx, ctx_blocks, bs);
  parts_.info.context_length = ctx;
  parts_.info.n_vocab = n_vocab_;
  kv_ = parts_.model->kv_cache_create(static_cast<int32_t>(n_blocks), bs, n_slots);
  parts_.info.kv_cache_bytes = kv_->bytes();
  parts_.info.state_bytes = kv_->state_bytes();
  MEMRA_LOG_INFO("engine: {} on {}, weights {} bytes, KV cache {} blocks of {} tokens = {} bytes{}",
                 parts_.info.id.empty() ? parts_.info.architecture : parts_.info.id,
                 parts_.info.device.empty() ? "host" : parts_.info.device, parts_.info.weight_bytes,
                 n_blocks, bs, parts_.info.kv_cache_bytes,
                 n_slots > 0 ? fmt::format(", recurrent state {} + {} snapshot slots = {} bytes",
                                           slots.running, slots.snapshots, parts_.info.state_bytes)
                             : std::string());
  // A model whose sequences cannot resume from cached blocks alone must not reuse them: every
  // new request would silently skip what its cached prefix left outside the KV. Models with
  // recurrent state resume from state snapshots, so they need snapshot slots.
  std::string no_cache = mi.prefix_cache_unsupported;
  if (no_cache.empty() && slots.running > 0 && slots.snapshots == 0)
    no_cache = "it keeps a recurrent state per sequence and has no state snapshot slots";
  parts_.info.prefix_cache = options_.prefix_cache && no_cache.empty();
  if (options_.prefix_cache && !no_cache.empty()) {
    parts_.info.prefix_cache_off_reason = no_cache;
    MEMRA_LOG_INFO("engine: prefix cache off for {}: {}", mi.architecture, no_cache);
  }
  blocks_ = std::make_unique<KvBlockManager>(static_cast<int32_t>(n_blocks), bs,
                                             parts_.info.prefix_cache);
  states_ = std::make_unique<StatePool>(slots.running);
  // Snapshot slots follow the running ones in the cache's slot ids.
  snapshots_ = std::make_unique<StateSnapshots>(slots.running,
                                                parts_.info.prefix_cache ? slots.snapshots : 0);
  blocks_->on_evict([snaps = snapshots_.get()](uint64_t hash) { snaps->drop(hash); });
  scheduler_ = std::make_unique<Scheduler>(
      *blocks_,
      SchedulerOptions{options_.max_batch_tokens, options_.max_sequences, parts_.info.prefix_cache},
      states_.get(), snapshots_.get());
  embed_scheduler_ = std::make_unique<Scheduler>(
      *blocks_, SchedulerOptions{options_.max_batch_tokens, options_.max_sequences, false},
      states_.get());
  if (options_.max_queued <= 0)
    fail(ErrorCode::invalid_argument, "max_queued {} must be > 0", options_.max_queued);
  seed_base_ = std::random_device{}();
  stats_.kv_blocks_total = static_cast<int32_t>(n_blocks);
  stats_.state_slots_total = slots.running;
  stats_.state_snapshots_total = snapshots_->n_slots();
  thread_ = std::thread([this] { run(); });
}

// The bytes the KV cache and the recurrent state may take: 1 GiB on the host, or
// gpu_memory_fraction of the device memory free after the weights (free and total set then).
uint64_t EngineImpl::cache_budget(uint64_t& free_bytes, uint64_t& total_bytes) const {
  free_bytes = total_bytes = 0;
  if (!parts_.ops || !backend_memory(*parts_.ops, free_bytes, total_bytes))
    return kDefaultKvMaxBytes;
  const double f = options_.gpu_memory_fraction;
  if (!(f > 0.0 && f <= 1.0))
    fail(ErrorCode::invalid_argument, "gpu_memory_fraction {} is outside (0, 1]", f);
  return static_cast<uint64_t>(static_cast<double>(free_bytes) * f);
}

// Recurrent-state slots (models with linear-attention layers): one per sequence that may run,
// max_sequences, but at most half the cache budget and never fewer than one; then the prefix
// cache's snapshot slots: state_snapshots, or by default as many as max_sequences in what the
// running slots leave of that half (possibly none).
EngineImpl::StateSlotCounts EngineImpl::state_slots() const {
  const uint64_t per_seq = parts_.model->state_bytes_per_seq();
  if (per_seq == 0) return {};
  if (options_.state_snapshots < -1 || options_.state_snapshots > (1 << 16))
    fail(ErrorCode::invalid_argument, "state_snapshots {} is outside [-1, 65536]",
         options_.state_snapshots);
  uint64_t free_bytes = 0, total_bytes = 0;
  const uint64_t fit = cache_budget(free_bytes, total_bytes) / 2 / per_seq;
  const uint64_t max_seqs = uint64_t(options_.max_sequences);
  StateSlotCounts counts;
  counts.running = static_cast<int32_t>(std::min(std::max<uint64_t>(1, fit), max_seqs));
  const uint64_t left = fit > uint64_t(counts.running) ? fit - counts.running : 0;
  counts.snapshots = options_.state_snapshots >= 0 ? options_.state_snapshots
                                                   : static_cast<int32_t>(std::min(left, max_seqs));
  // No prefix cache (turned off, or a model that cannot resume from cached blocks at all):
  // nothing would use them, so their memory stays with the KV cache.
  if (!options_.prefix_cache || !parts_.model->info().prefix_cache_unsupported.empty())
    counts.snapshots = 0;
  return counts;
}

// Enough blocks for max_sequences full contexts, capped by the cache budget less the recurrent
// state's `reserved` bytes; never less than one context.
int64_t EngineImpl::default_kv_blocks(int64_t ctx_blocks, int32_t block_size,
                                      uint64_t reserved) const {
  const uint64_t per_block =
      std::max<uint64_t>(1, parts_.model->kv_bytes_per_token() * uint64_t(block_size));
  uint64_t free_bytes = 0, total_bytes = 0;
  uint64_t budget = cache_budget(free_bytes, total_bytes);
  budget = budget > reserved ? budget - reserved : 0;
  if (total_bytes > 0) {
    const double f = options_.gpu_memory_fraction;
    if (budget / per_block < static_cast<uint64_t>(ctx_blocks))
      fail(ErrorCode::resource_exhausted,
           "the KV cache for one context of {} blocks needs {} bytes; {} of {} bytes of GPU memory "
           "are free after the weights (gpu_memory_fraction {})",
           ctx_blocks, ctx_blocks * per_block, free_bytes, total_bytes, f);
  }
  const int64_t by_bytes = static_cast<int64_t>(std::min<uint64_t>(budget / per_block, 1 << 24));
  return std::max(ctx_blocks, std::min(ctx_blocks * options_.max_sequences, by_bytes));
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineImpl::validate(const Request& r) const {
  const int32_t ctx = parts_.info.context_length;
  if (!r.sink) fail(ErrorCode::invalid_argument, "request has no sink");
  if (r.prompt.empty()) fail(ErrorCode::invalid_argument, "prompt is empty");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= n_tokens_)
      fail(ErrorCode::invalid_argument, "prompt token id {} is outside the vocabulary [0, {})", id,
           n_tokens_);
  if (r.kind == RequestKind::embed) {
    if (parts_.model->info().n_embd <= 0)
      fail(ErrorCode::unsupported, "the {} model exposes no hidden states: no embeddings",
           parts_.model->info().architecture);
    if (static_cast<int64_t>(r.prompt.size()) > ctx)
      fail(ErrorCode::invalid_argument,
           "the input ({} tokens) exceeds the context length ({} tokens)", r.prompt.size(), ctx);
    if (r.grammar) fail(ErrorCode::invalid_argument, "an embedding request cannot have a grammar");
    return;
  }
  if (r.kind == RequestKind::score) {
    if (r.score_token_ids.empty() || r.score_token_ids.size() > 16)
      fail(ErrorCode::invalid_argument, "a score request needs 1 to 16 score token ids, got {}",
           r.score_token_ids.size());
    for (int32_t id : r.score_token_ids)
      if (id < 0 || id >= n_tokens_)
        fail(ErrorCode::invalid_argument, "score token id {} is outside the vocabulary [0, {})", id,
             n_tokens_);
    if (static_cast<int64_t>(r.prompt.size()) > ctx)
      fail(ErrorCode::invalid_argument,
           "the prompt ({} tokens) exceeds the context length ({} tokens)", r.prompt.size(), ctx);
    if (r.grammar) fail(ErrorCode::invalid_argument, "a score request cannot have a grammar");
    return;
  }
  if (r.stop.max_tokens < 1)
    fail(ErrorCode::invalid_argument, "max_tokens {} must be at least 1", r.stop.max_tokens);
  const int64_t need = static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens;
  if (need > ctx)
    fail(ErrorCode::invalid_argument,
         "prompt ({} tokens) + max_tokens ({}) = {} exceeds the "
         "context length ({})",
         r.prompt.size(), r.stop.max_tokens, need, ctx);
  sampling_params_validate(r.sampling, n_tokens_);
  if (r.stop.stop_strings.size() > kMaxStopStrings)
    fail(ErrorCode::invalid_argument, "{} stop strings, at most {} allowed",
         r.stop.stop_strings.size(), kMaxStopStrings);
  for (const std::string& s : r.stop.stop_strings)
    if (s.size() > kMaxStopBytes)
      fail(ErrorCode::invalid_argument, "a stop string of {} bytes exceeds {} bytes", s.size(),
           kMaxStopBytes);
  if (r.stop.stop_token_ids.size() > kMaxStopTokenIds)
    fail(ErrorCode::invalid_argument, "{} stop token ids, at most {} allowed",
         r.stop.stop_token_ids.size(), kMaxStopTokenIds);
  for (int32_t id : r.stop.stop_token_ids)
    if (id < 0 || id >= n_tokens_)
      fail(ErrorCode::invalid_argument, "stop token id {} is outside the vocabulary [0, {})", id,
           n_tokens_);
  if (r.grammar && r.stop.ignore_eos)
    fail(ErrorCode::invalid_argument,
         "ignore_eos cannot be combined with a grammar: a complete grammar ends generation");
}

// Built on the submitting thread (a 262k vocabulary takes a noticeable moment), once per engine.
std::shared_ptr<const structured::TokenVocabulary> EngineImpl::vocabulary() {
  std::call_once(vocabulary_once_, [this] {
    const Tokenizer& tok = *parts_.tokenizer;
    std::vector<std::string> bytes(static_cast<size_t>(n_vocab_));
    std::vector<bool> usable(static_cast<size_t>(n_vocab_), false);
    for (int32_t id = 0; id < std::min(n_vocab_, tok.n_vocab()); ++id) {
      usable[id] = !tok.is_special(id);
      if (usable[id]) bytes[id] = tok.token_bytes(id);
    }
    vocabulary_ = std::make_shared<structured::TokenVocabulary>(bytes, usable, parts_.eos_ids);
  });
  return vocabulary_;
}

RequestId EngineImpl::submit(Request request) {
  validate(request);
  std::unique_ptr<structured::TokenConstraint> constraint;
  if (request.grammar)
    constraint = std::make_unique<structured::TokenConstraint>(request.grammar, vocabulary());
  std::unique_lock lock(mu_);
  if (stopping_) fail(ErrorCode::resource_exhausted, "engine is shutting down");
  if (!fatal_.empty()) fail(ErrorCode::internal, "the engine stopped serving: {}", fatal_);
  if (static_cast<int32_t>(inbox_.size()) + stats_.queued >= options_.max_queued)
    fail(ErrorCode::resource_exhausted, "request queue is full ({} waiting)", options_.max_queued);
  const RequestId id = next_id_++;
  const uint64_t seed = request.sampling.seed.value_or(seed_base_ ^ (id * 0x9e3779b97f4a7c15ull));
  auto a = std::make_unique<Active>(id, std::move(request), *parts_.tokenizer, seed);
  a->constraint = std::move(constraint);
  a->order = id;
  a->tokens = a->request.prompt;
  inbox_.push_back(std::move(a));
  lock.unlock();
  cv_.notify_all();
  return id;
}

void EngineImpl::cancel(RequestId id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.queued += static_cast<int32_t>(inbox_.size());
  return s;
}

void EngineImpl::publish_stats() {
  const KvBlockStats kv = blocks_->stats();
  const GraphStats graphs = parts_.ops ? parts_.ops->graph_stats() : GraphStats{};
  std::lock_guard lock(mu_);
  stats_.graphs_recorded_total = graphs.recorded;
  stats_.graph_recordings_failed_total = graphs.failed;
  stats_.graph_replays_total = graphs.replays;
  stats_.queued = scheduler_->n_waiting() + embed_scheduler_->n_waiting();
  stats_.running = scheduler_->n_running() + embed_scheduler_->n_running();
  stats_.kv_blocks_used = kv.used;
  stats_.state_slots_used = states_->n_used();
  const StateSnapshotStats snaps = snapshots_->stats();
  stats_.state_snapshots_used = snaps.used;
  stats_.state_snapshot_restores_total = snaps.restored;
  stats_.preemptions_total = scheduler_->n_preemptions();
}

void EngineImpl::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !cancels_.empty() || !active_.empty();
      });
      if (stopping_) break;
    }
    try {
      iterate();
    } catch (const std::exception& e) {
      // Last resort: per-row failures are caught in step(); anything reaching here is a bug in the
      // engine itself. Fail what is in flight rather than let the exception end the process.
      MEMRA_LOG_ERROR("engine iteration failed: {}", e.what());
      fail_all_in_flight(std::string("internal engine error: ") + e.what());
    }
  }
  // Shutdown: everything still pending finishes as cancelled (sinks run without the lock held).
  std::deque<std::unique_ptr<Active>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(inbox_);
  }
  for (auto& a : pending) active_.emplace(a->id, std::move(a));
  for (auto& [id, a] : active_) {
    if (a->done) continue;
    StreamEvent event;
    finish(*a, event, FinishReason::cancelled);
    deliver(*a, event);
  }
  finished_.clear();
  active_.clear();
}

// One loop turn: admit submissions, apply cancellations (each request gets one final event, even
// when it is cancelled twice in one turn), run a step, publish stats.
void EngineImpl::iterate() {
  std::deque<std::unique_ptr<Active>> incoming;
  std::vector<RequestId> cancels;
  {
    std::lock_guard lock(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& a : incoming) {
    Active* raw = a.get();
    active_.emplace(a->id, std::move(a));
    scheduler_of(*raw).add(raw);
  }
  for (RequestId id : cancels) {
    auto it = active_.find(id);
    if (it == active_.end() || it->second->done) continue;
    StreamEvent event;
    finish(*it->second, event, FinishReason::cancelled);
    deliver(*it->second, event);
  }
  erase_finished();
  if (scheduler_->n_waiting() + scheduler_->n_running() > 0) step();
  if (embed_work()) embed_step();
  publish_stats();
}

void EngineImpl::erase_finished() {
  for (Active* a : finished_) active_.erase(a->id);
  finished_.clear();
}

// Sends every unfinished request an error event and drops it, without trusting the scheduler
// (it may be what failed).
void EngineImpl::fail_all_in_flight(const std::string& message) {
  std::deque<std::unique_ptr<Active>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(inbox_);
  }
  for (auto& a : pending) active_.emplace(a->id, std::move(a));
  for (auto& [id, a] : active_) {
    if (a->done) continue;
    try {
      scheduler_of(*a).remove(a.get());
    } catch (const std::exception& e) {
      MEMRA_LOG_ERROR("request {}: freeing its sequence failed: {}", id, e.what());
    }
    a->done = true;
    StreamEvent event;
    event.finish = FinishReason::error;
    event.error = message;
    deliver(*a, event);
  }
  finished_.clear();
  active_.clear();
}

void EngineImpl::step() {
  StepPlan plan = scheduler_->schedule();
  if (plan.seqs.empty()) {
    // Embedding prefills hold the blocks for now: they free them within a few steps.
    if (embed_scheduler_->n_running() > 0) return;
    // Only possible when a queued sequence cannot get a single KV slot with nothing running;
    // submit() and the cache sizing rule this out, so report it rather than spin.
    for (auto& [id, a] : active_) {
      if (a->done || a->request.kind != RequestKind::generate) continue;
      StreamEvent event;
      event.error = "the KV cache cannot hold this request";
      finish(*a, event, FinishReason::error);
      deliver(*a, event);
    }
    return;
  }
  const size_t rows = plan.batch.logit_tokens.size();
  const bool greedy = plain_greedy_step(plan);
  const bool on_backend = !greedy && backend_sampling_step();
  try {
    if (++steps_started_ == fault_step_)
      fail(ErrorCode::internal, "injected step fault (MEMRA_ENGINE_FAULT=step:{})", fault_step_);
    // Admissions resuming from a prefix-cache state snapshot: their slots before the forward.
    for (const StateCopy& c : plan.state_restores) kv_->copy_state_slot(c.src, c.dst);
    if (greedy) {
      greedy_ids_.resize(rows);
      parts_.model->forward_greedy(plan.batch, *kv_, n_tokens_, greedy_ids_);
    } else if (on_backend) {
      backend_rows_build(plan);
      const SampleRows sample_rows{backend_.params, backend_.penalties, backend_.bias,
                                   backend_.mask_words};
      parts_.model->forward_sample(plan.batch, *kv_, n_tokens_, sample_rows, backend_.results);
    } else {
      logits_.resize(rows * static_cast<size_t>(n_vocab_));
      parts_.model->forward(plan.batch, *kv_, logits_);
    }
  } catch (const std::exception& e) {
    MEMRA_LOG_ERROR("engine step failed: {}", e.what());
    // A sticky device error leaves the context unusable: stop serving rather than return wrong
    // tokens from later steps. Recorded before any sink hears of the failure, so a client that
    // sees its error and asks for stats sees the reason.
    const std::string why = parts_.ops ? parts_.ops->fatal_error() : std::string();
    if (!why.empty()) {
      MEMRA_LOG_ERROR("engine stopped: the device is unusable ({}); restart the process", why);
      std::lock_guard lock(mu_);
      fatal_ = why;
      stats_.fatal_error = why;
    }
    for (SeqState* seq : plan.seqs) {
      Active& a = static_cast<Active&>(*seq);
      finish_with_error(a, e.what());
    }
    if (!why.empty()) {
      erase_finished();
      fail_all_in_flight("the engine stopped serving: the device is unusable (" + why + ")");
    }
    return;
  }
  // State snapshots at block boundaries, before the next step writes the sequences' slots.
  for (const StateCopy& c : scheduler_->complete(plan)) kv_->copy_state_slot(c.src, c.dst);
  uint64_t prompt_tokens = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const Active& a = static_cast<const Active&>(*plan.seqs[i]);
    const int32_t first = plan.batch.seqs[i].n_past;
    const int32_t end = first + plan.batch.seqs[i].n_tokens;
    const int32_t n_prompt = static_cast<int32_t>(a.request.prompt.size());
    prompt_tokens += static_cast<uint64_t>(std::max(0, std::min(end, n_prompt) - first));
  }
  uint64_t scored = 0;
  for (size_t j = 0; j < rows; ++j) {
    Active& a = static_cast<Active&>(*plan.logit_seqs[j]);
    if (a.done) continue;
    try {
      if (a.request.kind == RequestKind::score) {
        ++scored;
        if (on_backend)
          backend_score_row(a, j);
        else
          score_row(a, std::span<const float>(logits_.data() + j * n_vocab_,
                                              static_cast<size_t>(n_vocab_)));
      } else if (greedy) {
        on_token(a, GeneratedToken{greedy_ids_[j], 0.0f, {}});
      } else if (on_backend) {
        backend_row(a, j);
      } else {
        // Only the rows with a token: padded rows past the tokenizer are never candidates.
        sample_row(a, std::span<const float>(logits_.data() + j * n_vocab_,
                                             static_cast<size_t>(n_tokens_)));
      }
    } catch (const std::exception& e) {
      // Sampling, the grammar, detokenizing or a stop check failed for this request only.
      MEMRA_LOG_ERROR("request {} failed: {}", a.id, e.what());
      if (!a.done) finish_with_error(a, e.what());
    }
  }
  erase_finished();
  std::lock_guard lock(mu_);
  stats_.steps_total += 1;
  stats_.prompt_tokens_total += prompt_tokens;
  stats_.generated_tokens_total += rows - scored;
}

Scheduler& EngineImpl::scheduler_of(const Active& a) {
  return a.request.kind == RequestKind::embed ? *embed_scheduler_ : *scheduler_;
}

bool EngineImpl::plain_greedy_step(const StepPlan& plan) const {
  for (SeqState* seq : plan.logit_seqs) {
    const Active& a = static_cast<const Active&>(*seq);
    if (!a.done &&
        (a.constraint || !a.sampler.plain_greedy() || a.request.kind == RequestKind::score))
      return false;
  }
  return !plan.logit_seqs.empty();
}

void EngineImpl::sample_row(Active& a, std::span<const float> row) {
  if (!a.constraint) return on_token(a, a.sampler.sample(row));
  const structured::TokenMask& allowed = a.constraint->allowed();
  if (std::none_of(allowed.words.begin(), allowed.words.end(), [](uint64_t w) { return w; }))
    return finish_with_error(
        a, "the output grammar cannot continue with any token of this vocabulary");
  GeneratedToken token = a.sampler.sample(row, &allowed);
  if (!allowed.allows(token.id))  // greedy, when every allowed logit is -inf or NaN
    return finish_with_error(
        a, "the model gave no finite logit to any token the output grammar allows");
  on_token(a, token);
}

// A score request ends at its first logit row: the logits of its ids, no token.
void EngineImpl::score_row(Active& a, std::span<const float> row) {
  StreamEvent event;
  for (int32_t id : a.request.score_token_ids) event.scores.push_back(row[id]);
  finish(a, event, FinishReason::stop);
  deliver(a, event);
}

void EngineImpl::on_token(Active& a, const GeneratedToken& token) {
  if (a.constraint) a.constraint->accept(token.id);
  a.sampler.accept(token.id);
  a.tokens.push_back(token.id);
  ++a.n_generated;
  StreamEvent event;
  event.tokens.push_back(token);
  const StopConditions& stop = a.request.stop;
  const bool is_eos = !stop.ignore_eos && std::find(parts_.eos_ids.begin(), parts_.eos_ids.end(),
                                                    token.id) != parts_.eos_ids.end();
  const bool is_stop_id = std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(),
                                    token.id) != stop.stop_token_ids.end();
  FinishReason reason = FinishReason::none;
  if (is_eos || is_stop_id) {
    reason = FinishReason::stop;  // the stop token itself is not part of the text
  } else {
    StopMatcher::Result r = a.stops.push(a.decoder.push(token.id));
    event.text = std::move(r.text);
    if (r.stopped) {
      reason = FinishReason::stop;
      event.matched_stop = std::move(r.matched);
    } else if (a.constraint && a.constraint->finished()) {
      reason = FinishReason::stop;  // the grammar is complete: only EOS could follow
    }
  }
  const int32_t ctx = parts_.info.context_length;
  if (reason == FinishReason::none &&
      (a.n_generated >= stop.max_tokens || static_cast<int32_t>(a.tokens.size()) >= ctx))
    reason = FinishReason::length;
  if (reason != FinishReason::none && event.matched_stop.empty()) {
    // Generation ends here: release the decoder's pending bytes and the stop-string hold-back,
    // which may still complete a stop string.
    StopMatcher::Result r = a.stops.push(a.decoder.flush());
    event.text += r.text;
    if (r.stopped) {
      reason = FinishReason::stop;
      event.matched_stop = std::move(r.matched);
    } else {
      event.text += a.stops.flush();
    }
  }
  if (reason != FinishReason::none) finish(a, event, reason);
  deliver(a, event);
}

// Marks a sequence finished: fills the final event's reason and usage and frees its KV blocks
// (full blocks stay in the prefix cache). The Active itself is erased after the step.
void EngineImpl::finish(Active& a, StreamEvent& event, FinishReason reason) {
  if (a.done) fail(ErrorCode::internal, "request {} finished twice", a.id);
  a.done = true;
  event.finish = reason;
  scheduler_of(a).remove(&a);
  finished_.push_back(&a);
}

void EngineImpl::finish_with_error(Active& a, std::string message) {
  StreamEvent event;
  event.error = std::move(message);
  finish(a, event, FinishReason::error);
  deliver(a, event);
}

// Stamps usage on the event and hands it to the request's sink.
void EngineImpl::deliver(Active& a, StreamEvent& event) {
  event.usage.prompt_tokens = static_cast<int32_t>(a.request.prompt.size());
  event.usage.completion_tokens = a.n_generated;
  event.usage.cached_tokens = std::max(0, a.n_cached_first);
  if (event.finish != FinishReason::none && a.n_cached_first > 0) {
    std::lock_guard lock(mu_);
    stats_.cached_tokens_total += static_cast<uint64_t>(a.n_cached_first);
  }
  try {
    a.request.sink(event);
  } catch (const std::exception& e) {
    // A sink must not throw; treat it as the client going away.
    MEMRA_LOG_WARN("request {} sink threw ({}); cancelling it", a.id, e.what());
    if (event.finish == FinishReason::none) {
      a.done = true;
      scheduler_of(a).remove(&a);
      finished_.push_back(&a);
    }
  }
}

}  // namespace detail

std::unique_ptr<Engine> engine_start(EngineParts parts, const EngineOptions& options) {
  if (!parts.model || !parts.tokenizer)
    fail(ErrorCode::internal, "engine_start needs a model and a tokenizer");
  return std::make_unique<detail::EngineImpl>(std::move(parts), options);
}

}  // namespace memra
