// `memra bench` timed runs: batches of greedy requests through the Engine API (ignoring EOS, so
// each generates exactly its token count), timed from the engine thread's stream events, and the
// figures they make.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>

#include "bench.h"
#include "core/error.h"

namespace memra::cli::bench {
namespace {

using Clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Fixed pseudo-random ids from the lower vocabulary (ordinary tokens in every vocabulary we load,
// above the handful of special ids of a tiny one), one sequence per seed, so every build sees the
// same prompts and concurrent sequences share no prefix.
std::vector<int32_t> make_prompt(int32_t n, uint32_t seed, int32_t n_vocab) {
  const int32_t lo = std::min(1000, n_vocab / 4);
  const uint32_t span = static_cast<uint32_t>(std::max(1, std::min(n_vocab, 32000) - lo));
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  uint32_t x = 12345u + seed * 2654435761u;
  for (int32_t& t : prompt) {
    x = x * 1664525u + 1013904223u;
    t = lo + static_cast<int32_t>((x >> 8) % span);
  }
  return prompt;
}

struct BatchTiming {
  double prefill_s = 0;      // submit -> the last sequence's first token
  double decode_s = 0;       // the last sequence's first token -> the last sequence's end
  double prefill_cpu_s = 0;  // process CPU seconds (user + system) of the same spans
  double decode_cpu_s = 0;
  // Tokens generated in the decode span: every sequence has its first token, so no prompt work
  // is left in its steps (pure decode, what llama.cpp's batched-bench calls S_TG). One sequence:
  // its tokens after the first.
  int64_t decode_tokens = 0;
};

// What the sinks record, on the engine thread; read by the caller once `done` is set.
struct BatchState {
  size_t waiting_first = 0;
  size_t running = 0;
  std::vector<char> got_first;
  Clock::time_point first_max{}, end{};
  double cpu_first_max = 0, cpu_end = 0;
  int64_t tokens = 0, tokens_at_first_max = 0;  // generated so far, and when the last first came
  std::string error;
  std::promise<void> done;

  void on_event(size_t seq, const StreamEvent& e) {
    tokens += static_cast<int64_t>(e.tokens.size());
    if (!got_first[seq] && !e.tokens.empty()) {
      got_first[seq] = 1;
      if (--waiting_first == 0) {
        first_max = Clock::now();
        cpu_first_max = process_cpu_seconds();
        tokens_at_first_max = tokens;
      }
    }
    if (e.finish == FinishReason::none) return;
    if (e.finish != FinishReason::length && error.empty())
      error = fmt::format("{} {}", finish_reason_name(e.finish), e.error);
    if (--running == 0) {
      end = Clock::now();
      cpu_end = process_cpu_seconds();
      done.set_value();
    }
  }
};

// Submits one greedy request per prompt at once, each generating n_gen tokens past EOS, and
// waits for all of them.
BatchTiming run_batch(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                      int32_t n_gen) {
  BatchState st;
  st.waiting_first = st.running = prompts.size();
  st.got_first.assign(prompts.size(), 0);
  std::future<void> done = st.done.get_future();
  const double start_cpu = process_cpu_seconds();
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = n_gen;
    r.stop.ignore_eos = true;
    r.sink = [&st, i](const StreamEvent& e) { st.on_event(i, e); };
    engine.submit(std::move(r));
  }
  done.get();
  if (!st.error.empty()) fail(ErrorCode::internal, "bench run ended with '{}'", st.error);
  return {seconds(start, st.first_max), seconds(st.first_max, st.end), st.cpu_first_max - start_cpu,
          st.cpu_end - st.cpu_first_max, st.tokens - st.tokens_at_first_max};
}

// Runs one figure's shape: an untimed warm-up (graph capture, scratch growth), then `runs` timed
// batches of fresh prompts. `record` turns each timing into figure values.
template <typename Record>
void run_shape(Engine& engine, const BenchOptions& o, int32_t prompt_len, int32_t n_seqs,
               int32_t n_gen, uint32_t& seed, Record&& record) {
  const int32_t n_vocab = engine.model_info().n_vocab;
  auto prompts = [&] {
    std::vector<std::vector<int32_t>> out;
    for (int32_t s = 0; s < n_seqs; ++s) out.push_back(make_prompt(prompt_len, seed++, n_vocab));
    return out;
  };
  run_batch(engine, prompts(), std::min(n_gen, 4));
  for (int32_t r = 0; r < o.runs; ++r) record(run_batch(engine, prompts(), n_gen));
}

Figure make_figure(std::string name, FigureKind kind, int32_t prompt, int32_t gen, int32_t depth,
                   int32_t concurrency) {
  Figure f;
  f.name = std::move(name);
  f.kind = kind;
  f.prompt = prompt;
  f.gen = gen;
  f.depth = depth;
  f.concurrency = concurrency;
  return f;
}

// Prefill of each -p prompt; without -d also the decode after it (depth = the prompt).
void prefill_figures(Engine& engine, const BenchOptions& o, int threads, uint32_t& seed,
                     std::vector<Figure>& out) {
  const bool with_decode = o.depths.empty();
  const int32_t n = o.n_gen;
  for (int32_t p : o.prompts) {
    Figure pre = make_figure(fmt::format("prefill pp{}", p), FigureKind::prefill, p, 0, 0, 1);
    std::string dec_name = fmt::format("decode tg{}", n);
    if (o.prompts.size() > 1) dec_name += fmt::format(" @ d{}", p);
    Figure dec = make_figure(dec_name, FigureKind::decode, p, n, p, 1);
    run_shape(engine, o, p, 1, with_decode ? n : 1, seed, [&](const BatchTiming& t) {
      pre.tok_s.push_back(p / t.prefill_s);
      if (threads > 0) pre.cpu_tok_s.push_back(p / (t.prefill_cpu_s / threads));
      if (!with_decode) return;
      const auto gen_tokens = static_cast<double>(t.decode_tokens);  // n - 1
      dec.tok_s.push_back(gen_tokens / t.decode_s);
      if (threads > 0) dec.cpu_tok_s.push_back(gen_tokens / (t.decode_cpu_s / threads));
    });
    out.push_back(std::move(pre));
    if (with_decode) out.push_back(std::move(dec));
  }
}

// Decode after a prompt of each -d depth (depth 0: a one-token prompt); the prefill is untimed.
void depth_figures(Engine& engine, const BenchOptions& o, int threads, uint32_t& seed,
                   std::vector<Figure>& out) {
  const int32_t n = o.n_gen;
  for (int32_t d : o.depths) {
    Figure dec = make_figure(fmt::format("decode tg{} @ d{}", n, d), FigureKind::decode,
                             std::max(d, 1), n, d, 1);
    run_shape(engine, o, std::max(d, 1), 1, n, seed, [&](const BatchTiming& t) {
      const auto gen_tokens = static_cast<double>(t.decode_tokens);  // n - 1
      dec.tok_s.push_back(gen_tokens / t.decode_s);
      if (threads > 0) dec.cpu_tok_s.push_back(gen_tokens / (t.decode_cpu_s / threads));
    });
    out.push_back(std::move(dec));
  }
}

// -c sequences of the first -p prompt at once: prefill tok/s = all prompt tokens / the time until
// every sequence has its first token; decode tok/s = the tokens generated after that moment / the
// time from it to the last sequence's end (all c sequences decoding, no prompt work in the steps:
// what llama.cpp's batched-bench calls S_TG).
void concurrent_figures(Engine& engine, const BenchOptions& o, int threads, uint32_t& seed,
                        std::vector<Figure>& out) {
  const int32_t p = o.prompts[0], n = o.n_gen;
  for (int32_t c : o.concurrency) {
    Figure pre = make_figure(fmt::format("c{} prefill pp{}", c, p), FigureKind::aggregate_prefill,
                             p, 0, 0, c);
    Figure dec =
        make_figure(fmt::format("c{} decode tg{}", c, n), FigureKind::aggregate_decode, p, n, p, c);
    run_shape(engine, o, p, c, n, seed, [&](const BatchTiming& t) {
      const double prompt_tokens = double(c) * p;
      const auto gen_tokens = static_cast<double>(t.decode_tokens);
      pre.tok_s.push_back(prompt_tokens / t.prefill_s);
      dec.tok_s.push_back(gen_tokens / t.decode_s);
      if (threads == 0) return;
      pre.cpu_tok_s.push_back(prompt_tokens / (t.prefill_cpu_s / threads));
      dec.cpu_tok_s.push_back(gen_tokens / (t.decode_cpu_s / threads));
    });
    out.push_back(std::move(pre));
    out.push_back(std::move(dec));
  }
}

}  // namespace

std::vector<Figure> run_figures(Engine& engine, const BenchOptions& o, int threads) {
  uint32_t seed = 0;
  // One short run first: lazy start-up work (first allocations, thread pool spin-up) stays out.
  const EngineModelInfo& info = engine.model_info();
  const int32_t warm_gen = std::min(o.n_gen, 4);
  const int32_t warm_prompt = std::max(1, std::min(16, info.context_length - warm_gen));
  run_batch(engine, {make_prompt(warm_prompt, 1u << 31, info.n_vocab)}, warm_gen);
  std::vector<Figure> out;
  if (o.prefill) prefill_figures(engine, o, threads, seed, out);
  depth_figures(engine, o, threads, seed, out);
  concurrent_figures(engine, o, threads, seed, out);
  return out;
}

}  // namespace memra::cli::bench
