// Names and ErrorCodes of the hub errors.
#include "hub/hub_error.h"

namespace memra::hub {

const char* hub_error_name(HubErrorKind kind) {
  switch (kind) {
    case HubErrorKind::bad_source:
      return "hub_bad_source";
    case HubErrorKind::offline:
      return "hub_offline";
    case HubErrorKind::unreachable:
      return "hub_unreachable";
    case HubErrorKind::unauthorized:
      return "hub_unauthorized";
    case HubErrorKind::gated:
      return "hub_gated";
    case HubErrorKind::not_found:
      return "hub_not_found";
    case HubErrorKind::bad_response:
      return "hub_bad_response";
    case HubErrorKind::http:
      return "hub_http_error";
    case HubErrorKind::hash_mismatch:
      return "hub_hash_mismatch";
    case HubErrorKind::disk_full:
      return "hub_disk_full";
    case HubErrorKind::cache:
      return "hub_cache_error";
  }
  return "hub_error";
}

ErrorCode hub_error_code(HubErrorKind kind) {
  switch (kind) {
    case HubErrorKind::bad_source:
    case HubErrorKind::unauthorized:
    case HubErrorKind::gated:
      return ErrorCode::invalid_argument;
    case HubErrorKind::offline:
    case HubErrorKind::not_found:
      return ErrorCode::not_found;
    case HubErrorKind::bad_response:
      return ErrorCode::malformed_file;
    case HubErrorKind::disk_full:
      return ErrorCode::resource_exhausted;
    case HubErrorKind::unreachable:
    case HubErrorKind::http:
    case HubErrorKind::hash_mismatch:
    case HubErrorKind::cache:
      return ErrorCode::io;
  }
  return ErrorCode::internal;
}

}  // namespace memra::hub
