// `memra bench-serve`'s figures: throughput, TTFT / ITL / end-to-end percentiles, errors by kind
// and the prefix-cache hit rate from memra's /metrics counters, as a table and a JSON receipt.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "bench.h"
#include "bench_serve.h"

namespace memra::cli::bench_serve {

using nlohmann::ordered_json;

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (numpy's default).
  auto at = [&](double q) {
    const double pos = double(v.size() - 1) * q;
    const size_t lo = size_t(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  p.max = v.back();
  return p;
}

std::optional<CacheCounters> parse_cache_counters(const std::string& text) {
  CacheCounters c;
  bool hits = false, prompts = false;
  std::istringstream in(text);
  std::string line;
  // Series are `name{labels} value`; summing over the labels adds up the served models.
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of("{ "));
    const double value = std::strtod(line.c_str() + space + 1, nullptr);
    if (key == "memra:prefix_cache_hit_tokens_total") {
      c.hit_tokens += value;
      hits = true;
    } else if (key == "memra:prompt_tokens_total") {
      c.prompt_tokens += value;
      prompts = true;
    }
  }
  if (!hits || !prompts) return std::nullopt;
  return c;
}

namespace {

ordered_json ms_json(const std::vector<double>& seconds) {
  std::vector<double> ms;
  ms.reserve(seconds.size());
  for (double s : seconds) ms.push_back(s * 1e3);
  const Percentiles p = percentiles(std::move(ms));
  if (p.n == 0) return nullptr;
  return {{"p50", p.p50},   {"p90", p.p90}, {"p99", p.p99},
          {"mean", p.mean}, {"max", p.max}, {"n", p.n}};
}

ordered_json workload_json(const WorkloadOptions& w) {
  return {{"endpoint", w.endpoint},
          {"prompt_tokens", w.dataset ? "dataset" : w.prompt.text()},
          {"output_tokens", w.output.text()},
          {"shared_prefix_tokens", w.shared_prefix},
          {"turns", w.turns},
          {"seed", w.seed},
          {"tokens_per_word", w.tokens_per_word},
          {"dataset_conversations", w.dataset ? w.dataset->size() : 0}};
}

}  // namespace

ordered_json report_json(const ReportInputs& in) {
  const RunSummary& run = in.run;
  std::vector<double> ttft, itl, e2e;
  std::map<std::string, int64_t> errors;
  int64_t ok = 0, prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  for (const RequestRecord& r : run.records) {
    if (!r.ok) {
      ++errors[r.error_kind];
      continue;
    }
    ++ok;
    prompt_tokens += r.prompt_tokens;
    output_tokens += r.completion_tokens;
    cached_tokens += r.cached_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  const double wall = std::max(run.wall_s, 1e-9);
  ordered_json j = {{"what", "bench-serve"}};
  j.update(bench::commit_json());
  j["timestamp"] = bench::utc_now();
  j["command"] = in.command;
  j["url"] = in.url;
  j["model"] = in.model;
  j["mode"] = in.mode;
  j["workload"] = workload_json(in.workload);
  j["requests"] = run.records.size();
  j["succeeded"] = ok;
  j["failed"] = int64_t(run.records.size()) - ok;
  j["errors"] = errors;
  j["first_error"] = run.first_error;
  j["wall_s"] = run.wall_s;
  j["requests_per_s"] = double(ok) / wall;
  j["output_tok_per_s"] = double(output_tokens) / wall;
  j["total_tok_per_s"] = double(prompt_tokens + output_tokens) / wall;
  j["prompt_tokens"] = prompt_tokens;
  j["output_tokens"] = output_tokens;
  // usage.prompt_tokens_details.cached_tokens, which vLLM reports too (when enabled).
  j["usage_cached_tokens"] = cached_tokens;
  j["ttft_ms"] = ms_json(ttft);
  j["itl_ms"] = ms_json(itl);
  j["e2e_ms"] = ms_json(e2e);
  ordered_json cache = nullptr;
  if (run.cache_before && run.cache_after) {
    const double hits = run.cache_after->hit_tokens - run.cache_before->hit_tokens;
    // memra:prompt_tokens_total counts the prompt tokens the engine computed (a prefix-cache hit
    // is not computed; a preempted sequence's prompt is computed again), so the tokens looked up
    // are hits + computed.
    const double computed = run.cache_after->prompt_tokens - run.cache_before->prompt_tokens;
    const double looked_up = hits + computed;
    cache = {{"hit_tokens", hits},
             {"computed_prompt_tokens", computed},
             {"hit_rate", looked_up > 0 ? ordered_json(hits / looked_up) : ordered_json(nullptr)}};
  }
  j["prefix_cache"] = cache;
  return j;
}

namespace {

void print_row(const char* name, const ordered_json& p) {
  if (p.is_null()) {
    std::printf("  %-22s n/a\n", name);
    return;
  }
  std::printf("  %-22s p50 %9.2f  p90 %9.2f  p99 %9.2f  mean %9.2f  max %9.2f  (n=%lld)\n", name,
              p["p50"].get<double>(), p["p90"].get<double>(), p["p99"].get<double>(),
              p["mean"].get<double>(), p["max"].get<double>(), p["n"].get<long long>());
}

}  // namespace

void print_report(const ordered_json& j) {
  const ordered_json& w = j["workload"];
  std::printf("bench-serve %s  model %s  %s\n", j["url"].get<std::string>().c_str(),
              j["model"].get<std::string>().c_str(), j["mode"].get<std::string>().c_str());
  std::printf(
      "  workload: /v1/%s, prompt %s tokens, output %s tokens, shared prefix %d, turns "
      "%d, seed %llu\n",
      w["endpoint"].get<std::string>() == "chat" ? "chat/completions" : "completions",
      w["prompt_tokens"].get<std::string>().c_str(), w["output_tokens"].get<std::string>().c_str(),
      w["shared_prefix_tokens"].get<int>(), w["turns"].get<int>(),
      w["seed"].get<unsigned long long>());
  std::printf("  requests: %lld ok, %lld failed in %.2f s\n", j["succeeded"].get<long long>(),
              j["failed"].get<long long>(), j["wall_s"].get<double>());
  std::printf("  throughput: %.2f requests/s, %.1f output tok/s, %.1f total tok/s\n",
              j["requests_per_s"].get<double>(), j["output_tok_per_s"].get<double>(),
              j["total_tok_per_s"].get<double>());
  std::printf("  tokens: %lld prompt, %lld output\n", j["prompt_tokens"].get<long long>(),
              j["output_tokens"].get<long long>());
  std::printf("  latency (ms):\n");
  print_row("TTFT", j["ttft_ms"]);
  print_row("ITL", j["itl_ms"]);
  print_row("end-to-end", j["e2e_ms"]);
  const ordered_json& cache = j["prefix_cache"];
  if (!cache.is_null() && !cache["hit_rate"].is_null())
    std::printf(
        "  prefix cache (/metrics): %.1f%% hit (%.0f prompt tokens cached, %.0f computed)\n",
        100.0 * cache["hit_rate"].get<double>(), cache["hit_tokens"].get<double>(),
        cache["computed_prompt_tokens"].get<double>());
  else
    std::printf("  prefix cache: n/a (no memra /metrics counters)\n");
  if (!j["errors"].empty()) {
    std::printf("  errors:");
    for (const auto& [kind, n] : j["errors"].items())
      std::printf(" %s %lld", kind.c_str(), n.get<long long>());
    std::printf("\n  first error: %s\n", j["first_error"].get<std::string>().c_str());
  }
  std::fflush(stdout);
}

}  // namespace memra::cli::bench_serve
