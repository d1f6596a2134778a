// `memra pull hf:org/name[:QUANT][@revision]`: downloads a model into the Hugging Face cache
// without serving it, asking the hub for the revision's current commit even when a copy is
// cached (so it also updates), and prints the local path on stdout. Progress goes to stderr.
#include <cstdio>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "hub/hub.h"

namespace memra::cli {
namespace {

constexpr const char* kUsage =
    "usage: memra pull hf:org/name[:QUANT][@revision] [--quiet]\n"
    "  Downloads the model into the Hugging Face cache (HF_HUB_CACHE / HF_HOME) from HF_ENDPOINT\n"
    "  (default https://huggingface.co), with HF_TOKEN for gated or private repositories, and\n"
    "  prints its local path. With HF_HUB_OFFLINE=1 it only checks the cache.\n"
    "  --quiet   no progress output\n";

int run_pull(const Args& args) {
  std::string source;
  bool quiet = false;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      fail(ErrorCode::invalid_argument, "unknown option '{}'\n{}", a, kUsage);
    } else if (source.empty()) {
      source = a;
    } else {
      fail(ErrorCode::invalid_argument, "unexpected argument '{}'\n{}", a, kUsage);
    }
  }
  if (source.empty()) fail(ErrorCode::invalid_argument, "missing SOURCE\n{}", kUsage);
  if (!source.starts_with("hf:"))
    fail(ErrorCode::invalid_argument, "'{}' is not an hf: source (hf:org/name[:QUANT])\n{}", source,
         kUsage);
  hub::HubResolveOptions options;
  options.refresh = true;
  if (quiet) options.progress = [](const std::string&, uint64_t, uint64_t) {};
  const hub::HubResolved r = hub::hub_resolve(source, hub::hub_settings_from_env(), options);
  if (!quiet)
    std::fprintf(stderr, "%s: commit %s, %zu file(s), %.1f MiB downloaded\n", r.display.c_str(),
                 r.commit.c_str(), r.files.size(), r.downloaded_bytes / 1048576.0);
  std::printf("%s\n", r.path.c_str());
  return 0;
}

const Registration kReg{{"pull", "download a model from the Hugging Face Hub", &run_pull}};

}  // namespace
}  // namespace memra::cli
