// A small HTTP client over libcurl for the hub: one request at a time, no redirect followed
// (the caller decides, so a token never leaves the hub's host), every header and body bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace memra::hub {

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  long timeout_s = 10;               // connect timeout, and the longest a transfer may stall
  size_t max_body = 32u << 20;       // when body is captured (no sink)
  // Streams the body instead of capturing it; called once the status and headers are known
  // (`begin`), then per chunk. An exception thrown from either aborts the transfer and is
  // rethrown by http_send.
  std::function<void(long status, const std::map<std::string, std::string>& headers)> begin;
  std::function<void(const char* data, size_t size)> sink;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lowercase names; the last value of a repeat
  std::string body;                            // captured body (empty with a sink)
};

// Sends a request. A transport failure (DNS, refused, timeout, cut connection, TLS) is
// HubError(unreachable) naming the URL and curl's reason; oversized headers or body are
// HubError(bad_response). HTTP error statuses are returned, not thrown.
HttpResponse http_send(const HttpRequest& request);

// The host[:port] of an http(s) URL, lowercase; empty when it is not one.
std::string http_origin(const std::string& url);
// Resolves a Location header against the URL it came from: absolute http(s) URLs as they are,
// "/path" on the same origin. Anything else (other schemes, protocol-relative, control
// characters, over 4096 bytes) is HubError(bad_response).
std::string http_join(const std::string& base, const std::string& location);
// Percent-encodes a path (keeps unreserved characters and '/'), or a segment ("/" encoded).
std::string http_escape(const std::string& text, bool keep_slash);
// A header value as a byte count: false unless it is a plain decimal number below 2^50.
bool http_parse_size(const std::string& text, uint64_t& out);

}  // namespace memra::hub
