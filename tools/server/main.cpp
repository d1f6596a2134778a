// memra-server: serves the OpenAI-compatible HTTP API (docs/SERVING.md). All the work is in
// src/server (serve_main); this file only turns errors into a message and an exit code.
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "server/serve.h"

int main(int argc, char** argv) {
  try {
    return memra::server::serve_main({argv + 1, argv + argc}, "memra-server");
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "memra-server: error: %s\n", e.what());
    return memra::error_exit_code(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memra-server: internal error: %s\n", e.what());
    return 1;
  }
}
