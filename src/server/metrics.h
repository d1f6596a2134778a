// Server metrics in the Prometheus text exposition format. Names follow vLLM's with a `memra:`
// prefix (so dashboards port by swapping the prefix); engine gauges and token counters are read
// from Engine::stats() at scrape time, request counters and latency histograms are kept here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "memra/engine.h"

namespace memra::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double value);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;  // upper bounds in seconds, ascending; +Inf is implicit
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void count_finished(const char* reason);  // stop, length, tool_calls, cancelled, error
  void observe_ttft(double seconds);
  void observe_time_per_output_token(double seconds);
  void observe_e2e(double seconds);
  void set_http_in_flight(int n);

  struct ModelView {
    std::string id;
    EngineStats stats;
    std::string device;  // the backend running the model
  };
  std::string render(const std::vector<ModelView>& models) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> finished_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  int http_in_flight_ = 0;
};

}  // namespace memra::server
