// memra: the command-line entry point. Dispatches to a subcommand and turns memra::Error into a
// one-line message on stderr with the error's exit code.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "core/error.h"

namespace memra::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace

Registration::Registration(Command command) {
  auto& all = registry();
  auto at = std::find_if(all.begin(), all.end(),
                         [&](const Command& c) { return std::string(c.name) > command.name; });
  all.insert(at, command);
}

const std::vector<Command>& commands() {
  return registry();
}

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: memra <command> [options]\n\ncommands:\n");
  for (const Command& c : commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\nmemra <command> --help shows a command's options.\n");
}

}  // namespace
}  // namespace memra::cli

int main(int argc, char** argv) {
  using namespace memra::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--version") {
    std::printf("memra %s\n", MEMRA_VERSION);
    return 0;
  }
  for (const Command& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(Args(argv + 2, argv + argc));
    } catch (const memra::Error& e) {
      std::fprintf(stderr, "memra %s: error: %s\n", c.name, e.what());
      return memra::error_exit_code(e.code());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memra %s: internal error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "memra: unknown command '%s' (see memra --help)\n", name.c_str());
  return 2;
}
