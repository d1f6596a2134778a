// Model sources: local paths as they are, hf:org/name[:QUANT][@revision] through the hub client
// (src/hub: the Hugging Face cache, downloading on first use).
#include "formats/model_source.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "hub/hub.h"
#include "hub/hub_select.h"

namespace memra {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

fs::path home_dir() {
  const std::string home = env_or_empty("HOME");
  if (home.empty()) fail(ErrorCode::invalid_argument, "HOME is not set; cannot find the cache");
  return fs::path(home);
}

ResolvedModel resolve_hf(const std::string& source) {
  const hub::HubResolved r = hub::hub_resolve(source, hub::hub_settings_from_env());
  if (!r.checkpoint) {
    const hub::SplitPart part = hub::hub_split_part(r.path);
    if (part.count > 1)
      fail(ErrorCode::unsupported,
           "model {} is a split GGUF ({} files, in {}); memra loads single-file GGUF only: "
           "merge the parts with `llama-gguf-split --merge {} OUT.gguf` and serve OUT.gguf",
           r.display, part.count, fs::path(r.path).parent_path().string(), r.path);
  }
  return {r.path, r.display};
}

}  // namespace

ResolvedModel model_source_resolve(const std::string& source) {
  if (source.starts_with("hf:")) return resolve_hf(source);
  if (source.empty()) fail(ErrorCode::invalid_argument, "model source is empty");
  std::error_code ec;
  if (!fs::exists(source, ec)) {
    const bool looks_like_repo = source.find('/') != std::string::npos && source[0] != '/' &&
                                 source[0] != '.' &&
                                 std::count(source.begin(), source.end(), '/') == 1;
    fail(ErrorCode::not_found, "model path '{}' does not exist{}", source,
         looks_like_repo ? fmt::format(" (for the Hugging Face cache, write hf:{})", source) : "");
  }
  fs::path p = fs::path(source).lexically_normal();
  std::string display = p.filename().string();
  if (display.empty()) display = p.parent_path().filename().string();
  if (display.ends_with(".gguf")) display.resize(display.size() - 5);
  return {source, display.empty() ? source : display};
}

std::string model_source_default_path() {
  if (auto v = env_or_empty("MEMRA_DEFAULT_MODEL"); !v.empty()) return v;
  fs::path dir = env_or_empty("MEMRA_MODEL_DIR");
  if (dir.empty()) dir = home_dir() / ".cache" / "memra" / "models";
  return (dir / "gemma-3-270m-q4_k_m.gguf").string();
}

}  // namespace memra
