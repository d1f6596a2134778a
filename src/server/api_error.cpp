// OpenAI-shaped error bodies and the mapping from memra::Error codes to HTTP statuses.
#include "server/api_error.h"

namespace memra::server {

nlohmann::json api_error_json(const ApiError& e) {
  nlohmann::json err = {{"message", e.what()},
                        {"type", e.type},
                        {"param", e.param.empty() ? nlohmann::json() : nlohmann::json(e.param)},
                        {"code", e.code.empty() ? nlohmann::json() : nlohmann::json(e.code)}};
  return {{"error", err}};
}

nlohmann::json anthropic_error_json(const ApiError& e) {
  const char* type = e.status == 400   ? "invalid_request_error"
                     : e.status == 401 ? "authentication_error"
                     : e.status == 403 ? "permission_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 429 ? "rate_limit_error"
                     : e.status == 503 ? "overloaded_error"
                     : e.status < 500  ? "invalid_request_error"
                                       : "api_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

ApiError api_error_from(const Error& e) {
  switch (e.code()) {
    case ErrorCode::invalid_argument:
    case ErrorCode::malformed_file:
      return ApiError(400, "invalid_request_error", "", "", e.what());
    case ErrorCode::unsupported:
      return ApiError(400, "invalid_request_error", "", "unsupported", e.what());
    case ErrorCode::not_found:
      return ApiError(404, "not_found_error", "", "not_found", e.what());
    case ErrorCode::resource_exhausted: {
      ApiError out(429, "rate_limit_error", "", "queue_full", e.what());
      out.retry_after_s = 1;
      return out;
    }
    default:
      return ApiError(500, "server_error", "", "internal_error", e.what());
  }
}

std::string json_dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace memra::server
