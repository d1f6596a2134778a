// memra-kernel-bench internals shared between its timing (main.cpp) and self-check (check.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "core/dtype.h"

namespace memra::bench {

constexpr int kRuns = 9, kWarmup = 2, kBurst = 10;

// Median milliseconds per call over kRuns event-timed runs of kBurst back-to-back calls of
// launch(i), after kWarmup untimed runs. A burst keeps the GPU busy while the host enqueues the
// next call, as the engine's steps (and CUDA graphs) do, so the figure is the kernels' device time,
// not the host's launch latency (a lone call on an idle GPU would time both).
template <typename F>
double median_ms(const cuda::Stream& stream, F&& launch) {
  cuda::Event start, end;
  std::vector<double> ms;
  int call = 0;
  for (int i = 0; i < kWarmup + kRuns; ++i) {
    start.record(stream);
    for (int b = 0; b < kBurst; ++b) launch(call++);
    end.record(stream);
    const double m = cuda::Event::elapsed_ms(start, end) / kBurst;
    if (i >= kWarmup) ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// splitmix64: the next value of a seeded stream (random weight bytes, x).
uint64_t splitmix(uint64_t& s);
// Makes random bytes valid weights of dtype: finite elements, f16 block scales near 2^-10.
void make_valid(DType dtype, uint8_t* p, size_t bytes);

// `copies` tiled matrices of [n_in, n_out] (each `each_bytes` long, one after the other) of the
// same random valid ggml blocks from `seed`: the same values in every copy, for speed only, so
// that a run rotating over them reads each from DRAM.
cuda::DeviceBuffer tiled_stack(DType dtype, int n_in, int n_out, int copies, uint64_t seed,
                               const cuda::Stream& stream, size_t& each_bytes);

// Runs the small-shape correctness and batch-invariance check for each dtype; prints a line per
// case and returns true when all pass.
bool run_check(const std::vector<DType>& dtypes, cudaStream_t stream);

// The comma-separated items of a command-line list ("a,b" -> {"a", "b"}).
inline std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    items.emplace_back(list.substr(at, end - at));
    at = end + 1;
  }
  return items;
}

// Times kernels::attention on the Qwen3-8B shape (attention.cpp); prints a line per case and
// returns the rows for the JSON receipt. copy_tbps: the device copy bandwidth of the same run.
// only: the cases of those names (e.g. {"prefill 2048 f16", "decode 1x512 fma"}), each of which
// must name a case; empty: all.
nlohmann::json run_attention(const cuda::Stream& stream, double copy_tbps,
                             const std::vector<std::string>& only = {});

// Times kernels::sample_rows beside argmax_rows and the rows' device-to-host copy
// (sampling.cpp); prints a line per case and returns the rows for the JSON receipt.
nlohmann::json run_sampling(const cuda::Stream& stream);

// Times the MoE kernels (moe_route, matmul_experts over gate+up and down, moe_combine) on
// Qwen3-30B-A3B's shape at 1, 8 and 64 tokens (moe.cpp); prints a line per case and returns the
// rows for the JSON receipt.
nlohmann::json run_moe(const cuda::Stream& stream, double copy_tbps);

// Times kernels::gated_delta_rule on Qwen3.5-9B's linear-attention shape, prefill, decode and
// mixed, with each kernel choice (delta_rule.cpp); prints a line per case and returns the rows for
// the JSON receipt.
nlohmann::json run_delta_rule(const cuda::Stream& stream);

// Times a prompt step's elementwise kernels (x_to_f16, the norms, the gated activation) at
// Qwen3-8B's widths for 512 and 2,048 tokens against the bytes they move (elementwise.cpp);
// prints a line per case and returns the rows for the JSON receipt.
nlohmann::json run_elementwise(const cuda::Stream& stream, double copy_tbps);

// Times a decode step's one-token products as launches and as one persistent grid (chain.cpp);
// prints a line per case and returns the rows for the JSON receipt. identical: whether both gave
// the same bits.
nlohmann::json run_chain(const cuda::Stream& stream, double copy_tbps, bool& identical);

}  // namespace memra::bench
