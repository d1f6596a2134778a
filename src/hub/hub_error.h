// Named hub errors. Every failure to get a model from the Hugging Face Hub is a HubError whose
// message starts with its kind's name ("hub_gated: ...") and says what to do; the kind also picks
// the ErrorCode (and so the exit code) the CLI and the server report.
#pragma once

#include <string>

#include "core/error.h"

namespace memra::hub {

enum class HubErrorKind {
  bad_source,     // the hf: spec itself is malformed
  offline,        // HF_HUB_OFFLINE is set and the model is not (completely) in the cache
  unreachable,    // no network, DNS failure, refused connection, timeout, cut connection
  unauthorized,   // 401: private repo or a missing / invalid token
  gated,          // 403 (or X-Error-Code GatedRepo): accept the license and set HF_TOKEN
  not_found,      // 404: no such repo, revision, file or quant
  bad_response,   // the hub's answer breaks the protocol (JSON, headers, sizes, file names)
  http,           // another HTTP status (5xx, 429...)
  hash_mismatch,  // a downloaded blob does not match the hub's hash (the partial is removed)
  disk_full,      // not enough space in the cache (ENOSPC or the free-space check)
  cache,          // the cache folder cannot be written or holds something unexpected
};

const char* hub_error_name(HubErrorKind kind);
ErrorCode hub_error_code(HubErrorKind kind);

class HubError : public Error {
 public:
  HubError(HubErrorKind kind, const std::string& message)
      : Error(hub_error_code(kind), std::string(hub_error_name(kind)) + ": " + message),
        kind_(kind) {}
  HubErrorKind kind() const { return kind_; }

 private:
  HubErrorKind kind_;
};

template <typename... Args>
[[noreturn]] void hub_fail(HubErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw HubError(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace memra::hub
