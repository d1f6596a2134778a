// memra-kernel-bench's sampling timings: kernels::sample_rows (the whole chain on the device) for
// 1, 8 and 64 rows of 151,936 and 262,144 logits (peaked rows: 60 tokens far above the rest, as
// a model's), per parameter mix, beside argmax_rows (the greedy fast path) and the device-to-host
// copy of the same rows that host sampling needs (which then still has to sample on the CPU).
// Medians of event-timed bursts (bench.h).
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;

struct Mix {
  const char* name;
  sampling::RowParams params;
};

std::vector<Mix> mixes() {
  sampling::RowParams greedy_lp;
  greedy_lp.greedy = 1;
  greedy_lp.top_logprobs = 5;
  sampling::RowParams temp;
  temp.inv_t = 1.0f / 0.8f;
  temp.uniform = 0.37;
  sampling::RowParams top = temp;
  top.top_k = 40;
  top.top_p = 0.9f;
  sampling::RowParams nucleus = temp;
  nucleus.top_p = 0.9f;
  nucleus.min_p_log = -3.0;
  return {{"greedy+logprobs5", greedy_lp},
          {"T0.8", temp},
          {"T0.8 k40 p0.9", top},
          {"T0.8 p0.9 min_p", nucleus}};
}

}  // namespace

nlohmann::json run_sampling(const cuda::Stream& stream) {
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (int64_t n_cols : {int64_t{151936}, int64_t{262144}}) {
    const int64_t max_rows = 64;
    std::vector<float> host(static_cast<size_t>(max_rows * n_cols));
    for (float& v : host) v = u(rng);
    for (int64_t r = 0; r < max_rows; ++r)
      for (int i = 0; i < 60; ++i) host[r * n_cols + rng() % n_cols] += 28.0f;
    cuda::DeviceBuffer logits(host.size() * sizeof(float)), scratch(host.size() * sizeof(float));
    cuda::DeviceBuffer params(max_rows * sizeof(sampling::RowParams)), words(64);
    cuda::DeviceBuffer out(max_rows * sizeof(sampling::RowResult)), ids(max_rows * 4);
    std::vector<float> sink(host.size());  // pageable, as the engine's download target
    check(
        cudaMemcpy(logits.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
        "upload");
    for (int64_t n_rows : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      const auto* x = static_cast<const float*>(logits.data());
      const double argmax_ms = median_ms(stream, [&](int) {
        kernels::argmax_rows(x, n_rows, n_cols, n_cols, static_cast<int32_t*>(ids.data()),
                             stream.get());
      });
      const double copy_ms = median_ms(stream, [&](int) {
        check(cudaMemcpyAsync(sink.data(), x, n_rows * n_cols * sizeof(float),
                              cudaMemcpyDeviceToHost, stream.get()),
              "download");
      });
      for (const Mix& m : mixes()) {
        const std::vector<sampling::RowParams> p(static_cast<size_t>(n_rows), m.params);
        check(cudaMemcpy(params.data(), p.data(), p.size() * sizeof(p[0]), cudaMemcpyHostToDevice),
              "params");
        const double ms = median_ms(stream, [&](int) {
          kernels::sample_rows(
              x, n_rows, n_cols, n_cols, static_cast<const sampling::RowParams*>(params.data()),
              static_cast<const sampling::Penalty*>(words.data()),
              static_cast<const sampling::Bias*>(words.data()),
              static_cast<const uint64_t*>(words.data()), static_cast<float*>(scratch.data()),
              static_cast<sampling::RowResult*>(out.data()), stream.get());
        });
        check(cudaStreamSynchronize(stream.get()), "sample_rows");
        std::printf(
            "sample_rows %-18s %2lld rows x %6lld: %8.1f us (argmax_rows %6.1f us, "
            "d2h copy of the rows %7.1f us)\n",
            m.name, static_cast<long long>(n_rows), static_cast<long long>(n_cols), ms * 1e3,
            argmax_ms * 1e3, copy_ms * 1e3);
        rows.push_back({{"kernel", "sample_rows"},
                        {"mix", m.name},
                        {"n_rows", n_rows},
                        {"n_cols", n_cols},
                        {"us", ms * 1e3},
                        {"argmax_rows_us", argmax_ms * 1e3},
                        {"d2h_copy_us", copy_ms * 1e3}});
      }
    }
  }
  return rows;
}

}  // namespace memra::bench
