// memra-kernel-check's run context (RNG, stream, filter, the printed table) and error measures.
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <thread>

namespace memra::kernel_check {

Context::Context(const Options& options) : options_(options), rng_(options.seed) {}

void Context::sync() const {
  cuda::check(cudaGetLastError(), "kernel launch");
  cuda::check(cudaStreamSynchronize(stream()), "kernel run");
}

bool Context::wants(const std::string& name) const {
  return options_.filter.empty() || name.find(options_.filter) != std::string::npos;
}

void Context::add(Result result) {
  const bool pass = result.pass();
  // --teeth: every case carries a defect, so RED is the wanted verdict.
  const char* verdict =
      options_.teeth ? (pass ? "green (MISSED)" : "RED (caught)") : (pass ? "green" : "RED");
  std::printf("%-24s %-30s %-5s %-7s %11.3e %9.1e  %s%s%s\n", result.kernel.c_str(),
              result.shape.c_str(), result.dtype.c_str(), result.metric.c_str(), result.error,
              result.tolerance, verdict,
              result.broken.empty() ? "" : "  broken: ", result.broken.c_str());
  std::fflush(stdout);
  results_.push_back(std::move(result));
}

std::vector<float> Context::uniform(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) {
    do {
      v = dist(rng_);
    } while (v == 0.0f);
  }
  return out;
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  const int64_t n_threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(n, 1));
  // An exception thrown by fn on a worker would end the process from std::thread: each thread
  // keeps its first, and the lowest thread's is rethrown after every thread has joined.
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
  const auto stride = [&](int64_t i) {
    try {
      for (int64_t j = i; j < n; j += n_threads) fn(j);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int64_t i = 1; i < n_threads; ++i) threads.emplace_back(stride, i);
  stride(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

int32_t Context::randint(int32_t lo, int32_t hi) {
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
}

std::vector<int32_t> Context::padded_slots(int64_t n_slots, int n_tokens) {
  std::vector<int32_t> all(static_cast<size_t>(n_slots));
  for (int64_t i = 0; i < n_slots; ++i) all[i] = static_cast<int32_t>(i);
  std::shuffle(all.begin(), all.end(), rng_);
  std::vector<int32_t> slots(all.begin(), all.begin() + n_tokens);
  slots.back() = -1;
  return slots;
}

double rel_error(const std::vector<float>& gpu, const std::vector<double>& ref, double floor_frac) {
  if (gpu.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double max_ref = 0.0;
  for (double r : ref) max_ref = std::max(max_ref, std::fabs(r));
  const double floor = std::max(floor_frac * max_ref, 1e-30);
  double worst = 0.0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (!std::isfinite(gpu[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(gpu[i] - ref[i]) / std::max(std::fabs(ref[i]), floor));
  }
  return worst;
}

double rel_max_error(const std::vector<float>& gpu, const std::vector<double>& ref) {
  return rel_error(gpu, ref, 1.0);  // every element measured against max |ref|
}

double row_rel_max_error(const std::vector<float>& gpu, const std::vector<double>& ref,
                         size_t width) {
  if (gpu.size() != ref.size() || width == 0 || gpu.size() % width != 0)
    return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (size_t r = 0; r < gpu.size(); r += width) {
    const std::vector<float> g(gpu.begin() + r, gpu.begin() + r + width);
    const std::vector<double> f(ref.begin() + r, ref.begin() + r + width);
    worst = std::max(worst, rel_max_error(g, f));
  }
  return worst;
}

double bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

std::string shape_str(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s;
}

}  // namespace memra::kernel_check
