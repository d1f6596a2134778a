// The interface the engine drives: a loaded model runs forward over a Batch, reading and writing
// its paged KV cache, and writes logits for the requested tokens. One implementation per
// architecture family over shared blocks (models/*.cpp), all on the backend ops interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/ops.h"
#include "core/dtype.h"
#include "core/sampling_math.h"
#include "models/batch.h"

namespace memra {

struct ModelArchive;
class Ops;

struct ModelInfo {
  std::string architecture;  // GGUF spelling: llama, qwen2, qwen3, qwen3moe, gemma3
  std::string name;          // general.name when present
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // the model's trained context length
  int32_t n_layers = 0;
  int32_t n_embd = 0;
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;
  std::string device;  // the backend's name, e.g. "cpu (2 threads)", "cuda:0 NVIDIA H200"
  DType kv_dtype = DType::f32;
  // Non-empty when a sequence cannot resume from cached KV blocks alone: the reason (hybrid
  // models keep per-sequence recurrent state that a cached block does not hold), and the engine
  // turns the prefix cache off for this model.
  std::string prefix_cache_unsupported;
};

// Paged KV storage for all layers: n_blocks blocks of block_size token slots each. Block ids come
// from the engine's block manager; the model only reads/writes the slots a Batch names.
class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual int32_t block_size() const = 0;
  virtual int32_t n_blocks() const = 0;
  virtual uint64_t bytes() const = 0;
  // Copies block src into block dst for every layer (copy-on-write of a shared prefix block).
  virtual void copy_block(int32_t src, int32_t dst) = 0;
  // Recurrent-state slots (Model::state_bytes_per_seq > 0): a running sequence owns one, named by
  // BatchSeq::state_slot; a step whose sequence starts at position 0 resets its slot.
  virtual int32_t n_state_slots() const { return 0; }
  virtual uint64_t state_bytes() const { return 0; }  // of all slots
  // Copies state slot src into slot dst for every linear-attention layer (a prefix-cache state
  // snapshot taken or restored), ordered with the steps around it. This default refuses: a cache
  // without state slots has nothing to copy.
  virtual void copy_state_slot(int32_t src, int32_t dst);
};

// The largest steps the engine will run (Model::prepare).
struct StepLimits {
  int32_t max_batch_tokens = 0;  // tokens in one step
  int32_t max_sequences = 0;     // sequences in one step (and logit rows)
  int32_t context_length = 0;    // positions per sequence
  bool graphs = false;           // replay pure decode steps as graphs where the backend can
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // KV bytes one token slot takes across all layers (for sizing the cache).
  virtual uint64_t kv_bytes_per_token() const = 0;
  // Bytes of the fixed-size recurrent state one sequence needs across its linear-attention
  // layers (sized and admitted beside the KV); 0 for models without such layers.
  virtual uint64_t state_bytes_per_seq() const { return 0; }
  // The KV cache of n_blocks blocks of block_size token slots, plus n_state_slots recurrent-state
  // slots when the model has linear-attention layers (a model with some needs at least one).
  virtual std::unique_ptr<KvCache> kv_cache_create(int32_t n_blocks, int32_t block_size,
                                                   int32_t n_state_slots) const = 0;
  std::unique_ptr<KvCache> kv_cache_create(int32_t n_blocks, int32_t block_size) const {
    return kv_cache_create(n_blocks, block_size, state_bytes_per_seq() > 0 ? 1 : 0);
  }
  // Runs the batch. logits: [batch.logit_tokens.size() x n_vocab] row-major, written in full.
  virtual void forward(const Batch& batch, KvCache& kv, std::span<float> logits) = 0;
  // Runs the batch as forward does, but writes only the greedy token of each logit row: the
  // first index of the largest of its first n_cols logits, as the sampler's plain greedy argmax
  // (std::max_element) picks it. ids: [batch.logit_tokens.size()]. A backend with device memory
  // copies 4 bytes per row to the host instead of the row. This default runs forward and picks
  // on the host.
  virtual void forward_greedy(const Batch& batch, KvCache& kv, int32_t n_cols,
                              std::span<int32_t> ids);
  // True when forward_sample runs the sampling chain where the logits are (a device backend,
  // Ops::sample_rows), so a step copies a RowResult per row to the host instead of its logits.
  virtual bool samples_on_backend(int32_t n_cols) const {
    (void)n_cols;
    return false;
  }
  // Runs the batch as forward does, then the sampling chain on the first n_cols logits of each
  // logit row (rows.params[r] for row r) into out. The logits stay in backend memory until the
  // next step; logits_row copies one row's first out.size() logits to the host (a row the
  // backend deferred). Both refuse unless samples_on_backend.
  virtual void forward_sample(const Batch& batch, KvCache& kv, int32_t n_cols,
                              const SampleRows& rows, std::span<sampling::RowResult> out);
  virtual void logits_row(size_t row, std::span<float> out);
  // Runs the batch as forward does (KV written the same way), but writes the final-norm hidden
  // state of each logit row instead of its logits: what embeddings are pooled from.
  // hidden: [batch.logit_tokens.size() x info().n_embd] row-major. This default refuses.
  virtual void forward_hidden(const Batch& batch, KvCache& kv, std::span<float> hidden);
  // Called once before the KV cache is sized: lets the model allocate the buffers of the largest
  // step it will be given (so they count before the cache takes the free memory) and, when
  // limits.graphs and its backend can, replay pure decode steps as graphs. Returns the batch
  // buckets that are replayed (empty: none).
  virtual std::vector<int32_t> prepare(const StepLimits& limits) {
    (void)limits;
    return {};
  }
};

// A named intermediate activation of one forward pass, for debug dumps diffed layer by layer
// against a reference: rows are the batch's tokens (or the logit rows for "logits").
struct TraceEvent {
  std::string_view name;  // e.g. "attn_norm", "q_rope", "ffn_out", "logits"
  int layer = -1;         // -1 outside the layers
  const float* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

struct ModelLoadOptions {
  // The backend the model runs on (required): its weights, activations and KV cache live there.
  // Several models may share one backend.
  std::shared_ptr<Ops> ops;
  std::optional<DType> kv_dtype;  // KV cache element type; unset = the backend's default
  std::function<void(const TraceEvent&)> trace;  // called after each named op when set
  // Test hook (model_run --routes-out / --routes-in): after each MoE layer's routing, the layer,
  // its router logits ([n x n_expert]) and the expert ids and weights ([n x k], in moe_route's
  // order), host copies; the layer runs with the ids and weights the hook leaves, so a gate can
  // pin one backend's routing to another's. While it is set no step is recorded as a graph.
  std::function<void(int layer, int64_t n_tokens, std::span<const float> logits,
                     std::span<int32_t> ids, std::span<float> weights)>
      moe_routes;
  // Called as weights become backend-resident (bytes done, bytes total), e.g. for a progress bar.
  std::function<void(uint64_t, uint64_t)> progress;
};

// Builds the model for archive.architecture(); refuses unknown architectures, missing tensors,
// wrong shapes and unsupported config values by name.
std::unique_ptr<Model> model_load(std::shared_ptr<const ModelArchive> archive,
                                  const ModelLoadOptions& options);

}  // namespace memra
