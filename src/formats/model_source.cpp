// Model sources resolved offline: local paths as they are, hf:org/name[:QUANT] through the
// Hugging Face hub cache layout (models--org--name/{refs,snapshots,blobs}). Only the local
// filesystem is read; a missing model is an error naming what is missing and where.
#include "formats/model_source.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

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

// HF_HUB_CACHE, legacy HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub,
// ~/.cache/huggingface/hub (huggingface_hub's order).
fs::path hf_hub_cache() {
  if (auto v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return v;
  if (auto v = env_or_empty("HUGGINGFACE_HUB_CACHE"); !v.empty()) return v;
  if (auto v = env_or_empty("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (auto v = env_or_empty("XDG_CACHE_HOME"); !v.empty())
    return fs::path(v) / "huggingface" / "hub";
  return home_dir() / ".cache" / "huggingface" / "hub";
}

bool valid_repo_part(std::string_view s) {
  if (s.empty() || s.size() > 96 || s == "." || s == ".." || s.find("--") != s.npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string read_ref(const fs::path& ref_path, const std::string& repo) {
  std::ifstream in(ref_path);
  std::string commit;
  if (!in || !std::getline(in, commit))
    fail(ErrorCode::not_found,
         "model {} is not in the Hugging Face cache: {} is missing (memra never downloads; "
         "fetch it with `hf download {}`)",
         repo, ref_path.string(), repo);
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back())))
    commit.pop_back();
  const bool hex = commit.size() == 40 && std::all_of(commit.begin(), commit.end(), [](char c) {
                     return std::isxdigit(static_cast<unsigned char>(c));
                   });
  if (!hex)
    fail(ErrorCode::malformed_file, "{}: expected a 40-hex commit id, got '{}'", ref_path.string(),
         commit);
  return commit;
}

// .gguf files in the snapshot and its direct subfolders (repos often keep one quant per folder),
// as paths relative to the snapshot, sorted.
std::vector<std::string> snapshot_ggufs(const fs::path& snapshot) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 1) it.disable_recursion_pending();
    const fs::path& p = it->path();
    if (lower(p.extension().string()) == ".gguf")
      out.push_back(p.lexically_relative(snapshot).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// A snapshot entry is a symlink into blobs/; a dangling one means an interrupted download.
fs::path existing(const fs::path& p, const std::string& repo) {
  if (!fs::exists(p))
    fail(ErrorCode::not_found, "model {}: {} points to a missing blob (incomplete download?)", repo,
         p.string());
  return p;
}

fs::path pick_in_snapshot(const fs::path& snapshot, const std::string& repo,
                          const std::string& quant) {
  const std::vector<std::string> ggufs = snapshot_ggufs(snapshot);
  if (quant.empty()) {
    if (fs::exists(snapshot / "config.json") || ggufs.empty()) return snapshot;
    if (ggufs.size() == 1) return existing(snapshot / ggufs[0], repo);
    fail(ErrorCode::invalid_argument,
         "model {} has several GGUF files ({}); pick one with hf:{}:QUANT", repo, join(ggufs),
         repo);
  }
  std::vector<std::string> matches;
  for (const std::string& g : ggufs) {
    if (lower(g).find(lower(quant)) != std::string::npos) matches.push_back(g);
  }
  if (matches.size() == 1) return existing(snapshot / matches[0], repo);
  fail(matches.empty() ? ErrorCode::not_found : ErrorCode::invalid_argument,
       "model {}: {} GGUF files match quant '{}' in {} (files there: {})", repo,
       matches.empty() ? "no" : "several", quant, snapshot.string(), join(ggufs));
}

ResolvedModel resolve_hf(const std::string& source) {
  std::string spec = source.substr(3);
  std::string quant;
  if (const size_t colon = spec.find(':'); colon != std::string::npos) {
    quant = spec.substr(colon + 1);
    spec.resize(colon);
    if (quant.empty()) fail(ErrorCode::invalid_argument, "'{}': empty quant after ':'", source);
  }
  const size_t slash = spec.find('/');
  const std::string org = spec.substr(0, slash);
  const std::string name = slash == std::string::npos ? "" : spec.substr(slash + 1);
  if (!valid_repo_part(org) || !valid_repo_part(name) ||
      !valid_repo_part(quant.empty() ? "q" : quant))
    fail(ErrorCode::invalid_argument,
         "'{}' is not hf:org/name[:QUANT] (letters, digits, '-', '_', '.' in each part)", source);
  const std::string repo = org + "/" + name;
  const fs::path cache = hf_hub_cache();
  const fs::path repo_dir = cache / ("models--" + org + "--" + name);
  if (!fs::is_directory(repo_dir))
    fail(ErrorCode::not_found,
         "model {} is not in the Hugging Face cache: {} does not exist (memra never downloads; "
         "fetch it with `hf download {}` or set HF_HUB_CACHE / HF_HOME)",
         repo, repo_dir.string(), repo);
  const std::string commit = read_ref(repo_dir / "refs" / "main", repo);
  const fs::path snapshot = repo_dir / "snapshots" / commit;
  if (!fs::is_directory(snapshot))
    fail(ErrorCode::not_found, "model {}: refs/main names snapshot {} but {} does not exist", repo,
         commit, snapshot.string());
  const fs::path picked = pick_in_snapshot(snapshot, repo, quant);
  return {picked.string(), quant.empty() ? repo : repo + ":" + quant};
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
