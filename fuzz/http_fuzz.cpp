// libFuzzer target for the HTTP transport: the input is what a client sends on one connection
// (parsed by the server's request reader, pipelining included), and, split at NUL bytes, the
// payloads of SSE events written through a chunked streaming response. The reader must accept
// or refuse every input with one of its statuses, never waiting once the peer has closed; the
// writer's output must de-chunk and split back into exactly the events written, each data line
// a JSON string (no payload byte can break the framing).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/http_server.h"

namespace {

using memra::server::HttpExchange;
using memra::server::HttpLimits;
using memra::server::HttpRequest;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "http_fuzz: %s\n", what);
    std::abort();
  }
}

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { check(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0, "socketpair"); }
  ~SocketPair() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
};

HttpLimits small_limits() {
  HttpLimits l;
  l.max_header_bytes = 2048;  // small enough for the fuzzer to reach every limit
  l.max_headers = 16;
  l.max_body_bytes = 4096;
  l.read_timeout_ms = 2000;  // never reached: the peer has closed before the reader starts
  l.idle_timeout_ms = 2000;
  l.write_timeout_ms = 2000;
  return l;
}

void fuzz_reader(std::string_view bytes) {
  SocketPair sp;
  const HttpLimits limits = small_limits();
  // The whole input is in the socket before the reader starts (it is under the socket buffer).
  check(::send(sp.fd[1], bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()),
        "send");
  ::shutdown(sp.fd[1], SHUT_WR);
  const int status = memra::server::http_read_requests(sp.fd[0], limits, [&](const HttpRequest& r) {
    check(!r.method.empty() && r.method.find(' ') == std::string::npos, "method");
    check(!r.path.empty() && r.path.front() == '/' && r.path.find('?') == std::string::npos,
          "path");
    check(r.headers.size() <= limits.max_headers, "header count");
    for (const auto& [name, value] : r.headers) {
      check(!name.empty() && name.find(':') == std::string::npos, "header name");
      for (char c : name) check(!(c >= 'A' && c <= 'Z'), "header name not lower-cased");
    }
    check(r.body.size() <= limits.max_body_bytes, "body over the limit");
    const std::string* length = r.header("content-length");
    check(length ? r.body.size() == std::stoull(*length) : r.body.empty(),
          "body length differs from Content-Length");
  });
  // 408 would mean a wait for bytes after the peer closed.
  check(status == 0 || status == 400 || status == 411 || status == 413 || status == 431 ||
            status == 505,
        "unexpected reader status");
}

// De-chunks an HTTP/1.1 chunked body; aborts on any framing error.
std::string dechunk(std::string_view s) {
  std::string out;
  for (;;) {
    const size_t eol = s.find("\r\n");
    check(eol != std::string_view::npos && eol > 0, "chunk size line");
    const size_t n = std::strtoull(std::string(s.substr(0, eol)).c_str(), nullptr, 16);
    s.remove_prefix(eol + 2);
    if (n == 0) {
      check(s == "\r\n", "bytes after the last chunk");
      return out;
    }
    check(s.size() >= n + 2 && s.substr(n, 2) == "\r\n", "chunk data");
    out += s.substr(0, n);
    s.remove_prefix(n + 2);
  }
}

void fuzz_sse_writer(std::string_view bytes) {
  std::vector<std::string> payloads(1);
  for (char c : bytes) {
    if (c == '\0')
      payloads.emplace_back();
    else
      payloads.back() += c;
  }
  SocketPair sp;
  const HttpLimits limits = small_limits();
  // The client side reads as the server writes (many small events outgrow any socket buffer).
  std::string wire;
  std::thread client([&] {
    char buf[65536];
    for (ssize_t n; (n = ::recv(sp.fd[1], buf, sizeof buf, 0)) > 0;) wire.append(buf, size_t(n));
  });
  {
    HttpExchange ex(sp.fd[0], limits, true);
    check(ex.stream_begin(200, "text/event-stream"), "stream_begin");
    for (size_t i = 0; i < payloads.size(); ++i) {
      // Both event shapes the server writes: OpenAI (data only) and Anthropic (named events).
      const std::string data = memra::server::json_dump(nlohmann::json(payloads[i]));
      check(ex.stream_write(i % 2 ? "event: e\ndata: " + data + "\n\n" : "data: " + data + "\n\n"),
            "stream_write");
    }
    check(ex.stream_write("data: [DONE]\n\n"), "stream_write [DONE]");
    ex.stream_end();
  }
  ::shutdown(sp.fd[0], SHUT_WR);
  client.join();
  const size_t head_end = wire.find("\r\n\r\n");
  check(head_end != std::string::npos, "response head");
  check(wire.compare(0, 15, "HTTP/1.1 200 OK") == 0, "status line");
  check(wire.substr(0, head_end).find("Transfer-Encoding: chunked") != std::string::npos,
        "chunked framing");
  const std::string body = dechunk(std::string_view(wire).substr(head_end + 4));
  // Split into events at blank lines: exactly one per payload, then [DONE].
  std::vector<std::string> events;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    check(end != std::string::npos, "unterminated event");
    events.push_back(body.substr(at, end - at));
    at = end + 2;
  }
  check(events.size() == payloads.size() + 1 && events.back() == "data: [DONE]", "event count");
  for (size_t i = 0; i < payloads.size(); ++i) {
    std::string_view e = events[i];
    if (i % 2) {
      check(e.starts_with("event: e\n"), "event name line");
      e.remove_prefix(9);
    }
    check(e.starts_with("data: ") && e.find('\n') == std::string_view::npos, "one data line");
    const nlohmann::json parsed = nlohmann::json::parse(e.substr(6));
    check(parsed.is_string(), "data is not a JSON string");
    // Valid UTF-8 comes back byte for byte (invalid bytes are replaced by U+FFFD).
    bool valid_utf8 = true;
    try {
      (void)nlohmann::json(payloads[i]).dump();  // the strict handler throws on invalid UTF-8
    } catch (const nlohmann::json::type_error&) {
      valid_utf8 = false;
    }
    if (valid_utf8) check(parsed.get<std::string>() == payloads[i], "payload changed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader's input must fit the socket buffer at once.
  if (size > 16384) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz_reader(bytes);
  fuzz_sse_writer(bytes);
  return 0;
}
