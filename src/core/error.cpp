// Exit-code and name tables for ErrorCode.
#include "core/error.h"

namespace memra {

int error_exit_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::malformed_file:
    case ErrorCode::unsupported:
    case ErrorCode::not_found:
      return 2;
    default:
      return 1;
  }
}

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::malformed_file:
      return "malformed_file";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::io:
      return "io";
    case ErrorCode::resource_exhausted:
      return "resource_exhausted";
    case ErrorCode::internal:
      return "internal";
  }
  return "unknown";
}

}  // namespace memra
