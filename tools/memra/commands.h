// The memra CLI's subcommands. Each lives in its own cmd_<name>.cpp and receives the arguments
// after its name; it returns the process exit code (0 ok, 2 bad input, 1 other failure) and may
// throw memra::Error, which main() reports.
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

// All subcommands, in the order `memra --help` lists them.
const std::vector<Command>& commands();

}  // namespace memra::cli
