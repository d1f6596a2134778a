// memra's error type. Untrusted input (model files, requests, templates) fails with an Error whose
// message names the problem; each ErrorCode maps to a process exit code and an HTTP status so the
// CLI and the server report the same failure the same way.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace memra {

enum class ErrorCode {
  invalid_argument,    // a caller-supplied value is wrong (flag, request field)
  malformed_file,      // a model/tokenizer file violates its format
  unsupported,         // well-formed but not something memra implements; refused by name
  not_found,           // a file, model or tensor that should exist does not
  io,                  // the OS refused a read, write or map
  resource_exhausted,  // a limit was hit (memory, queue, budget)
  internal,            // a memra bug: an invariant did not hold
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Process exit code for an error: 2 for bad input (usage, malformed or unsupported files), 1
// otherwise.
int error_exit_code(ErrorCode code);
const char* error_code_name(ErrorCode code);

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace memra
