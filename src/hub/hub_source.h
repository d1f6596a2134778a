// What the hub client is told: the parsed hf:org/name[:QUANT][@revision] source, the settings
// from the environment (huggingface_hub's variables and defaults), and the checks every name that
// becomes a path or a URL passes (repo parts, revisions, file paths from the hub).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace memra::hub {

struct HubSource {
  std::string org, name;
  std::string quant;     // empty: no :QUANT
  std::string revision;  // "main" unless @revision was given
  std::string repo() const { return org + "/" + name; }
  // What logs and /v1/models call it: org/name[:QUANT][@revision when not main].
  std::string display() const;
};

// Parses "hf:org/name[:QUANT][@revision]"; HubError(bad_source) naming the rule broken.
HubSource hub_source_parse(const std::string& source);

struct HubSettings {
  std::filesystem::path cache;  // the hub cache root (models--org--name folders live here)
  std::string endpoint;       // HF_ENDPOINT without a trailing '/', default https://huggingface.co
  std::string token;          // HF_TOKEN, else the token file; empty = anonymous
  std::string token_origin;   // where the token came from (for error messages), "" when none
  bool offline = false;       // HF_HUB_OFFLINE: never touch the network
  bool progress_bars = true;  // HF_HUB_DISABLE_PROGRESS_BARS turns the terminal bar off
  long timeout_s = 10;        // HF_HUB_DOWNLOAD_TIMEOUT: connect and stall timeout, seconds
};

using EnvFn = std::function<const char*(const char*)>;

// From the environment, in huggingface_hub's order: cache HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
// HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; token HF_TOKEN, legacy
// HUGGING_FACE_HUB_TOKEN, then the file HF_TOKEN_PATH (default HF_HOME/token). A malformed
// HF_ENDPOINT, token or timeout is HubError(bad_source) naming the variable.
HubSettings hub_settings_from_env(const EnvFn& env);
HubSettings hub_settings_from_env();

// org or name: 1-96 of [A-Za-z0-9._-], not "."/"..", no "--" (the cache folder separator).
bool hub_valid_repo_part(std::string_view s);
// A branch, tag or commit: 1-200 of [A-Za-z0-9._/-], no "." or ".." segment, no "//", leading
// '/' or '-', no trailing '/' (refs/pr/1 is fine: it becomes refs/refs/pr/1 in the cache, as
// huggingface_hub).
bool hub_valid_revision(std::string_view s);
bool hub_is_commit(std::string_view s);  // 40 lowercase hex digits
// A file path from the hub that becomes a path under snapshots/<commit>/: relative, '/'-separated
// segments of [A-Za-z0-9._+=@,() -] (no segment "." or "..", none empty or starting with a space),
// at most 8 deep and 512 bytes. Anything else could escape the cache or confuse a shell.
bool hub_valid_file_path(std::string_view path);
// An etag used as a blob file name: 1-128 of [A-Za-z0-9_-] (huggingface_hub's normal form).
bool hub_valid_etag(std::string_view etag);

// Text from the network made safe to print: printable ASCII, at most `max` characters.
std::string hub_printable(std::string_view text, size_t max = 200);

}  // namespace memra::hub
