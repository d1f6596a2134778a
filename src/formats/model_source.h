// Resolves what a user names as a model into a local path:
//   - a local GGUF file or HF folder (as is);
//   - hf:org/name[:QUANT][@revision]: the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub,
//     else ~/.cache/huggingface/hub), downloading the model from HF_ENDPOINT on first use unless
//     HF_HUB_OFFLINE is set (src/hub/hub.h). Failures are named hub errors saying what to do.
#pragma once

#include <string>

namespace memra {

struct ResolvedModel {
  std::string path;     // local file or folder to open with archive_open
  std::string display;  // what to call it in logs and /v1/models
};

ResolvedModel model_source_resolve(const std::string& source);

// The default model (Gemma 3 270M Q4_K_M): $MEMRA_DEFAULT_MODEL, else
// $MEMRA_MODEL_DIR/gemma-3-270m-q4_k_m.gguf (MEMRA_MODEL_DIR defaults to ~/.cache/memra/models).
std::string model_source_default_path();

}  // namespace memra
