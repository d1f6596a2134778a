// Runs the server: listen, load the models (503 "loading" meanwhile), serve, and on SIGTERM/SIGINT
// stop accepting, drain in-flight requests up to the shutdown timeout, then return 0. A second
// signal during the drain cancels what is left at once. A signal while the models load (or
// download) exits with 0 at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/app.h"
#include "server/config.h"

namespace memra::server {

// Loads one model. The real one (serve_main) uses Engine::create; tests pass a fake engine.
using ModelLoader = std::function<ServedModel(const ModelSpec& spec, const EngineOptions& options)>;

int run_server(const ServerConfig& config, const ModelLoader& loader);

// memra-server and `memra serve`: parse args + MEMRA_* env, load with the real engine, serve.
int serve_main(const std::vector<std::string>& args, const char* program);

}  // namespace memra::server
