// memra-fake-server: the real server (flags, HTTP, protocol, drain) over the fake engine, for the
// protocol tests in tests/python/test_server_protocol.py. MEMRA_FAKE_STEP_MS sets the engine step.
// Not installed, not a product: the real server is tools/server (memra-server).
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/log.h"
#include "fake_engine.h"
#include "server/serve.h"

int main(int argc, char** argv) {
  using namespace memra::server;
  try {
    ServerConfig config =
        parse_server_config({argv + 1, argv + argc}, [](const char* n) { return std::getenv(n); });
    // --log-level as memra-server applies it (the logging test runs this server at debug).
    const std::string& l = config.log_level;
    if (l == "debug") memra::log_set_threshold(memra::LogLevel::debug);
    if (l == "warn") memra::log_set_threshold(memra::LogLevel::warn);
    if (l == "error") memra::log_set_threshold(memra::LogLevel::error);
    testing::FakeEngineOptions options;
    if (const char* ms = std::getenv("MEMRA_FAKE_STEP_MS")) options.step_ms = std::atoi(ms);
    if (config.engine.context_length > 0) options.context_length = config.engine.context_length;
    options.max_sequences = config.engine.max_sequences;
    options.max_queued = config.engine.max_queued;
    return run_server(config, [&](const ModelSpec& spec, const memra::EngineOptions&) {
      return testing::make_fake_model(options, spec.alias.empty() ? "fake-model" : spec.alias);
    });
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "memra-fake-server: error: %s\n", e.what());
    return 2;
  }
}
