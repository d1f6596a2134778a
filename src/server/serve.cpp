// The server's lifecycle: signals, listening, model loading with progress, drain on shutdown.
#include "server/serve.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include "core/heap_trim.h"
#include "core/log.h"

namespace memra::server {

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `ms` for SIGTERM/SIGINT (blocked in every thread, so only this wait sees them).
bool wait_signal(const sigset_t& set, int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1'000'000};
  int sig = ::sigtimedwait(&set, nullptr, &ts);
  if (sig > 0) MEMRA_LOG_INFO("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  return sig > 0;
}

// An elapsed-time line on a terminal while a model loads (the engine API has no progress hook).
// Not for hf: sources: a first-run download draws its own progress bar on the same line.
class LoadProgress {
 public:
  explicit LoadProgress(const std::string& what) : what_(what) {
    if (::isatty(2) && !what.starts_with("hf:")) thread_ = std::thread([this] { tick(); });
  }
  ~LoadProgress() {
    done_ = true;
    if (thread_.joinable()) {
      thread_.join();
      std::fprintf(stderr, "\r\033[K");
    }
  }

 private:
  void tick() {
    auto start = Clock::now();
    static const char kSpin[] = "|/-\\";
    for (int i = 0; !done_; ++i) {
      double s = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "\r%c loading %s ... %.1f s", kSpin[i % 4], what_.c_str(), s);
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  std::string what_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The alias's task and, for embeddings, its pooling: the entry's pooling=, else the model file's
// pooling_type; a file that names none (or rank/none) is refused by name.
void set_task(ServedModel& m, const ModelSpec& spec) {
  if (spec.task.empty() || spec.task == "generate") return;
  if (spec.task == "rerank") {
    m.task = ModelTask::rerank;
    try {
      m.rerank = rerank_format_load(*m.engine, spec.rerank_prompt, spec.rerank_tokens);
    } catch (const Error& e) {
      fail(e.code(), "model '{}': {}", m.id, e.what());
    }
    MEMRA_LOG_INFO("'{}' serves rerank (yes/no token ids {}/{})", m.id, m.rerank.yes_id,
                   m.rerank.no_id);
    return;
  }
  m.task = ModelTask::embed;
  std::string pooling = spec.pooling;
  if (pooling.empty()) pooling = m.engine->model_info().pooling;
  if (pooling == "last") {
    m.pooling = Pooling::last;
  } else if (pooling == "mean") {
    m.pooling = Pooling::mean;
  } else if (pooling == "cls") {
    m.pooling = Pooling::cls;
  } else {
    fail(ErrorCode::invalid_argument,
         "model '{}' is served for embeddings but its file names {} pooling: set pooling=last|"
         "mean|cls in its MEMRA_MODELS entry or --pooling",
         m.id, pooling.empty() ? std::string("no") : "'" + pooling + "'");
  }
  MEMRA_LOG_INFO("'{}' serves embeddings ({} pooling, {} dimensions)", m.id,
                 pooling_name(m.pooling), m.engine->model_info().n_embd);
}

ServedModel load_model(const ServerConfig& config, const ModelLoader& loader,
                       const ModelSpec& spec) {
  std::string what = spec.source.empty() ? "the default model" : spec.source;
  MEMRA_LOG_INFO("loading {}", what);
  auto start = Clock::now();
  ServedModel m;
  {
    LoadProgress progress(what);
    EngineOptions options = config.engine;
    options.model = spec.source;
    m = loader(spec, options);
  }
  if (!spec.alias.empty()) m.id = spec.alias;
  set_task(m, spec);
  const EngineModelInfo& info = m.engine->model_info();
  MEMRA_LOG_INFO(
      "loaded '{}' ({}) on {}: context {} tokens, vocab {}, weights {:.1f} MiB, KV cache {:.1f} "
      "MiB, chat template {}, in {:.2f} s",
      m.id, info.architecture, info.device, info.context_length, info.n_vocab,
      info.weight_bytes / 1048576.0, info.kv_cache_bytes / 1048576.0,
      m.render_chat ? "yes" : "none", std::chrono::duration<double>(Clock::now() - start).count());
  return m;
}

struct LoadedModels {
  std::vector<ServedModel> served;
  std::vector<FailedModel> failed;
};

// One model: a failure ends the start (the caller exits non-zero with the reason). Several: a
// model that fails is logged and reported (/readyz, /v1/models) and the others are served;
// only when none loads does the start fail.
LoadedModels load_models(const ServerConfig& config, const ModelLoader& loader) {
  std::vector<ModelSpec> specs = config.models;
  if (specs.empty()) specs.push_back({"", ""});  // the default model
  LoadedModels out;
  for (const ModelSpec& spec : specs) {
    ServedModel m;
    try {
      m = load_model(config, loader, spec);
    } catch (const std::exception& e) {
      if (specs.size() == 1) throw;
      const std::string id = spec.alias.empty() ? spec.source : spec.alias;
      MEMRA_LOG_ERROR("model '{}' failed to load, serving the others: {}", id, e.what());
      out.failed.push_back({id, e.what()});
      continue;
    }
    for (const ServedModel& other : out.served)
      if (other.id == m.id) fail(ErrorCode::invalid_argument, "two models are named '{}'", m.id);
    out.served.push_back(std::move(m));
  }
  if (out.served.empty()) {
    std::string why;
    for (const FailedModel& f : out.failed) why += fmt::format("\n  '{}': {}", f.id, f.error);
    fail(ErrorCode::invalid_argument, "none of the {} models could be loaded:{}", specs.size(),
         why);
  }
  return out;
}

// Loads on a worker thread so that SIGTERM / SIGINT still work while a model loads, which can
// be a long first-run download: a signal then ends the process at once (nothing is served yet;
// a partial download is resumed by the next start).
LoadedModels load_models_or_exit(const ServerConfig& config, const ModelLoader& loader,
                                 const sigset_t& signals) {
  std::promise<LoadedModels> loaded;
  std::future<LoadedModels> result = loaded.get_future();
  std::thread worker([&] {
    try {
      loaded.set_value(load_models(config, loader));
    } catch (...) {
      loaded.set_exception(std::current_exception());
    }
  });
  while (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (wait_signal(signals, 200)) {
      MEMRA_LOG_INFO("stopped while loading the models");
      std::fflush(stderr);
      std::_Exit(0);
    }
  }
  worker.join();
  return result.get();
}

}  // namespace

int run_server(const ServerConfig& config, const ModelLoader& loader) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: they inherit it
  ::signal(SIGPIPE, SIG_IGN);
  configure_heap_for_server();  // before any thread starts, so before any arena but the main one

  AppConfig app_config;
  app_config.request_limits = config.request;
  app_config.keys.add_from_list(config.api_keys);
  if (!config.api_key_file.empty()) app_config.keys.add_from_file(config.api_key_file);
  app_config.fingerprint = "memra";
  app_config.response_store = config.response_store;
  size_t n_keys = app_config.keys.size();
  App app(std::move(app_config));

  HttpServer http(config.http,
                  [&app](const HttpRequest& req, HttpExchange& ex) { app.handle(req, ex); });
  http.listen(config.host, config.port);
  std::thread acceptor([&http] { http.run(); });
  MEMRA_LOG_INFO("listening on http://{}:{} ({} API key(s){})", config.host, http.port(), n_keys,
                 n_keys ? "" : ", auth off");
  int rc = 0;
  try {
    LoadedModels loaded = load_models_or_exit(config, loader, set);
    app.set_models(std::move(loaded.served), std::move(loaded.failed));
    MEMRA_LOG_INFO("ready: http://{}:{}/v1", config.host, http.port());
    while (!wait_signal(set, 1000)) {
    }
  } catch (const std::exception& e) {
    MEMRA_LOG_ERROR("{}", e.what());
    rc = 1;
  }
  app.set_draining();
  http.stop_accepting();
  acceptor.join();
  MEMRA_LOG_INFO("draining {} request(s) for up to {} s", http.requests_in_flight(),
                 config.shutdown_timeout_s);
  auto deadline = Clock::now() + std::chrono::seconds(config.shutdown_timeout_s);
  while (!http.wait_idle(100)) {
    if (Clock::now() >= deadline || wait_signal(set, 0)) {
      MEMRA_LOG_WARN("cancelling {} request(s) still running", http.requests_in_flight());
      app.abort_generations();
      break;
    }
  }
  // Handlers hold references to their model and engine: the engines go only once every
  // connection thread has left. Shutting the sockets down ends writes blocked on a client that
  // reads nothing (otherwise they would hold the engine for up to the write timeout).
  http.close_connections();
  app.release_models();
  MEMRA_LOG_INFO("stopped");
  return rc;
}

}  // namespace memra::server
