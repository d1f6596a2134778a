// `memra serve`: the OpenAI-compatible server, same flags and MEMRA_* variables as memra-server.
#include "commands.h"
#include "server/serve.h"

namespace memra::cli {
namespace {

int run_serve(const Args& args) {
  return memra::server::serve_main(args, "memra serve");
}

const Registration kReg{{"serve", "serve the OpenAI-compatible HTTP API", &run_serve}};

}  // namespace
}  // namespace memra::cli
