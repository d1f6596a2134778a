// `memra bench-serve`: load an OpenAI-compatible server (memra, llama.cpp's server, vLLM) with
// streamed requests at a fixed concurrency or a seeded Poisson request rate, and report
// requests/s, output tok/s, TTFT / ITL / end-to-end percentiles, errors by kind and, from memra's
// /metrics, the prefix-cache hit rate. Every loop is bounded: the number of sessions (--requests,
// or a hard cap under --duration), each request's deadline (--timeout), and the run's deadline.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_serve.h"
#include "cli_args.h"
#include "commands.h"
#include "core/error.h"

namespace memra::cli {
namespace {

using namespace bench_serve;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: memra bench-serve [--url URL] [--concurrency N | --rate R] [--requests N |\n"
    "                         --duration S] [--prompt-tokens L] [--output-tokens L]\n"
    "                         [--dataset FILE.jsonl] [--shared-prefix T] [--turns K]\n"
    "                         [--endpoint completions|chat] [--json FILE]\n"
    "  --url URL            server (default http://127.0.0.1:8080; http only)\n"
    "  --api-key KEY        Bearer key (default: $MEMRA_API_KEY)\n"
    "  --model NAME         model id (default: the server's first in /v1/models)\n"
    "  --endpoint E         completions (default) or chat\n"
    "  --concurrency N      clients, each sending its next session when the last ends\n"
    "                       (default 8); with --rate, the most sessions in flight (default 256)\n"
    "  --rate R             sessions per second, Poisson arrivals (seeded)\n"
    "  --requests N         requests to send (default 100; a session of K turns is K)\n"
    "  --duration S         send for S seconds instead (30, 30s, 5m, 2h); in-flight ones finish\n"
    "  --prompt-tokens L    user text per turn: N or uniform:A-B (default 256)\n"
    "  --output-tokens L    max_tokens per turn, with ignore_eos (default 64)\n"
    "  --dataset FILE       JSONL conversations ({\"messages\": [...]} or ShareGPT) as prompts\n"
    "  --shared-prefix T    a system prompt of about T tokens shared by every request\n"
    "  --turns K            sessions of K turns, each resending the history (default 1)\n"
    "  --seed N             workload and arrival seed (default 0)\n"
    "  --timeout S          deadline per request in seconds (default 600)\n"
    "  --json FILE          write a receipt (command, workload, figures, commit)\n"
    "Exit status 0 when at least one request succeeded (errors are reported by kind), else 1.\n"
    "Prompt lengths are in tokens as the server's /tokenize counts them when it has one (memra,\n"
    "vLLM), else one token per word; the receipt reports the prompt tokens the server counted.\n";

constexpr uint64_t kMaxSessions = 10'000'000;  // --duration's bound on the session count

struct Options {
  Url url;
  std::string url_text = "http://127.0.0.1:8080";
  std::string api_key;
  WorkloadOptions work;
  int32_t concurrency = 0;  // 0: the mode's default
  double rate = 0;          // sessions/s; 0 = fixed concurrency
  int64_t requests = 100;
  double duration_s = 0;
  std::string dataset_path;
  double timeout_s = 600;
  std::string json_path;
  std::string command;
};

// "30", "30s", "5m", "2h" -> seconds.
double parse_duration(const std::string& flag, const std::string& text) {
  double scale = 1;
  std::string number = text;
  if (!number.empty() && std::string("smh").find(number.back()) != std::string::npos) {
    scale = number.back() == 'h' ? 3600 : number.back() == 'm' ? 60 : 1;
    number.pop_back();
  }
  return parse_double(flag, number, 0.001, 1e7) * scale;
}

// The command line for the receipt, the API key's value hidden.
std::string command_line(const Args& args) {
  std::string out = "memra bench-serve";
  for (size_t i = 0; i < args.size(); ++i)
    out += " " + (i > 0 && args[i - 1] == "--api-key" ? std::string("***") : args[i]);
  return out;
}

Options parse_options(const Args& args) {
  Options o;
  o.command = command_line(args);
  if (const char* env = std::getenv("MEMRA_API_KEY")) o.api_key = env;
  bool requests_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "--url")
      o.url_text = value();
    else if (a == "--api-key")
      o.api_key = value();
    else if (a == "--model")
      o.work.model = value();
    else if (a == "--endpoint")
      o.work.endpoint = value();
    else if (a == "--concurrency")
      o.concurrency = parse_int(a, value(), 1, 4096);
    else if (a == "--rate")
      o.rate = parse_double(a, value(), 1e-6, 1e6);
    else if (a == "--requests") {
      o.requests = parse_int(a, value(), 1, 1 << 30);
      requests_given = true;
    } else if (a == "--duration")
      o.duration_s = parse_duration(a, value());
    else if (a == "--prompt-tokens")
      o.work.prompt = parse_length(a, value());
    else if (a == "--output-tokens")
      o.work.output = parse_length(a, value());
    else if (a == "--dataset")
      o.dataset_path = value();
    else if (a == "--shared-prefix")
      o.work.shared_prefix = parse_int(a, value(), 0, 1 << 20);
    else if (a == "--turns")
      o.work.turns = parse_int(a, value(), 1, 1000);
    else if (a == "--seed")
      o.work.seed = uint64_t(parse_int(a, value(), 0, INT32_MAX));
    else if (a == "--timeout")
      o.timeout_s = parse_double(a, value(), 0.001, 1e6);
    else if (a == "--json")
      o.json_path = value();
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      fail(ErrorCode::invalid_argument, "unknown argument '{}'\n{}", a, kUsage);
    }
  }
  if (o.work.endpoint != "completions" && o.work.endpoint != "chat")
    fail(ErrorCode::invalid_argument, "--endpoint expects completions or chat, got '{}'",
         o.work.endpoint);
  if (requests_given && o.duration_s > 0)
    fail(ErrorCode::invalid_argument, "give --requests or --duration, not both");
  if (o.concurrency == 0) o.concurrency = o.rate > 0 ? 256 : 8;
  o.url = parse_url(o.url_text);
  return o;
}

// State shared by the clients of one run.
struct Run {
  const Options& o;
  Clock::time_point start;
  Clock::time_point stop_sending;  // no new request starts after this
  uint64_t max_sessions;
  std::vector<double> arrivals_s;  // rate mode: session k's arrival time after start
  std::atomic<uint64_t> next_session{0};
  std::atomic<int64_t> requests_left;
  std::atomic<int64_t> done{0}, failed{0};
  std::mutex mu;
  std::vector<RequestRecord> records;
  std::string first_error;

  double since_start(Clock::time_point t) const {
    return std::chrono::duration<double>(t - start).count();
  }
};

// Reads one streamed response's events into `rec`; returns the reply text (for the next turn).
struct StreamState {
  Clock::time_point sent;
  double last_text_s = -1;
  bool done = false;
  std::string reply, error;
};

bool on_event(StreamState& st, RequestRecord& rec, std::string_view data, bool chat) {
  const double now = std::chrono::duration<double>(Clock::now() - st.sent).count();
  if (data == "[DONE]") {
    st.done = true;
    return false;
  }
  const json ev = json::parse(data, nullptr, false);
  if (ev.is_discarded() || !ev.is_object()) {
    st.error = "an SSE event that is not a JSON object";
    return false;
  }
  if (ev.contains("error")) {
    st.error = "error event: " + ev["error"].dump().substr(0, 300);
    return false;
  }
  if (ev.contains("usage") && ev["usage"].is_object()) {
    const json& u = ev["usage"];
    rec.prompt_tokens = u.value("prompt_tokens", int64_t{0});
    rec.completion_tokens = u.value("completion_tokens", int64_t{0});
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
      rec.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", int64_t{0});
  }
  std::string text;
  if (ev.contains("choices") && ev["choices"].is_array())
    for (const json& c : ev["choices"]) {
      const json* t = nullptr;
      if (chat && c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content"))
        t = &c["delta"]["content"];
      if (!chat && c.contains("text")) t = &c["text"];
      if (t != nullptr && t->is_string()) text += t->get<std::string>();
    }
  if (!text.empty()) {
    if (st.last_text_s < 0)
      rec.ttft_s = now;
    else
      rec.itl_s.push_back(now - st.last_text_s);
    st.last_text_s = now;
    st.reply += text;
  }
  return true;
}

// Sends one turn; fills `rec` and returns the reply text.
std::string send_turn(Run& run, const std::string& body, RequestRecord& rec) {
  const bool chat = run.o.work.endpoint == "chat";
  StreamState st;
  const SseSink sink = [&](std::string_view data) { return on_event(st, rec, data, chat); };
  st.sent = Clock::now();
  rec.start_s = run.since_start(st.sent);
  const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
  const HttpResponse r =
      http_request(run.o.url, "POST", path, body, run.o.api_key, run.o.timeout_s, &sink);
  rec.e2e_s = std::chrono::duration<double>(Clock::now() - st.sent).count();
  std::string error;
  if (!r.error_kind.empty()) {
    rec.error_kind = r.error_kind;
    error = r.error;
  } else if (r.status != 200) {
    rec.error_kind = "http_" + std::to_string(r.status);
    error = "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300);
  } else if (!r.event_stream) {
    rec.error_kind = "not_a_stream";
    error = "a 200 response that is not text/event-stream";
  } else if (!st.error.empty()) {
    rec.error_kind = "stream_error";
    error = st.error;
  } else if (!st.done) {
    rec.error_kind = "incomplete_stream";
    error = "the stream ended without data: [DONE]";
  }
  rec.ok = rec.error_kind.empty();
  if (rec.ok && rec.completion_tokens == 0)  // no usage chunk: count the text chunks
    rec.completion_tokens = int64_t(rec.itl_s.size()) + (st.last_text_s >= 0 ? 1 : 0);
  std::lock_guard lock(run.mu);
  if (!rec.ok && run.first_error.empty()) run.first_error = error;
  return st.reply;
}

// Runs session `index` turn by turn while requests and time are left.
void run_session(Run& run, uint64_t index) {
  const SessionPlan plan = plan_session(run.o.work, index);
  Conversation messages = plan.head;
  for (size_t t = 0; t < plan.users.size(); ++t) {
    if (Clock::now() >= run.stop_sending || run.requests_left.fetch_sub(1) <= 0) return;
    messages.push_back({"user", plan.users[t]});
    RequestRecord rec;
    const std::string reply =
        send_turn(run, request_body(run.o.work, messages, plan.max_tokens[t]), rec);
    const bool ok = rec.ok;
    {
      std::lock_guard lock(run.mu);
      run.records.push_back(std::move(rec));
    }
    ++run.done;
    if (!ok) {
      ++run.failed;
      return;  // the rest of a session depends on this reply
    }
    messages.push_back({"assistant", reply});
  }
}

void client_loop(Run& run) {
  for (;;) {
    const uint64_t k = run.next_session.fetch_add(1);
    if (k >= run.max_sessions || run.requests_left.load() <= 0) return;
    if (!run.arrivals_s.empty()) {
      const auto at = run.start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(run.arrivals_s[k]));
      if (at >= run.stop_sending) return;
      std::this_thread::sleep_until(at);
    }
    if (Clock::now() >= run.stop_sending) return;
    run_session(run, k);
  }
}

// The deadline of the requests around the run (/v1/models, /tokenize, /metrics).
double setup_timeout(const Options& o) {
  return std::min(30.0, o.timeout_s);
}

// GET a JSON document; null when the server does not answer it with 200 JSON.
json get_json(const Options& o, const std::string& path) {
  const HttpResponse r = http_request(o.url, "GET", path, "", o.api_key, setup_timeout(o), nullptr);
  if (r.status != 200) return nullptr;
  const json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

std::optional<CacheCounters> scrape_cache(const Options& o) {
  const HttpResponse r =
      http_request(o.url, "GET", "/metrics", "", o.api_key, setup_timeout(o), nullptr);
  if (r.status != 200) return std::nullopt;
  return parse_cache_counters(r.body);
}

// Tokens per word of the synthetic text by the server's /tokenize; 1 when it has none.
double measure_tokens_per_word(const Options& o) {
  std::mt19937_64 rng(12345);
  constexpr int32_t kWordsSampled = 400;
  json body = {{"prompt", words(rng, kWordsSampled)}, {"add_special_tokens", false}};
  if (!o.work.model.empty()) body["model"] = o.work.model;
  const HttpResponse r =
      http_request(o.url, "POST", "/tokenize", body.dump(), o.api_key, setup_timeout(o), nullptr);
  if (r.status != 200) return 1.0;
  const json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens") || !j["tokens"].is_array()) return 1.0;
  const size_t n = j["tokens"].size();
  return n > 0 ? double(n) / kWordsSampled : 1.0;
}

// Until every client has returned: a progress line on a terminal (stderr), nothing otherwise.
void wait_with_progress(Run& run, std::vector<std::thread>& clients, int64_t total) {
  const bool tty = isatty(fileno(stderr)) != 0;
  std::atomic<bool> finished{false};
  std::thread progress;
  if (tty) {
    progress = std::thread([&] {
      while (!finished.load()) {
        // --duration has no request count: the elapsed time stands for the progress.
        std::string of;
        if (total > 0) of = fmt::format("/{}", total);
        std::fprintf(stderr, "\rbench-serve: %lld%s requests, %lld failed, %.0f s   ",
                     (long long)run.done.load(), of.c_str(), (long long)run.failed.load(),
                     run.since_start(Clock::now()));
        std::fflush(stderr);
        for (int i = 0; i < 5 && !finished.load(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::fprintf(stderr, "\n");
    });
  }
  for (std::thread& t : clients) t.join();
  finished = true;
  if (progress.joinable()) progress.join();
}

RunSummary run_load(const Options& o) {
  Run run{o, Clock::now(), {}, 0, {}};
  const bool by_time = o.duration_s > 0;
  run.stop_sending = run.start + (by_time ? std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(o.duration_s))
                                          : std::chrono::hours(24 * 365));
  run.requests_left = by_time ? int64_t{1} << 62 : o.requests;
  run.max_sessions =
      by_time ? kMaxSessions : uint64_t((o.requests + o.work.turns - 1) / o.work.turns);
  if (o.rate > 0) {
    std::mt19937_64 rng(o.work.seed + 0xa77);
    std::exponential_distribution<double> gap(o.rate);
    double t = 0;
    // Arrivals up to the session count or the duration, whichever ends first.
    for (uint64_t k = 0; k < run.max_sessions && (!by_time || t < o.duration_s); ++k)
      run.arrivals_s.push_back(t += (k == 0 ? 0 : gap(rng)));
    run.max_sessions = run.arrivals_s.size();
  }
  const int64_t total = by_time ? -1 : o.requests;
  std::vector<std::thread> clients;
  const size_t n_clients = size_t(std::min<uint64_t>(uint64_t(o.concurrency), run.max_sessions));
  for (size_t i = 0; i < n_clients; ++i) clients.emplace_back([&run] { client_loop(run); });
  wait_with_progress(run, clients, total);
  RunSummary s;
  s.wall_s = run.since_start(Clock::now());
  s.records = std::move(run.records);
  s.first_error = std::move(run.first_error);
  return s;
}

int run_bench_serve(const Args& args) {
  Options o = parse_options(args);
  std::vector<Conversation> dataset;
  if (!o.dataset_path.empty()) {
    dataset = load_dataset(o.dataset_path);
    o.work.dataset = &dataset;
  }
  const json models = get_json(o, "/v1/models");
  if (o.work.model.empty() && models.is_object() && models.contains("data") &&
      models["data"].is_array() && !models["data"].empty())
    o.work.model = models["data"][0].value("id", "");
  if (models.is_null()) {
    const HttpResponse probe =
        http_request(o.url, "GET", "/v1/models", "", o.api_key, setup_timeout(o), nullptr);
    // Unreachable is an error; slow to answer is a measurement (its requests time out).
    if (probe.error_kind == "transport") fail(ErrorCode::io, "{}: {}", o.url_text, probe.error);
  }
  o.work.tokens_per_word = measure_tokens_per_word(o);
  RunSummary run;
  run.cache_before = scrape_cache(o);
  RunSummary load = run_load(o);
  load.cache_before = run.cache_before;
  load.cache_after = scrape_cache(o);
  const std::string mode =
      o.rate > 0 ? fmt::format("rate {}/s (at most {} in flight)", o.rate, o.concurrency)
                 : fmt::format("concurrency {}", o.concurrency);
  const auto report = report_json({o.command, o.url_text, o.work.model, mode, o.work, load});
  print_report(report);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << report.dump(2) << "\n";
    if (!out) fail(ErrorCode::io, "--json {}: cannot write", o.json_path);
  }
  // Failed requests are part of the measurement (a server at its limit answers 429); a run in
  // which none succeeded measured nothing.
  return report["succeeded"].get<int64_t>() > 0 ? 0 : 1;
}

const Registration kReg{
    {"bench-serve", "load an OpenAI-compatible server, report latency", &run_bench_serve}};

}  // namespace
}  // namespace memra::cli
