// libcurl transfers for the hub client (hub_http.h).
#include "hub/hub_http.h"

#include <curl/curl.h>

#include <cctype>
#include <exception>
#include <mutex>

#include "hub/hub_error.h"
#include "hub/hub_source.h"

namespace memra::hub {

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr uint64_t kMaxSize = uint64_t(1) << 50;  // 1 PiB: no real file is larger

struct Transfer {
  const HttpRequest* request;
  HttpResponse* response;
  size_t header_bytes = 0;
  bool begun = false;
  std::exception_ptr error;
  CURL* curl = nullptr;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  t->header_bytes += bytes;
  if (t->header_bytes > kMaxHeaderBytes) {
    t->error = std::make_exception_ptr(HubError(
        HubErrorKind::bad_response, fmt::format("{}: response headers exceed {} bytes",
                                                hub_printable(t->request->url), kMaxHeaderBytes)));
    return 0;
  }
  const std::string line(data, bytes);
  if (line.starts_with("HTTP/")) {  // a new status line (e.g. after 100 Continue): start over
    t->response->headers.clear();
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos)
    t->response->headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return bytes;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  try {
    if (!t->begun) {
      t->begun = true;
      curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->response->status);
      if (t->request->begin) t->request->begin(t->response->status, t->response->headers);
    }
    if (t->request->sink) {
      t->request->sink(data, bytes);
    } else {
      if (t->response->body.size() + bytes > t->request->max_body)
        hub_fail(HubErrorKind::bad_response, "{}: response body exceeds {} bytes",
                 hub_printable(t->request->url), t->request->max_body);
      t->response->body.append(data, bytes);
    }
  } catch (...) {
    t->error = std::current_exception();
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  return bytes;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

HttpResponse http_send(const HttpRequest& request) {
  global_init();
  HttpResponse response;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) hub_fail(HubErrorKind::unreachable, "libcurl could not start a transfer");
  Transfer t{&request, &response};
  t.curl = curl;
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  const std::string agent = "memra/0.1 (huggingface_hub-compatible cache)";
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, agent.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, request.timeout_s);
  // A transfer below 1 byte/s for timeout_s seconds is a stalled one: never hang.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, request.timeout_s);
  if (request.method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  char reason[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, reason);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (t.error) std::rethrow_exception(t.error);
  if (rc != CURLE_OK)
    hub_fail(HubErrorKind::unreachable, "{} {}: {}", request.method, hub_printable(request.url),
             reason[0] != '\0' ? reason : curl_easy_strerror(rc));
  if (!t.begun && request.begin) request.begin(response.status, response.headers);
  return response;
}

std::string http_origin(const std::string& url) {
  size_t start = 0;
  if (url.starts_with("http://"))
    start = 7;
  else if (url.starts_with("https://"))
    start = 8;
  else
    return "";
  const size_t end = url.find_first_of("/?#", start);
  return lower(url.substr(0, end == std::string::npos ? url.size() : end));
}

std::string http_join(const std::string& base, const std::string& location) {
  const bool chars_ok =
      location.size() <= 4096 && !location.empty() &&
      std::all_of(location.begin(), location.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (chars_ok && (location.starts_with("http://") || location.starts_with("https://")))
    return location;
  if (chars_ok && location[0] == '/' && !location.starts_with("//") && !http_origin(base).empty())
    return http_origin(base) + location;
  hub_fail(HubErrorKind::bad_response, "{} redirects to '{}', which is not an http(s) URL",
           hub_printable(base), hub_printable(location));
}

std::string http_escape(const std::string& text, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
      out += static_cast<char>(c);
    else
      out += {'%', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

bool http_parse_size(const std::string& text, uint64_t& out) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= kMaxSize) return false;
  out = v;
  return true;
}

}  // namespace memra::hub
