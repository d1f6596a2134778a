// The server application: routes HTTP requests to one handler per endpoint, enforces auth and the
// loading/draining states, and turns errors into OpenAI-shaped responses. Models are attached once
// loaded (until then every API route answers 503 "loading").
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memra/engine.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/reasoning.h"
#include "server/response_store.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"

namespace memra::server {

// The error body shape of a route's API.
enum class ErrorFormat { openai, anthropic };

// What an alias serves: the generating routes, or /v1/embeddings only (MEMRA_MODELS task=embed),
// or /v1/rerank only (task=rerank).
enum class ModelTask { generate, embed, rerank };
const char* model_task_name(ModelTask task);  // "generate", "embed", "rerank"

// How a rerank model scores a document: its prompt (literal text with {query}, {document} and
// {instruction} slots; the literal parts may hold special tokens, the slots never do) and the
// answer tokens whose next-token logits give p(yes) = sigmoid(logit(yes) - logit(no)).
struct RerankFormat {
  std::string prompt;
  std::string default_instruction;
  int32_t yes_id = -1;
  int32_t no_id = -1;
};
// The rerank format of a model: `prompt` is "qwen3" (the built-in Qwen3-Reranker prompt), a file
// holding one, or empty (qwen3 for qwen3 models, else refused by name); `tokens` is "YES/NO",
// the answer tokens' exact texts (empty: "yes/no"), each one token of the vocabulary.
RerankFormat rerank_format_load(const Engine& engine, const std::string& prompt,
                                const std::string& tokens);

struct ServedModel {
  std::string id;  // the name clients send as "model"
  std::unique_ptr<Engine> engine;
  ModelTask task = ModelTask::generate;
  Pooling pooling = Pooling::last;  // task embed: how its embeddings are pooled
  RerankFormat rerank;              // task rerank
  // Renders a chat-template context (messages, tools, add_generation_prompt, bos/eos tokens) to
  // prompt text, marking the bytes that are the client's: every string of the context but the
  // top-level variables named in `own` (see ChatTemplate::render_marked); empty when the model
  // has no chat template.
  std::function<RenderedPrompt(const ojson& context, const std::vector<std::string>& own)>
      render_chat;
  // How the template's model writes tool calls: decides how tool_choice "required" / a named
  // function is forced (none: refused).
  ToolCallFormat tool_format = ToolCallFormat::none;
  // How the template's model marks its thinking (none: no thinking output, thinking refused).
  ReasoningFormat reasoning;
};

// A configured model that failed to load at start (several models: the others are served).
struct FailedModel {
  std::string id;     // its alias, else its source
  std::string error;  // why, as logged
};

struct AppConfig {
  RequestLimits request_limits;
  ApiKeys keys;
  std::string fingerprint = "memra";
  int retry_after_s = 1;
  ResponseStoreLimits response_store;
};

class App {
 public:
  explicit App(AppConfig config) : config_(std::move(config)), responses_(config_.response_store) {}

  // Attaches the loaded models and becomes ready; `failed` are reported by /readyz, /health and
  // /v1/models, and requests naming one get 404 with the reason. Call once.
  void set_models(std::vector<ServedModel> models, std::vector<FailedModel> failed = {});
  void set_draining() { draining_.store(true); }
  // Makes every running generation stop as if its client had left (forced shutdown).
  void abort_generations() { abort_.store(true); }
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  bool draining() const { return draining_.load(); }
  bool aborting() const { return abort_.load(); }

  void handle(const HttpRequest& req, HttpExchange& ex);

  // For handlers.
  ServedModel& model(const std::string& name);  // ApiError 404 for an unknown name
  // As model(), for one task: an empty name picks the first model of that task; a model of the
  // other task is a 400 naming it.
  ServedModel& model_for(const std::string& name, ModelTask task);
  const std::vector<ServedModel>& models() const { return models_; }
  const std::vector<FailedModel>& failed_models() const { return failed_; }
  const AppConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }
  ResponseStore& responses() { return responses_; }
  // Drops the engines (stops their threads) once no request can reach them.
  void release_models();

 private:
  // Sets `route_name` (the metrics label) and `format` as soon as the route is known.
  void route(const HttpRequest& req, HttpExchange& ex, std::string& route_name,
             ErrorFormat& format);
  void require_auth(const HttpRequest& req) const;

  AppConfig config_;
  std::vector<ServedModel> models_;
  std::vector<FailedModel> failed_;  // set once, before ready_
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> abort_{false};
  std::atomic<int> in_flight_{0};
  Metrics metrics_;
  ResponseStore responses_;
};

// One handler per endpoint (handlers_*.cpp).
void handle_chat_completions(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_completions(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_models(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_tokenize(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_detokenize(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_metrics(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_messages(App& app, const HttpRequest& req, HttpExchange& ex);      // Anthropic
void handle_count_tokens(App& app, const HttpRequest& req, HttpExchange& ex);  // Anthropic
void handle_responses(App& app, const HttpRequest& req, HttpExchange& ex);     // OpenAI Responses
void handle_response_get(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_response_delete(App& app, const HttpRequest& req, HttpExchange& ex);
void handle_embeddings(App& app, const HttpRequest& req, HttpExchange& ex);  // OpenAI
void handle_rerank(App& app, const HttpRequest& req, HttpExchange& ex);      // Cohere / Jina

void send_json(HttpExchange& ex, int status, const nlohmann::json& body,
               const HeaderList& extra = {});
void send_error(HttpExchange& ex, const ApiError& e, ErrorFormat format = ErrorFormat::openai);

}  // namespace memra::server
