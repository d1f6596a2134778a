// memra-server / `memra serve` configuration: every flag has a MEMRA_* environment equivalent and
// the flag wins. MEMRA_MODELS="alias=SOURCE,..." serves several models; with nothing configured
// the default model is served.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "memra/engine.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/response_store.h"

namespace memra::server {

struct ModelSpec {
  std::string alias;   // what clients send as "model"; empty = the source's display name
  std::string source;  // for model_source_resolve; empty = the default model
  // Entry options (MEMRA_MODELS "alias=SOURCE;task=embed;pooling=mean"), else --task/--pooling.
  std::string task;           // generate (also when empty) | embed | rerank (their route only)
  std::string pooling;        // last | mean | cls; empty = the model file's pooling_type
  std::string rerank_prompt;  // qwen3 (built in) or a file; empty = qwen3 for qwen3 models
  std::string rerank_tokens;  // "YES/NO" answer token texts; empty = "yes/no"
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<ModelSpec> models;  // empty: the default model
  std::string task;               // --task: for entries that set none ("" = generate)
  std::string pooling;            // --pooling: for entries that set none
  EngineOptions engine;           // applied to every model (model field set per model)
  HttpLimits http;
  RequestLimits request;
  ResponseStoreLimits response_store;  // /v1/responses with store
  std::string api_key_file;
  std::string api_keys;  // comma-separated, from MEMRA_API_KEYS only (never a flag: ps shows flags)
  int shutdown_timeout_s = 30;
  std::string log_level;
  std::string chat_template_file;  // replaces the model's chat template (one model only)
  bool help = false;
};

using EnvLookup = std::function<const char*(const char*)>;

// Throws Error(invalid_argument) naming the flag or variable.
ServerConfig parse_server_config(const std::vector<std::string>& args, const EnvLookup& env);
std::string server_usage(const char* program);

}  // namespace memra::server
