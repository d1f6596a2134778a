// API errors in the OpenAI shape {"error":{"message","type","param","code"}} with their HTTP
// status. Protocol code throws ApiError; the router turns it (and memra::Error) into a response.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace memra::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string param, std::string code,
           const std::string& message)
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}

  int status;
  std::string type;       // invalid_request_error, authentication_error, ...
  std::string param;      // the request field at fault, empty = null
  std::string code;       // machine-readable, empty = null
  int retry_after_s = 0;  // > 0: send Retry-After
};

// 400 invalid_request_error naming `param`.
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format,
                              Args&&... args) {
  throw ApiError(400, "invalid_request_error", param, param.empty() ? "" : "invalid_value",
                 fmt::format(format, std::forward<Args>(args)...));
}

// 400 for a known field whose value memra does not implement (refused by name).
template <typename... Args>
[[noreturn]] void unsupported_field(const std::string& param, fmt::format_string<Args...> format,
                                    Args&&... args) {
  throw ApiError(400, "invalid_request_error", param, "unsupported_parameter",
                 fmt::format(format, std::forward<Args>(args)...));
}

nlohmann::json api_error_json(const ApiError& e);
// Anthropic's shape, {"type": "error", "error": {"type", "message"}}, its type from the status.
nlohmann::json anthropic_error_json(const ApiError& e);
// Maps an engine/tokenizer/template Error to the status a client should see.
ApiError api_error_from(const Error& e);

// JSON text that never throws on invalid UTF-8 (token bytes can split characters): bad bytes
// become U+FFFD.
std::string json_dump(const nlohmann::json& j);
std::string json_dump(const nlohmann::ordered_json& j);

}  // namespace memra::server
