// Drives App::handle over a socketpair (no network) and parses the HTTP response back, so tests
// see exactly the bytes a client would.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/app.h"

namespace memra::server::testing {

struct Response {
  int status = 0;
  std::string head;
  std::string body;  // de-chunked
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

inline std::string dechunk(const std::string& raw) {
  std::string out;
  size_t at = 0;
  while (at < raw.size()) {
    size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos) break;
    size_t n = std::stoul(raw.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    out += raw.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

inline Response call(App& app, const std::string& method, const std::string& path,
                     const std::string& body, const HeaderList& headers = {}) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return {};
  std::string raw;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fds[1], buf, sizeof buf)) > 0) raw.append(buf, static_cast<size_t>(n));
  });
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.headers = headers;
  req.body = body;
  HttpLimits limits;
  {
    HttpExchange ex(fds[0], limits, false);
    app.handle(req, ex);
  }
  ::shutdown(fds[0], SHUT_WR);
  reader.join();
  ::close(fds[0]);
  ::close(fds[1]);
  Response r;
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  r.head = raw.substr(0, head_end);
  r.status = std::stoi(raw.substr(9, 3));
  r.body = raw.substr(head_end + 4);
  if (r.head.find("Transfer-Encoding: chunked") != std::string::npos) r.body = dechunk(r.body);
  return r;
}

}  // namespace memra::server::testing
