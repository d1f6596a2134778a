// A small HTTP/1.1 server on POSIX sockets: keep-alive, Content-Length bodies, chunked streaming
// responses (SSE), and the limits a public endpoint needs (header/body size, read/idle/write
// timeouts, connection cap). A streaming handler can ask whether its client has gone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memra::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + headers
  size_t max_headers = 64;
  size_t max_body_bytes = 8u << 20;
  int read_timeout_ms = 30'000;   // from a request's first byte to its last
  int idle_timeout_ms = 15'000;   // keep-alive wait for the next request
  int write_timeout_ms = 30'000;  // a client that reads nothing for this long is dropped
  int max_connections = 512;
};

struct HttpRequest {
  std::string method;
  std::string path;    // target before '?'
  std::string query;   // after '?', raw
  HeaderList headers;  // names lower-cased
  std::string body;
  const std::string* header(std::string_view lower_name) const;
};

// One request/response exchange on a connection, handed to the handler. Exactly one of send() or
// stream_begin()..stream_end() must be used.
class HttpExchange {
 public:
  HttpExchange(int fd, const HttpLimits& limits, bool keep_alive)
      : fd_(fd), limits_(limits), keep_alive_(keep_alive) {}

  void send(int status, std::string_view content_type, std::string_view body,
            const HeaderList& extra = {});
  // Starts a chunked response. Returns false when the client is already gone.
  bool stream_begin(int status, std::string_view content_type, const HeaderList& extra = {});
  bool stream_write(std::string_view data);  // false: the client is gone (stop generating)
  void stream_end();
  // Non-blocking: has the peer closed or reset the connection?
  bool client_gone();

  bool responded() const { return responded_; }
  bool keep_alive() const { return keep_alive_ && !broken_; }
  int status() const { return status_; }

 private:
  bool write_all(std::string_view data);
  std::string head(int status, std::string_view content_type, const HeaderList& extra,
                   std::string_view framing);

  int fd_;
  const HttpLimits& limits_;
  bool keep_alive_;
  bool responded_ = false;
  bool streaming_ = false;
  bool broken_ = false;
  int status_ = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpExchange&)>;

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpHandler handler);
  ~HttpServer();

  // Binds and listens; throws Error(io) naming the address. port 0 picks a free port.
  void listen(const std::string& host, int port);
  int port() const { return port_; }
  // Accepts connections until stop_accepting(); returns when the listener is closed.
  void run();
  // Closes the listener (new connections are refused) and ends idle keep-alive waits.
  void stop_accepting();
  // Waits until no request is being handled; false on timeout.
  bool wait_idle(int timeout_ms);
  // Stops accepting, shuts every open connection down (a handler blocked in a write or a read
  // returns at once) and waits until every connection thread has left: after it no handler runs.
  void close_connections();
  int requests_in_flight() const { return in_flight_.load(); }

 private:
  void serve_connection(int fd);
  void connection_done(int fd);
  void trim_if_idle();
  static constexpr int kIdleTrimDelayMs = 1000;

  HttpLimits limits_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> in_flight_{0};
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::set<int> connections_;
  // Set when the last connection closes; the accept loop trims the heap after a second of no new
  // connection (once per idle period, never under load).
  std::atomic<bool> trim_pending_{false};
};

// Reads the requests a peer sends on the connected socket `fd` the way a connection of HttpServer
// does (pipelined, with the same limits and refusals), without answering them: `on_request` sees
// each parsed request. Returns the status the server would refuse the next one with (400, 408,
// 411, 413, 431, 505), or 0 once the peer closed or asked to close. For the parser's fuzz target.
int http_read_requests(int fd, const HttpLimits& limits,
                       const std::function<void(const HttpRequest&)>& on_request);

// "Bad Request" etc. for a status code.
const char* http_reason(int status);

}  // namespace memra::server
