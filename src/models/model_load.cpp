// model_load: picks the architecture file for archive.architecture() by its descriptor
// (formats/arch/); the per-architecture constructors refuse unsupported config values, missing
// tensors and wrong shapes by name. And Model's default greedy forward (host argmax over host
// logits) and the refusals of hidden states and backend sampling.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "models/decoder.h"

namespace memra {

void Model::forward_greedy(const Batch& batch, KvCache& kv, int32_t n_cols,
                           std::span<int32_t> ids) {
  const size_t n_vocab = static_cast<size_t>(info().n_vocab);
  if (n_cols < 1 || static_cast<size_t>(n_cols) > n_vocab ||
      ids.size() != batch.logit_tokens.size())
    fail(ErrorCode::invalid_argument, "forward_greedy: {} ids for {} logit rows, {} of {} columns",
         ids.size(), batch.logit_tokens.size(), n_cols, n_vocab);
  std::vector<float> logits(ids.size() * n_vocab);
  forward(batch, kv, logits);
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* row = logits.data() + r * n_vocab;
    ids[r] = static_cast<int32_t>(std::max_element(row, row + n_cols) - row);
  }
}

void Model::forward_sample(const Batch&, KvCache&, int32_t, const SampleRows&,
                           std::span<sampling::RowResult>) {
  fail(ErrorCode::unsupported, "the {} model does not sample on its backend", info().architecture);
}

void KvCache::copy_state_slot(int32_t src, int32_t dst) {
  fail(ErrorCode::internal, "copy_state_slot({}, {}) on a KV cache without state slots", src, dst);
}

void Model::logits_row(size_t, std::span<float>) {
  fail(ErrorCode::unsupported, "the {} model keeps no logits on its backend", info().architecture);
}

void Model::forward_hidden(const Batch&, KvCache&, std::span<float>) {
  fail(ErrorCode::unsupported, "the {} model does not expose its hidden states (no embeddings)",
       info().architecture);
}

std::unique_ptr<Model> model_load(std::shared_ptr<const ModelArchive> archive,
                                  const ModelLoadOptions& options) {
  if (!archive) fail(ErrorCode::invalid_argument, "model_load: no archive");
  const std::string arch = archive->architecture();
  // One pre-norm decoder loop; the config picks each layer's mixer and feed-forward.
  const ArchDescriptor* d = arch_find(arch);
  if (d == nullptr)
    fail(ErrorCode::unsupported, "architecture '{}' is not supported (supported: {})", arch,
         arch_supported_names());
  switch (d->model) {
    case ArchModel::decoder:
      return llama_model_create(std::move(archive), options);
    case ArchModel::gemma3:
      return gemma3_model_create(std::move(archive), options);
    case ArchModel::gemma4:
      return gemma4_model_create(std::move(archive), options);
  }
  fail(ErrorCode::internal, "architecture '{}' has no forward pass", arch);
}

}  // namespace memra
