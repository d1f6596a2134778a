// memra's public C++ API: load a model, submit requests that stream tokens and text back, cancel
// them, read usage and statistics. One engine thread runs steps; each step serves a batch that
// mixes prefill chunks and decodes under a token budget over a paged KV cache. The server, the
// CLI and tests use only this header (plus the tokenizer/template types it exposes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memra {

class Tokenizer;
class ChatTemplate;
namespace structured {
class Grammar;  // src/structured/grammar.h
}

struct SamplingParams {
  float temperature = 1.0f;         // below 1e-5 (0 included) = greedy
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off (HF semantics, over prompt + generated tokens)
  float presence_penalty = 0.0f;    // OpenAI semantics, over generated tokens
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the raw logit
  std::optional<uint64_t> seed;                       // same seed + same request = same output
  int32_t top_logprobs = -1;  // -1: no logprobs; 0: the chosen token's; N: also the top N
};

struct StopConditions {
  int32_t max_tokens = 256;               // generated tokens; the context limit also applies
  std::vector<std::string> stop_strings;  // matched across token boundaries, never emitted
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS ids
  bool ignore_eos = false;
};

enum class FinishReason { none, stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", ...

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0.0f;           // valid when logprobs were requested
  std::vector<TokenLogprob> top;  // top_logprobs entries, best first
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// What a request's sink receives. Called on the engine thread: it must not block.
struct StreamEvent {
  std::vector<GeneratedToken> tokens;  // committed this step
  std::string text;                    // newly final text (held back while a stop string may form)
  FinishReason finish = FinishReason::none;  // set on the last event only
  std::string matched_stop;                  // the stop string that ended generation, if any
  std::string error;                         // when finish == error
  Usage usage;                               // running totals
  // RequestKind::embed, on the final `stop` event: the pooled (and normalized) vector.
  std::vector<float> embedding;
  // RequestKind::score, on the final `stop` event: one raw logit per score_token_ids entry.
  std::vector<float> scores;
};

using RequestId = uint64_t;

// What a request asks of the model. generate: tokens (the default). embed: no tokens; the prompt
// is prefilled once in steps of its own (batched with other embed requests), its final-norm
// hidden states are pooled into the final event's `embedding`, and its KV blocks are freed
// without entering the prefix cache (its rows of the prefix cache are never matched either:
// mean pooling needs every token's row). score: no tokens; the prompt is prefilled as a
// generation's would be (prefix cache included) and the final event's `scores` hold the raw
// logits of `score_token_ids` at its last position (rerankers' yes/no probability).
enum class RequestKind { generate, embed, score };

// Which final-norm hidden states an embedding is made of: the last token's (Qwen3-Embedding and
// other decoder embedders), the mean over every token, or the first token's (CLS).
enum class Pooling { last, mean, cls };
inline const char* pooling_name(Pooling pooling) {
  return pooling == Pooling::mean ? "mean" : pooling == Pooling::cls ? "cls" : "last";
}

struct Request {
  std::vector<int32_t> prompt;  // token ids (use tokenizer() to encode text)
  SamplingParams sampling;
  StopConditions stop;
  std::function<void(const StreamEvent&)> sink;
  // Constrained decoding (structured output, forced tool calls): only text the grammar accepts is
  // generated, and generation finishes with `stop` once the grammar is complete. Null: free text.
  std::shared_ptr<const structured::Grammar> grammar;
  RequestKind kind = RequestKind::generate;
  Pooling pooling = Pooling::last;       // embed only
  bool normalize = true;                 // embed only: L2-normalize the pooled vector
  std::vector<int32_t> score_token_ids;  // score only: 1 to 16 ids
};

struct EngineOptions {
  std::string model;           // a source for model_source_resolve; empty = the default model
  int32_t context_length = 0;  // 0 = min(model's trained length, 8192)
  int32_t kv_block_size = 16;
  int32_t kv_blocks = 0;  // 0 = enough for max_sequences * context_length, capped at 1 GiB of KV
                          // (never less than one full context)
  int32_t max_sequences = 64;      // running at once
  int32_t max_batch_tokens = 512;  // token budget per step (prefill chunks + decodes)
  int32_t max_queued = 256;        // waiting requests before submit refuses (queue full)
  bool prefix_cache = true;
  // Models with linear-attention layers (recurrent state): snapshot slots for the prefix cache,
  // each holding the state at the end of one cached block (a prompt's last full block), so a
  // request sharing that prefix resumes there. -1 = max_sequences, bounded by the memory the
  // running sequences' slots leave of half the cache budget; 0 turns such a model's prefix cache
  // off. Each takes one sequence's state bytes. No effect on other models.
  int32_t state_snapshots = -1;
  int n_threads = 0;  // CPU backend threads; 0 = all cores
  // Where the model runs: "auto" (a GPU when this build has CUDA and one is present, else the
  // CPU), "cpu", "cuda" or "cuda:N".
  std::string device = "auto";
  // On a GPU, the KV cache may take up to this fraction of the memory free after the weights
  // are loaded (kv_blocks = 0 sizes it so).
  double gpu_memory_fraction = 0.9;
  // KV cache element type: "" = the backend's default (F32 on the CPU, F16 on CUDA), or a dtype
  // name the backend supports (CUDA: f16, bf16, f32, f8_e4m3 alias fp8; the CPU: f32, f8_e4m3).
  std::string kv_dtype;
  // On a GPU, pure decode steps (one token per sequence) are recorded as CUDA graphs per batch
  // bucket on first use and replayed (same tokens as eager; a failed recording runs eagerly).
  bool cuda_graphs = true;
  // On a GPU, the sampling chain (penalties, bias, grammar mask, temperature, top-k/p, min-p,
  // the seeded draw, logprobs) runs on the device and a step copies only each row's token and
  // asked logprobs to the host; false downloads the logit rows and samples on the host. Both
  // give the same tokens and logprobs, bit for bit.
  bool device_sampling = true;
  // The determinism contract (greedy tokens identical alone vs batched, cached vs cold, chunked
  // vs whole). false allows faster paths that break it: on a GPU, steps over 64 tokens (prefill)
  // multiply by cuBLASLt on f16 copies of the quantized weights, so a sequence's tokens may then
  // depend on what else ran in its steps. No effect on the CPU, which has only the invariant path.
  bool deterministic = true;
};

struct EngineStats {
  int32_t queued = 0;
  int32_t running = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  uint64_t prompt_tokens_total = 0;
  uint64_t generated_tokens_total = 0;
  uint64_t cached_tokens_total = 0;
  uint64_t steps_total = 0;
  uint64_t preemptions_total = 0;  // sequences preempted (KV freed, prefilled again later)
  // Recurrent-state slots (models with linear-attention layers: one fixed-size state per running
  // sequence, beside the paged KV); both 0 for models without such layers.
  int32_t state_slots_total = 0;
  int32_t state_slots_used = 0;
  // Their prefix cache's state snapshots (slots beside the running ones, counted in the model's
  // state_bytes): slots, slots holding a snapshot, admissions that resumed from one.
  int32_t state_snapshots_total = 0;
  int32_t state_snapshots_used = 0;
  uint64_t state_snapshot_restores_total = 0;
  // CUDA graphs of decode steps: recordings made, recordings that failed (those step shapes run
  // eagerly), steps replayed. All 0 on the CPU or with cuda_graphs off.
  uint64_t graphs_recorded_total = 0;
  uint64_t graph_recordings_failed_total = 0;
  uint64_t graph_replays_total = 0;
  // Non-empty once the engine has stopped serving because its device is unusable (a sticky
  // CUDA error): the reason. Every request then fails; a server reports itself not ready.
  std::string fatal_error;
};

struct EngineModelInfo {
  std::string id;  // display name of the source
  std::string architecture;
  int32_t context_length = 0;
  int32_t n_vocab = 0;
  uint64_t weight_bytes = 0;
  uint64_t kv_cache_bytes = 0;
  std::string kv_dtype;  // the KV cache's element type as the engine runs it, e.g. "F16"
  // Recurrent-state slots of linear-attention layers, the running ones' and the prefix cache's
  // snapshots (0: none).
  uint64_t state_bytes = 0;
  // Whether requests reuse cached KV blocks. Off when EngineOptions::prefix_cache is, or when the
  // model cannot resume from a cached block (prefix_cache_off_reason says why: e.g. a hybrid
  // model with state_snapshots 0).
  bool prefix_cache = false;
  std::string prefix_cache_off_reason;
  std::string device;  // the backend that runs the model, e.g. "cpu (2 threads)"
  // Whether the engine keeps the determinism contract: false only for EngineOptions::deterministic
  // off on a GPU (the CPU has only the batch-invariant path).
  bool deterministic = true;
  int32_t n_embd = 0;  // width of the hidden states (embedding length)
  // The model's own pooling (GGUF <arch>.pooling_type: "mean", "cls", "last", "rank", "none";
  // an HF folder's sentence-transformers 1_Pooling/config.json: "last", "mean", "cls"); empty
  // when it does not say.
  std::string pooling;
};

class Engine {
 public:
  // Loads the model and starts the engine thread. Throws memra::Error naming what failed.
  static std::unique_ptr<Engine> create(const EngineOptions& options);
  virtual ~Engine() = default;  // stops the engine thread; pending requests finish as cancelled

  // Queues a request. Throws Error(invalid_argument) for a prompt that cannot fit (naming the
  // prompt length, max_tokens and the context length) or bad parameters, and
  // Error(resource_exhausted) when the queue is full.
  virtual RequestId submit(Request request) = 0;
  // Cancels a queued or running request; its sink gets a final `cancelled` event within one step
  // and its KV blocks are freed. Unknown or finished ids are ignored: a request gets exactly one
  // final event, however often it is cancelled.
  virtual void cancel(RequestId id) = 0;

  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ChatTemplate* chat_template() const = 0;  // null when the model has none
  virtual const EngineModelInfo& model_info() const = 0;
  virtual EngineStats stats() const = 0;
};

}  // namespace memra
