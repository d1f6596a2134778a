// Prometheus text rendering of the server's counters, gauges and histograms.
#include "server/metrics.h"

#include <fmt/format.h>

namespace memra::server {

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                     sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
             20, 40, 80}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
             0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1,    2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1,  1.5, 2,   2.5,
            5,    10,   15,  20,  30,  40,  50, 60,  120, 240}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
}

void Metrics::count_finished(const char* reason) {
  std::lock_guard lock(mutex_);
  ++finished_[reason];
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::observe_time_per_output_token(double seconds) {
  std::lock_guard lock(mutex_);
  tpot_.observe(seconds);
}

void Metrics::observe_e2e(double seconds) {
  std::lock_guard lock(mutex_);
  e2e_.observe(seconds);
}

void Metrics::set_http_in_flight(int n) {
  std::lock_guard lock(mutex_);
  http_in_flight_ = n;
}

namespace {

void gauge_header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string Metrics::render(const std::vector<ModelView>& models) const {
  std::string out;
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const EngineStats&);
  };
  static const Series kSeries[] = {
      {"memra:num_requests_waiting", "gauge", "Requests queued in the engine",
       [](const EngineStats& s) { return double(s.queued); }},
      {"memra:num_requests_running", "gauge", "Sequences running in the engine",
       [](const EngineStats& s) { return double(s.running); }},
      {"memra:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0-1)",
       [](const EngineStats& s) {
         return s.kv_blocks_total ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
       }},
      {"memra:kv_cache_blocks_used", "gauge", "KV cache blocks in use",
       [](const EngineStats& s) { return double(s.kv_blocks_used); }},
      {"memra:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool",
       [](const EngineStats& s) { return double(s.kv_blocks_total); }},
      {"memra:state_slots_used", "gauge",
       "Recurrent-state slots in use (models with linear-attention layers; 0 otherwise)",
       [](const EngineStats& s) { return double(s.state_slots_used); }},
      {"memra:state_slots_total", "gauge",
       "Recurrent-state slots in the pool (models with linear-attention layers; 0 otherwise)",
       [](const EngineStats& s) { return double(s.state_slots_total); }},
      {"memra:state_snapshots_used", "gauge",
       "Prefix-cache state snapshots held (models with linear-attention layers; 0 otherwise)",
       [](const EngineStats& s) { return double(s.state_snapshots_used); }},
      {"memra:state_snapshots_total", "gauge",
       "Prefix-cache state snapshot slots (models with linear-attention layers; 0 otherwise)",
       [](const EngineStats& s) { return double(s.state_snapshots_total); }},
      {"memra:state_snapshot_restores_total", "counter",
       "Requests that resumed from a prefix-cache state snapshot",
       [](const EngineStats& s) { return double(s.state_snapshot_restores_total); }},
      {"memra:prompt_tokens_total", "counter", "Prompt tokens processed",
       [](const EngineStats& s) { return double(s.prompt_tokens_total); }},
      {"memra:generation_tokens_total", "counter", "Tokens generated",
       [](const EngineStats& s) { return double(s.generated_tokens_total); }},
      {"memra:prefix_cache_hit_tokens_total", "counter",
       "Prompt tokens served from the prefix cache",
       [](const EngineStats& s) { return double(s.cached_tokens_total); }},
      {"memra:engine_steps_total", "counter", "Engine steps run",
       [](const EngineStats& s) { return double(s.steps_total); }},
      {"memra:num_preemptions_total", "counter",
       "Sequences preempted for KV blocks (their KV freed, prefilled again later)",
       [](const EngineStats& s) { return double(s.preemptions_total); }},
      {"memra:cuda_graph_replays_total", "counter", "Decode steps replayed from a CUDA graph",
       [](const EngineStats& s) { return double(s.graph_replays_total); }},
      {"memra:cuda_graph_recordings_total", "counter", "CUDA graphs of decode steps recorded",
       [](const EngineStats& s) { return double(s.graphs_recorded_total); }},
      {"memra:cuda_graph_recordings_failed_total", "counter",
       "CUDA graph recordings that failed (those step shapes run eagerly)",
       [](const EngineStats& s) { return double(s.graph_recordings_failed_total); }},
  };
  for (const Series& series : kSeries) {
    gauge_header(out, series.name, series.type, series.help);
    for (const ModelView& m : models)
      out += fmt::format("{}{{model_name=\"{}\"}} {}\n", series.name, m.id, series.get(m.stats));
  }
  gauge_header(out, "memra:model_info", "gauge", "Served models and the device each runs on");
  for (const ModelView& m : models)
    out += fmt::format("memra:model_info{{model_name=\"{}\",device=\"{}\"}} 1\n", m.id, m.device);
  std::lock_guard lock(mutex_);
  gauge_header(out, "memra:http_requests_total", "counter", "HTTP requests by route and status");
  for (const auto& [key, n] : requests_)
    out += fmt::format("memra:http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);
  gauge_header(out, "memra:request_success_total", "counter",
               "Finished generations by finish reason (cancelled = client gone)");
  for (const auto& [reason, n] : finished_)
    out += fmt::format("memra:request_success_total{{finished_reason=\"{}\"}} {}\n", reason, n);
  gauge_header(out, "memra:http_requests_in_flight", "gauge", "HTTP requests being handled");
  out += fmt::format("memra:http_requests_in_flight {}\n", http_in_flight_);
  ttft_.render(out, "memra:time_to_first_token_seconds", "Time to first token");
  tpot_.render(out, "memra:time_per_output_token_seconds",
               "Mean time per output token after the first");
  e2e_.render(out, "memra:e2e_request_latency_seconds", "End-to-end generation latency");
  return out;
}

}  // namespace memra::server
