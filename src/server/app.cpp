// Routing, auth, readiness/draining and error mapping for every endpoint; probes live here too.
#include "server/app.h"

#include <chrono>
#include <string_view>

#include "core/log.h"

namespace memra::server {

void send_json(HttpExchange& ex, int status, const nlohmann::json& body, const HeaderList& extra) {
  ex.send(status, "application/json", json_dump(body), extra);
}

void send_error(HttpExchange& ex, const ApiError& e, ErrorFormat format) {
  HeaderList extra;
  if (e.retry_after_s > 0) extra.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  // Stainless-generated clients (openai-python, anthropic) retry 429/5xx unless told otherwise.
  extra.emplace_back("x-should-retry", e.status == 429 || e.status == 503 ? "true" : "false");
  send_json(ex, e.status,
            format == ErrorFormat::anthropic ? anthropic_error_json(e) : api_error_json(e), extra);
}

void App::set_models(std::vector<ServedModel> models, std::vector<FailedModel> failed) {
  models_ = std::move(models);
  failed_ = std::move(failed);
  ready_.store(true, std::memory_order_release);
}

void App::release_models() {
  ready_.store(false);
  models_.clear();
}

ServedModel& App::model(const std::string& name) {
  if (name.empty() && !models_.empty()) return models_.front();
  for (ServedModel& m : models_)
    if (m.id == name) return m;
  for (const FailedModel& f : failed_)
    if (f.id == name)
      throw ApiError(404, "invalid_request_error", "model", "model_not_found",
                     fmt::format("The model '{}' failed to load at start: {}", name, f.error));
  throw ApiError(404, "invalid_request_error", "model", "model_not_found",
                 fmt::format("The model '{}' does not exist", name));
}

ServedModel& App::model_for(const std::string& name, ModelTask task) {
  if (name.empty())
    for (ServedModel& m : models_)
      if (m.task == task) return m;
  ServedModel& m = model(name);
  if (m.task == task) return m;
  if (task != ModelTask::generate)
    throw ApiError(400, "invalid_request_error", "model", "model_not_supported",
                   fmt::format("The model '{}' is not served for {} (serve it with task={} in its "
                               "MEMRA_MODELS entry, or --task {})",
                               m.id, task == ModelTask::embed ? "embeddings" : "rerank",
                               model_task_name(task), model_task_name(task)));
  const char* route = m.task == ModelTask::embed ? "embeddings" : "rerank";
  throw ApiError(400, "invalid_request_error", "model", "model_not_supported",
                 fmt::format("The model '{}' is served for {} only (/v1/{})", m.id, route, route));
}

const char* model_task_name(ModelTask task) {
  return task == ModelTask::embed ? "embed" : task == ModelTask::rerank ? "rerank" : "generate";
}

void App::require_auth(const HttpRequest& req) const {
  if (!config_.keys.enabled()) return;
  std::string_view key = presented_key(req.header("authorization"), req.header("x-api-key"));
  if (key.empty())
    throw ApiError(401, "authentication_error", "", "invalid_api_key",
                   "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'");
  if (!config_.keys.accepts(key))
    throw ApiError(401, "authentication_error", "", "invalid_api_key", "invalid API key");
}

namespace {

using Handler = void (*)(App&, const HttpRequest&, HttpExchange&);

// `path` matches exactly; a path ending in "{id}" matches any non-empty rest (ids, which the
// handler parses). The path is the route's metrics label. `format` is how its API writes errors.
struct Route {
  const char* method;
  const char* path;
  Handler handler;
  ErrorFormat format = ErrorFormat::openai;
  bool matches(std::string_view p) const {
    std::string_view pattern = path;
    if (!pattern.ends_with("{id}")) return p == pattern;
    pattern.remove_suffix(4);
    return p.size() > pattern.size() && p.starts_with(pattern);
  }
};

constexpr ErrorFormat kAnthropic = ErrorFormat::anthropic;

const Route kRoutes[] = {
    {"POST", "/v1/chat/completions", handle_chat_completions},
    {"POST", "/v1/completions", handle_completions},
    {"POST", "/v1/embeddings", handle_embeddings},
    {"POST", "/v1/rerank", handle_rerank},
    {"GET", "/v1/models", handle_models},
    {"GET", "/v1/models/{id}", handle_models},
    {"POST", "/v1/responses", handle_responses},
    {"GET", "/v1/responses/{id}", handle_response_get},
    {"DELETE", "/v1/responses/{id}", handle_response_delete},
    {"POST", "/tokenize", handle_tokenize},
    {"POST", "/detokenize", handle_detokenize},
    {"GET", "/metrics", handle_metrics},
    {"POST", "/v1/messages", handle_messages, kAnthropic},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, kAnthropic},
};

}  // namespace

void App::route(const HttpRequest& req, HttpExchange& ex, std::string& route_name,
                ErrorFormat& format) {
  const std::string& path = req.path;
  // Probes: no auth (load balancers and orchestrators call them without keys).
  if (path == "/health" || path == "/livez" || path == "/readyz") {
    route_name = path;
    // A model whose engine stopped (its GPU is unusable) makes the server unready, not dead:
    // an orchestrator takes it out of rotation and restarts it.
    std::string fatal;
    if (ready())
      for (const ServedModel& m : models())
        if (fatal.empty()) fatal = m.engine->stats().fatal_error;
    bool up = path == "/livez" || (ready() && fatal.empty() && !(path == "/readyz" && draining()));
    const char* status = path == "/livez" ? "ok"
                         : !ready()       ? "loading"
                         : !fatal.empty() ? "failed"
                         : draining()     ? "draining"
                                          : "ok";
    nlohmann::json body = {{"status", status}};
    if (path != "/livez" && !fatal.empty()) body["error"] = fatal;
    // Models that failed to load at start (the others serve): ready, but visibly degraded.
    if (path != "/livez" && ready() && !failed_models().empty()) {
      body["failed_models"] = nlohmann::json::array();
      for (const FailedModel& f : failed_models())
        body["failed_models"].push_back({{"id", f.id}, {"error", f.error}});
    }
    send_json(ex, up ? 200 : 503, body);
    return;
  }
  const Route* found = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (!r.matches(path)) continue;
    if (!path_known) format = r.format;
    path_known = true;
    if (req.method == r.method) found = &r;
  }
  if (found) format = found->format;
  if (!path_known) {
    route_name = "unknown";
    throw ApiError(404, "invalid_request_error", "", "not_found",
                   fmt::format("unknown route {} {}", req.method, path));
  }
  route_name = found ? found->path : path;
  if (!found)
    throw ApiError(405, "invalid_request_error", "", "method_not_allowed",
                   fmt::format("{} is not allowed on {}", req.method, path));
  require_auth(req);
  if (!ready()) {
    ApiError e(503, "server_error", "", "model_loading", "the model is still loading");
    e.retry_after_s = config_.retry_after_s;
    throw e;
  }
  if (draining() && path != "/metrics") {
    ApiError e(503, "server_error", "", "draining", "the server is shutting down");
    e.retry_after_s = config_.retry_after_s;
    throw e;
  }
  found->handler(*this, req, ex);
}

void App::handle(const HttpRequest& req, HttpExchange& ex) {
  auto start = std::chrono::steady_clock::now();
  metrics_.set_http_in_flight(in_flight_.fetch_add(1) + 1);
  std::string route_name = "unknown";
  ErrorFormat format = ErrorFormat::openai;  // until the route is known
  try {
    route(req, ex, route_name, format);
  } catch (const ApiError& e) {
    if (!ex.responded()) send_error(ex, e, format);
  } catch (const Error& e) {
    if (!ex.responded()) send_error(ex, api_error_from(e), format);
  } catch (const std::exception& e) {
    MEMRA_LOG_ERROR("{} {}: internal error: {}", req.method, req.path, e.what());
    if (!ex.responded())
      send_error(ex, ApiError(500, "server_error", "", "internal_error", e.what()), format);
  }
  metrics_.set_http_in_flight(in_flight_.fetch_sub(1) - 1);
  metrics_.count_request(route_name, ex.status());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // Never log headers or bodies: they carry keys and user data.
  MEMRA_LOG_INFO("{} {} {} {:.1f} ms", req.method, req.path, ex.status(), ms);
}

}  // namespace memra::server
