// `memra bench-serve` internals: a load generator for an OpenAI-compatible HTTP endpoint. The
// HTTP/1.1 + SSE client (bench_serve_http.cpp), the workload (prompts, sessions, request bodies;
// bench_serve_workload.cpp) and the figures and receipt (bench_serve_report.cpp) meet here;
// cmd_bench_serve.cpp parses the options and drives the clients.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::cli::bench_serve {

// ---- HTTP client (plain TCP, one connection per request) ----

struct Url {
  std::string host;
  std::string port;
  std::string prefix;  // path before /v1 or /metrics ("" for http://host:port)
};
// http://HOST[:PORT][/PREFIX]; https is refused by name (no TLS: front it with a local proxy).
Url parse_url(const std::string& text);

struct HttpResponse {
  int status = 0;             // 0 when no status line arrived
  std::string error_kind;     // "" (a response arrived), "transport" or "timeout"
  std::string error;          // what went wrong, for the first-error sample
  std::string body;           // the whole body, or the non-SSE body of an SSE request
  bool event_stream = false;  // the body was text/event-stream and went to the sink
};

// Each SSE event's data (data: lines joined by \n); return false to stop reading.
using SseSink = std::function<bool(std::string_view data)>;

// One request with a whole-request deadline of `timeout_s`. `sse` receives the events of a
// 200 text/event-stream response as they arrive; any other body is returned in `body`
// (at most 64 MiB, more is a transport error).
HttpResponse http_request(const Url& url, const std::string& method, const std::string& path,
                          const std::string& body, const std::string& api_key, double timeout_s,
                          const SseSink* sse);

// ---- workload ----

struct LengthSpec {
  int32_t lo = 0, hi = 0;  // tokens; fixed when lo == hi
  int32_t sample(std::mt19937_64& rng) const;
  std::string text() const;
};
// "128" or "uniform:64-256"; Error(invalid_argument) naming the flag otherwise.
LengthSpec parse_length(const std::string& flag, const std::string& text);

struct Message {
  std::string role, content;
};
using Conversation = std::vector<Message>;

// Conversations of a JSONL file: one JSON object per line with "messages" ([{role, content}],
// content a string or text parts) or ShareGPT "conversations" ([{from, value}]). Lines without
// a user message are skipped; none at all is an error.
std::vector<Conversation> load_dataset(const std::string& path);

struct WorkloadOptions {
  std::string endpoint = "completions";  // or "chat"
  std::string model;
  LengthSpec prompt{256, 256};
  LengthSpec output{64, 64};
  int32_t shared_prefix = 0;  // tokens of a system prompt every request shares
  int32_t turns = 1;
  uint64_t seed = 0;
  double tokens_per_word = 1.0;  // measured with /tokenize when the server has it
  const std::vector<Conversation>* dataset = nullptr;
};

// One session's plan: its fixed messages (a shared system prompt, dataset history) and one user
// message and output length per turn. Turn t sends history + user[0..t] with the replies the
// server gave to the earlier turns in between.
struct SessionPlan {
  Conversation head;
  std::vector<std::string> users;
  std::vector<int32_t> max_tokens;
};
// Deterministic in (options.seed, index).
SessionPlan plan_session(const WorkloadOptions& o, uint64_t index);

// The JSON body of a turn: chat messages, or for completions the conversation flattened into
// "role: text" lines ending with "assistant:". Streaming with usage, greedy, ignore_eos.
std::string request_body(const WorkloadOptions& o, const Conversation& messages,
                         int32_t max_tokens);

// `n` seeded words from a list of common English words (about one token each).
std::string words(std::mt19937_64& rng, int32_t n);

// ---- figures ----

struct RequestRecord {
  bool ok = false;
  std::string error_kind;     // "http_429", "transport", "timeout", "stream_error", ...
  double start_s = 0;         // since the run began
  double ttft_s = 0;          // request sent -> first streamed text
  double e2e_s = 0;           // request sent -> end of the stream
  std::vector<double> itl_s;  // gaps between streamed text chunks
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  size_t n = 0;
};
Percentiles percentiles(std::vector<double> values);

// memra's prefix-cache counters summed over models; absent when /metrics lacks them.
struct CacheCounters {
  double hit_tokens = 0, prompt_tokens = 0;
};
std::optional<CacheCounters> parse_cache_counters(const std::string& prometheus_text);

struct RunSummary {
  double wall_s = 0;
  std::vector<RequestRecord> records;
  std::optional<CacheCounters> cache_before, cache_after;
  std::string first_error;  // one sample message, for the report
};

struct ReportInputs {
  std::string command;           // as typed, API key redacted
  std::string url, model, mode;  // mode: "concurrency 8" or "rate 4/s (max 64 in flight)"
  const WorkloadOptions& workload;
  const RunSummary& run;
};
// The table to stdout; the receipt to `json_path` when it is not empty.
nlohmann::ordered_json report_json(const ReportInputs& in);
void print_report(const nlohmann::ordered_json& report);

}  // namespace memra::cli::bench_serve
