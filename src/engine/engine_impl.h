// The Engine implementation over already-loaded parts, so tests can drive it with a fake model
// and tokenizer. Engine::create (engine_create.cpp) loads the parts from a model source.
#pragma once

#include <memory>
#include <vector>

#include "backend/ops.h"
#include "memra/engine.h"
#include "models/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace memra {

struct EngineParts {
  std::shared_ptr<Ops> ops;  // the model's backend (null for test doubles: host memory assumed)
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;  // null when the model has none
  std::vector<int32_t> eos_ids;                 // ids that end generation (unless ignore_eos)
  EngineModelInfo info;                         // context_length/kv_cache_bytes are filled here
};

// Sizes the KV cache, starts the engine thread. Throws Error(invalid_argument) for options that
// cannot work (a context longer than the model's, a cache smaller than one full context).
std::unique_ptr<Engine> engine_start(EngineParts parts, const EngineOptions& options);

}  // namespace memra
