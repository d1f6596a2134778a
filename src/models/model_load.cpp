// model_load: picks the architecture file for archive.architecture(); the per-architecture
// constructors refuse unsupported config values, missing tensors and wrong shapes by name.
#include "core/error.h"
#include "models/decoder.h"

namespace memra {

std::unique_ptr<Model> model_load(std::shared_ptr<const ModelArchive> archive,
                                  const ModelLoadOptions& options) {
  if (!archive) fail(ErrorCode::invalid_argument, "model_load: no archive");
  const std::string arch = archive->architecture();
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3")
    return llama_model_create(std::move(archive), options);
  if (arch == "gemma3") return gemma3_model_create(std::move(archive), options);
  fail(ErrorCode::unsupported,
       "architecture '{}' is not supported (supported: llama, qwen2, qwen3, gemma3)", arch);
}

}  // namespace memra
