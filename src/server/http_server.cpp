// HTTP/1.1 transport: accept loop, per-connection threads, request parsing under limits, and
// response framing (Content-Length or chunked). Why our own: cpp-httplib 0.11 cannot tell a
// streaming handler that its client hung up before a write fails (see docs/SERVING.md).
#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/heap_trim.h"
#include "core/log.h"

namespace memra::server {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Outcome of reading one request: 0 = a request is ready, -1 = close quietly, else an HTTP error
// status to answer before closing.
struct ReadResult {
  int status = 0;
  std::string message;
};

class RequestReader {
 public:
  RequestReader(int fd, const HttpLimits& limits, const std::atomic<bool>& stopping)
      : fd_(fd), limits_(limits), stopping_(stopping) {}

  ReadResult read(HttpRequest& req, bool& keep_alive) {
    size_t head_end = std::string::npos;
    Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(limits_.idle_timeout_ms);
    bool started = !buffer_.empty();
    if (started) deadline = Clock::now() + std::chrono::milliseconds(limits_.read_timeout_ms);
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > limits_.max_header_bytes) return {431, "request headers too large"};
      if (!started && stopping_.load()) return {-1, ""};
      int got = fill(deadline, started ? 0 : 100);
      if (got == 0) return {-1, ""};  // peer closed
      if (got == -2 && started && ms_left(deadline) == 0) return {408, "request read timed out"};
      if (got == -2 && !started && ms_left(deadline) == 0) return {-1, ""};  // idle keep-alive
      if (got == -1) return {-1, ""};
      if (got > 0 && !started) {
        started = true;
        deadline = Clock::now() + std::chrono::milliseconds(limits_.read_timeout_ms);
      }
    }
    if (head_end > limits_.max_header_bytes) return {431, "request headers too large"};
    ReadResult parsed = parse_head(std::string_view(buffer_).substr(0, head_end), req, keep_alive);
    buffer_.erase(0, head_end + 4);
    if (parsed.status != 0) return parsed;
    return read_body(req, deadline);
  }

 private:
  // >0 bytes read, 0 EOF, -1 error, -2 timeout slice elapsed.
  int fill(Clock::time_point deadline, int slice_ms) {
    int wait = ms_left(deadline);
    if (slice_ms > 0) wait = std::min(wait, slice_ms);
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, wait);
    if (r < 0) return errno == EINTR ? -2 : -1;
    if (r == 0) return -2;
    char chunk[16384];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0) return (errno == EINTR || errno == EAGAIN) ? -2 : -1;
    buffer_.append(chunk, static_cast<size_t>(n));
    return static_cast<int>(n);
  }

  ReadResult parse_head(std::string_view head, HttpRequest& req, bool& keep_alive) {
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    size_t sp1 = line.find(' ');
    size_t sp2 = line.rfind(' ');
    // sp1 == 0: an empty method (the line starts with a space; found by fuzz/http_fuzz.cpp).
    if (sp1 == std::string_view::npos || sp1 == 0 || sp2 == sp1)
      return {400, "malformed request line"};
    req.method = std::string(line.substr(0, sp1));
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return {505, "HTTP version not supported"};
    if (target.empty() || target.front() != '/') return {400, "malformed request target"};
    size_t q = target.find('?');
    req.path = std::string(target.substr(0, q));
    req.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
    keep_alive = version == "HTTP/1.1";
    std::string_view rest = eol == std::string_view::npos ? "" : head.substr(eol + 2);
    while (!rest.empty()) {
      size_t e = rest.find("\r\n");
      std::string_view h = rest.substr(0, e);
      rest = e == std::string_view::npos ? "" : rest.substr(e + 2);
      size_t colon = h.find(':');
      if (colon == std::string_view::npos || colon == 0) return {400, "malformed header line"};
      if (req.headers.size() >= limits_.max_headers) return {431, "too many request headers"};
      req.headers.emplace_back(lower(h.substr(0, colon)), std::string(trim(h.substr(colon + 1))));
    }
    if (const std::string* c = req.header("connection")) {
      std::string v = lower(*c);
      if (v.find("close") != std::string::npos) keep_alive = false;
      if (v.find("keep-alive") != std::string::npos) keep_alive = true;
    }
    return {};
  }

  ReadResult read_body(HttpRequest& req, Clock::time_point deadline) {
    if (req.header("transfer-encoding"))
      return {411, "chunked request bodies are not supported: send Content-Length"};
    const std::string* cl = req.header("content-length");
    if (!cl) return {};
    if (cl->empty() || cl->size() > 18 ||
        !std::all_of(cl->begin(), cl->end(), [](char c) { return c >= '0' && c <= '9'; }))
      return {400, "invalid Content-Length"};
    size_t length = std::stoull(*cl);
    if (length > limits_.max_body_bytes)
      return {413, "request body of " + std::to_string(length) + " bytes is over the limit of " +
                       std::to_string(limits_.max_body_bytes)};
    if (const std::string* expect = req.header("expect");
        expect && lower(*expect) == "100-continue")
      // Best effort and never blocking: a client that reads nothing cannot hold the reader here.
      (void)::send(fd_, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (buffer_.size() < length) {
      int got = fill(deadline, 0);
      if (got == 0 || got == -1) return {-1, ""};
      if (got == -2 && ms_left(deadline) == 0) return {408, "request body read timed out"};
    }
    req.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return {};
  }

  int fd_;
  const HttpLimits& limits_;
  const std::atomic<bool>& stopping_;
  std::string buffer_;  // bytes read past the current request (pipelining)
};

std::string error_body(int status, const std::string& message) {
  // Same shape as the API's errors (server/api_error.h), written by hand: no JSON library here.
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return "{\"error\":{\"message\":\"" + escaped + "\",\"type\":\"invalid_request_error\"," +
         "\"param\":null,\"code\":\"http_" + std::to_string(status) + "\"}}";
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

const char* http_reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

bool HttpExchange::write_all(std::string_view data) {
  if (broken_) return false;
  auto deadline = Clock::now() + std::chrono::milliseconds(limits_.write_timeout_ms);
  while (!data.empty()) {
    pollfd p{fd_, POLLOUT, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) {
      if (r < 0 && errno == EINTR) continue;
      broken_ = true;
      return false;
    }
    // Non-blocking: POLLOUT means only some room, and a blocking send of more than that would
    // wait for the client past the deadline (a reader that never reads would hold the thread).
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      broken_ = true;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string HttpExchange::head(int status, std::string_view content_type, const HeaderList& extra,
                               std::string_view framing) {
  status_ = status;
  responded_ = true;
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
  h += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [name, value] : extra) h += name + ": " + value + "\r\n";
  h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += framing;
  h += "\r\n";
  return h;
}

void HttpExchange::send(int status, std::string_view content_type, std::string_view body,
                        const HeaderList& extra) {
  std::string out =
      head(status, content_type, extra, "Content-Length: " + std::to_string(body.size()) + "\r\n");
  out += body;
  write_all(out);
}

bool HttpExchange::stream_begin(int status, std::string_view content_type,
                                const HeaderList& extra) {
  streaming_ = true;
  HeaderList all = extra;
  all.emplace_back("Cache-Control", "no-cache");
  all.emplace_back("X-Accel-Buffering", "no");
  return write_all(head(status, content_type, all, "Transfer-Encoding: chunked\r\n"));
}

bool HttpExchange::stream_write(std::string_view data) {
  if (data.empty()) return !broken_;
  char size[32];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string frame(size, static_cast<size_t>(n));
  frame += data;
  frame += "\r\n";
  return write_all(frame);
}

void HttpExchange::stream_end() {
  if (streaming_) write_all("0\r\n\r\n");
  streaming_ = false;
}

bool HttpExchange::client_gone() {
  if (broken_) return true;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return broken_ = true;
  char c;
  ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return broken_ = true;
  return false;  // pipelined bytes of a next request: still there
}

HttpServer::HttpServer(HttpLimits limits, HttpHandler handler)
    : limits_(limits), handler_(std::move(handler)) {
  if (::pipe(wake_pipe_) != 0) fail(ErrorCode::io, "pipe: {}", std::strerror(errno));
}

HttpServer::~HttpServer() {
  // Connection threads hold `this`: wait for them to leave before members go away.
  close_connections();
  if (wake_pipe_[0] >= 0) ::close(wake_pipe_[0]);
  if (wake_pipe_[1] >= 0) ::close(wake_pipe_[1]);
}

void HttpServer::listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0)
    fail(ErrorCode::invalid_argument, "--host {}: {}", host, ::gai_strerror(rc));
  int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 512) != 0) {
    std::string why = std::strerror(errno);
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    fail(ErrorCode::io, "cannot listen on {}:{}: {}", host, port, why);
  }
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  listen_fd_ = fd;
}

void HttpServer::run() {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int ready = ::poll(p, 2, trim_pending_.load() ? kIdleTrimDelayMs : -1);
    if (ready < 0) continue;
    if (ready == 0) {
      trim_if_idle();
      continue;
    }
    if (stopping_.load()) break;
    if (p[1].revents & POLLIN) {  // the last connection closed (stop_accepting sets stopping_)
      char drain[16];
      if (::read(wake_pipe_[0], drain, sizeof drain) < 0) MEMRA_LOG_WARN("http: wake pipe read");
      continue;
    }
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    {
      std::lock_guard lock(mutex_);
      if (static_cast<int>(connections_.size()) >= limits_.max_connections) {
        std::string body = error_body(503, "too many open connections");
        std::string out =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      connections_.insert(fd);
    }
    std::thread([this, fd] { serve_connection(fd); }).detach();
  }
  std::lock_guard lock(mutex_);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::stop_accepting() {
  if (stopping_.exchange(true)) return;
  char c = 1;
  if (::write(wake_pipe_[1], &c, 1) < 0) MEMRA_LOG_WARN("http: wake pipe write failed");
}

bool HttpServer::wait_idle(int timeout_ms) {
  std::unique_lock lock(mutex_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return in_flight_.load() == 0; });
}

void HttpServer::close_connections() {
  stop_accepting();
  std::unique_lock lock(mutex_);
  for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  idle_cv_.wait(lock, [&] { return connections_.empty(); });
}

void HttpServer::connection_done(int fd) {
  std::lock_guard lock(mutex_);
  // Erased, then closed, under the lock: once closed, the number is free and the accept loop can
  // hand it to the next connection at once; erasing it after that would drop the new connection
  // from connections_, and close_connections() would neither shut it down nor wait for its
  // handler (the engines were freed under it and its access-log line was never written). Under
  // the lock, close_connections() never shuts down a number that was closed and reused.
  connections_.erase(fd);
  ::close(fd);
  if (connections_.empty() && !trim_pending_.exchange(true)) {
    char c = 0;  // wakes the accept loop so that its poll starts the idle countdown
    if (::write(wake_pipe_[1], &c, 1) < 0) MEMRA_LOG_WARN("http: wake pipe write failed");
  }
  idle_cv_.notify_all();
}

void HttpServer::trim_if_idle() {
  {
    std::lock_guard lock(mutex_);
    if (!connections_.empty()) return;  // busy again: the next idle period trims
  }
  trim_pending_ = false;
  trim_free_heap();
}

int http_read_requests(int fd, const HttpLimits& limits,
                       const std::function<void(const HttpRequest&)>& on_request) {
  const std::atomic<bool> stopping{false};
  RequestReader reader(fd, limits, stopping);
  for (;;) {
    HttpRequest req;
    bool keep_alive = false;
    const ReadResult r = reader.read(req, keep_alive);
    if (r.status != 0) return std::max(r.status, 0);
    on_request(req);
    if (!keep_alive) return 0;
  }
}

void HttpServer::serve_connection(int fd) {
  RequestReader reader(fd, limits_, stopping_);
  for (;;) {
    HttpRequest req;
    bool keep_alive = false;
    ReadResult r = reader.read(req, keep_alive);
    if (r.status < 0) break;
    in_flight_.fetch_add(1);
    HttpExchange ex(fd, limits_, keep_alive && r.status == 0);
    if (r.status != 0) {
      ex.send(r.status, "application/json", error_body(r.status, r.message));
    } else {
      try {
        handler_(req, ex);
      } catch (const std::exception& e) {
        MEMRA_LOG_ERROR("http: handler for {} failed: {}", req.path, e.what());
      }
      if (!ex.responded()) ex.send(500, "application/json", error_body(500, "no response"));
    }
    bool again = ex.keep_alive() && !stopping_.load();
    {
      std::lock_guard lock(mutex_);
      in_flight_.fetch_sub(1);
      idle_cv_.notify_all();
    }
    if (!again) break;
  }
  connection_done(fd);
}

}  // namespace memra::server
