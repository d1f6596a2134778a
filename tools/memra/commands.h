// The memra CLI's subcommands. Each lives in its own tools/memra/cmd_<name>.cpp, compiled into the
// memra executable (not a library, so its registration is never dropped), and receives the
// arguments after its name; it returns the process exit code (0 ok, 2 bad input, 1 other failure)
// and may throw memra::Error, which main() reports.
#pragma once

#include <string>
#include <vector>

namespace memra::cli {

using Args = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

// All registered subcommands, sorted by name.
const std::vector<Command>& commands();

// Each cmd_<name>.cpp registers itself at static-initialization time:
//   static const memra::cli::Registration kReg{{"inspect", "show a model file", &run_inspect}};
struct Registration {
  explicit Registration(Command command);
};

}  // namespace memra::cli
