// `memra bench-serve`'s HTTP/1.1 client over plain POSIX sockets: one connection per request
// ("Connection: close"), a deadline over the whole request (connect, send, every read), chunked
// and Content-Length bodies, and server-sent events handed to a sink the moment they arrive, so
// the time of each streamed token is the time its bytes reached us.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "bench_serve.h"
#include "core/error.h"

namespace memra::cli::bench_serve {

Url parse_url(const std::string& text) {
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0)
    fail(ErrorCode::invalid_argument,
         "--url {}: https is not supported (no TLS built in); use http://", text);
  if (text.rfind(scheme, 0) != 0)
    fail(ErrorCode::invalid_argument, "--url {}: expected http://HOST[:PORT][/PREFIX]", text);
  const std::string rest = text.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  Url u;
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  // A base URL that ends in /v1 (what OpenAI clients take) means the same server.
  if (u.prefix.size() >= 3 && u.prefix.compare(u.prefix.size() - 3, 3, "/v1") == 0)
    u.prefix.resize(u.prefix.size() - 3);
  const size_t colon = authority.rfind(':');
  const bool bracketed = !authority.empty() && authority.front() == '[';
  if (colon != std::string::npos && (!bracketed || authority[colon - 1] == ']')) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
    u.port = "80";
  }
  if (u.host.size() >= 2 && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty() || u.port.empty() ||
      u.port.find_first_not_of("0123456789") != std::string::npos)
    fail(ErrorCode::invalid_argument, "--url {}: expected http://HOST[:PORT][/PREFIX]", text);
  return u;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxBodyBytes = size_t{64} << 20;
constexpr size_t kMaxHeaderBytes = 64 << 10;

// Thrown inside this file only; http_request turns it into HttpResponse fields.
struct Failure {
  const char* kind;
  std::string what;
};

class Socket {
 public:
  explicit Socket(Clock::time_point deadline) : deadline_(deadline) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  void connect(const Url& url) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* raw = nullptr;
    const int rc = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &raw);
    if (rc != 0) throw Failure{"transport", std::string("resolve: ") + gai_strerror(rc)};
    const std::unique_ptr<addrinfo, void (*)(addrinfo*)> res(raw, ::freeaddrinfo);
    std::string last = "no address";
    for (addrinfo* a = res.get(); a != nullptr; a = a->ai_next) {
      fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd_ < 0) continue;
      if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0) return;
      if (errno == EINPROGRESS) {
        if (!wait(POLLOUT)) throw Failure{"timeout", "timed out connecting"};
        if (connected()) return;
      }
      last = std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    }
    throw Failure{"transport", "connect: " + last};
  }

  void send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += size_t(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!wait(POLLOUT)) throw Failure{"timeout", "timed out sending the request"};
      } else {
        throw Failure{"transport", std::string("send: ") + std::strerror(errno)};
      }
    }
  }

  // Appends what arrives to `buf`; false at the peer's end of stream.
  bool read_some(std::string& buf) {
    char chunk[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buf.append(chunk, size_t(n));
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN) throw Failure{"transport", std::string("recv: ") + std::strerror(errno)};
      if (!wait(POLLIN)) throw Failure{"timeout", "timed out waiting for the response"};
    }
  }

 private:
  // Waits for `events` until the deadline; false on timeout.
  bool wait(short events) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, events, 0};
      const int rc = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR)
        throw Failure{"transport", std::string("poll: ") + std::strerror(errno)};
    }
  }

  bool connected() {
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return false;
    errno = err;
    return err == 0;
  }

  int fd_ = -1;
  Clock::time_point deadline_;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits the SSE byte stream into events (blank-line separated) and hands each event's data to
// the sink; \r\n and \n line ends both occur in the wild.
class SseParser {
 public:
  explicit SseParser(const SseSink& sink) : sink_(sink) {}

  // False once the sink asked to stop.
  bool feed(std::string_view bytes) {
    pending_.append(bytes);
    size_t start = 0;
    for (;;) {
      const size_t nl = pending_.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(pending_.data() + start, nl - start);
      start = nl + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        if (has_data_ && !sink_(data_)) return false;
        data_.clear();
        has_data_ = false;
      } else if (line.rfind("data:", 0) == 0) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (has_data_) data_ += '\n';
        data_.append(line);
        has_data_ = true;
      }
      if (data_.size() > kMaxBodyBytes) throw Failure{"transport", "an SSE event over 64 MiB"};
    }
    pending_.erase(0, start);
    if (pending_.size() > kMaxBodyBytes) throw Failure{"transport", "an SSE line over 64 MiB"};
    return true;
  }

 private:
  const SseSink& sink_;
  std::string pending_, data_;
  bool has_data_ = false;
};

struct Head {
  int status = 0;
  int64_t content_length = -1;
  bool chunked = false;
  bool event_stream = false;
};

// Reads the status line and headers; `buf` keeps whatever body bytes came with them.
Head read_head(Socket& s, std::string& buf) {
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > kMaxHeaderBytes) throw Failure{"transport", "response headers over 64 KiB"};
    if (!s.read_some(buf)) throw Failure{"transport", "connection closed before a response"};
  }
  Head h;
  const std::string head = buf.substr(0, end);
  buf.erase(0, end + 4);
  if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12)
    throw Failure{"transport", "not an HTTP/1.x response"};
  h.status = std::atoi(head.c_str() + 9);
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line =
        head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    pos = next;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lower(line.substr(0, colon));
    std::string value = lower(line.substr(colon + 1));
    value.erase(0, value.find_first_not_of(" \t"));
    if (name == "content-length") h.content_length = std::atoll(value.c_str());
    if (name == "transfer-encoding" && value.find("chunked") != std::string::npos) h.chunked = true;
    if (name == "content-type" && value.rfind("text/event-stream", 0) == 0) h.event_stream = true;
  }
  return h;
}

// Calls `out` with each piece of the decoded body as it arrives; stops when `out` says so.
template <typename Out>
void read_body(Socket& s, const Head& h, std::string& buf, Out&& out) {
  if (!h.chunked) {
    int64_t left = h.content_length;  // -1: until the peer closes
    for (;;) {
      if (!buf.empty()) {
        const size_t take = left < 0 ? buf.size() : std::min<size_t>(buf.size(), size_t(left));
        if (!out(std::string_view(buf.data(), take))) return;
        if (left >= 0) left -= int64_t(take);
        buf.clear();
      }
      if (left == 0) return;
      if (!s.read_some(buf)) {
        if (left > 0) throw Failure{"transport", "connection closed mid-body"};
        return;
      }
    }
  }
  for (;;) {  // chunked: size line, data, CRLF; a zero size ends it
    size_t eol;
    while ((eol = buf.find("\r\n")) == std::string::npos) {
      if (buf.size() > 1024) throw Failure{"transport", "bad chunk size line"};
      if (!s.read_some(buf)) throw Failure{"transport", "connection closed mid-body"};
    }
    const uint64_t size = std::strtoull(buf.c_str(), nullptr, 16);
    if (size > kMaxBodyBytes) throw Failure{"transport", "a chunk over 64 MiB"};
    buf.erase(0, eol + 2);
    if (size == 0) return;
    while (buf.size() < size + 2)
      if (!s.read_some(buf)) throw Failure{"transport", "connection closed mid-chunk"};
    if (!out(std::string_view(buf.data(), size))) return;
    buf.erase(0, size + 2);
  }
}

}  // namespace

HttpResponse http_request(const Url& url, const std::string& method, const std::string& path,
                          const std::string& body, const std::string& api_key, double timeout_s,
                          const SseSink* sse) {
  HttpResponse r;
  const auto deadline = Clock::now() + std::chrono::microseconds(int64_t(timeout_s * 1e6));
  try {
    Socket s(deadline);
    s.connect(url);
    std::string req = method + " " + url.prefix + path + " HTTP/1.1\r\nHost: " + url.host + ":" +
                      url.port + "\r\nConnection: close\r\nAccept: */*\r\n";
    if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
    if (method == "POST")
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    req += "\r\n" + body;
    s.send_all(req);
    std::string buf;
    const Head h = read_head(s, buf);
    r.status = h.status;
    r.event_stream = h.event_stream && h.status == 200 && sse != nullptr;
    if (r.event_stream) {
      SseParser parser(*sse);
      read_body(s, h, buf, [&](std::string_view piece) { return parser.feed(piece); });
    } else {
      read_body(s, h, buf, [&](std::string_view piece) {
        if (r.body.size() + piece.size() > kMaxBodyBytes)
          throw Failure{"transport", "response body over 64 MiB"};
        r.body.append(piece);
        return true;
      });
    }
  } catch (const Failure& f) {
    r.error_kind = f.kind;
    r.error = f.what;
  }
  return r;
}

}  // namespace memra::cli::bench_serve
