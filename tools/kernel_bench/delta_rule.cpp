// memra-kernel-bench's gated delta rule timings: kernels::gated_delta_rule on Qwen3.5-9B's
// linear-attention shape (16 key / 32 value heads of 128) for a 512-token prefill of one sequence,
// a decode step of 64 sequences and a step mixing 63 decodes with a 512-token prefill, each with
// every kernel choice (token, chunk1..8: the same bits, kernel-check compares them) and with the
// automatic one. One call per layer: the model has 24 such layers per step. Medians of event-timed
// bursts (bench.h); each call carries its sequences' state into the next, as steps do.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;
using kernels::DeltaRuleKernel;

constexpr kernels::DeltaRuleShape kShape{16, 32, 128, 128};

struct DeltaCase {
  const char* name;
  int n_seqs;   // sequences of one token at position 100 (decodes)
  int prefill;  // then one more sequence of this many tokens from position 0 (0: none)
};

const DeltaCase kCases[] = {
    {"prefill 1x512", 0, 512}, {"decode 64x1", 64, 0}, {"mixed 63x1 + 512", 63, 512}};

const std::pair<const char*, DeltaRuleKernel> kKernels[] = {
    {"auto", DeltaRuleKernel::auto_},    {"token", DeltaRuleKernel::token},
    {"chunk1", DeltaRuleKernel::chunk1}, {"chunk2", DeltaRuleKernel::chunk2},
    {"chunk4", DeltaRuleKernel::chunk4}, {"chunk8", DeltaRuleKernel::chunk8}};

template <typename T>
cuda::DeviceBuffer upload(const std::vector<T>& host) {
  cuda::DeviceBuffer d(host.size() * sizeof(T));
  check(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "upload");
  return d;
}

std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

nlohmann::json run_delta_rule(const cuda::Stream& stream) {
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937 rng(11);
  const int nv = kShape.n_v_heads;
  const int64_t row = 2 * int64_t{kShape.n_k_heads} * kShape.k_dim + int64_t{nv} * kShape.v_dim;
  const int64_t head = int64_t{kShape.k_dim} * kShape.v_dim;
  for (const DeltaCase& c : kCases) {
    std::vector<int32_t> positions, token_seq, begin = {0}, slots;
    for (int s = 0; s < c.n_seqs; ++s) {
      positions.push_back(100);
      token_seq.push_back(s);
      begin.push_back(begin.back() + 1);
    }
    for (int i = 0; i < c.prefill; ++i) {
      positions.push_back(i);
      token_seq.push_back(c.n_seqs);
    }
    if (c.prefill > 0) begin.push_back(begin.back() + c.prefill);
    const int n_seqs = static_cast<int>(begin.size()) - 1;
    const int64_t n = static_cast<int64_t>(positions.size());
    for (int s = 0; s < n_seqs; ++s) slots.push_back(s);
    cuda::DeviceBuffer d_pos = upload(positions), d_seq = upload(token_seq),
                       d_begin = upload(begin), d_slots = upload(slots);
    cuda::DeviceBuffer qkv = upload(uniform(rng, n * row, -1.0f, 1.0f));
    cuda::DeviceBuffer a = upload(uniform(rng, n * nv, -2.0f, 2.0f));
    cuda::DeviceBuffer b = upload(uniform(rng, n * nv, -3.0f, 3.0f));
    cuda::DeviceBuffer A = upload(uniform(rng, nv, -1.5f, -0.05f));
    cuda::DeviceBuffer dt = upload(uniform(rng, nv, -1.0f, 1.0f));
    cuda::DeviceBuffer state = upload(uniform(rng, n_seqs * nv * head, -0.5f, 0.5f));
    cuda::DeviceBuffer out(n * nv * kShape.v_dim * sizeof(float));
    kernels::StepDev step;
    step.n_tokens = static_cast<int32_t>(n);
    step.n_seqs = n_seqs;
    step.positions = static_cast<const int32_t*>(d_pos.data());
    step.token_seq = static_cast<const int32_t*>(d_seq.data());
    step.seq_begin = static_cast<const int32_t*>(d_begin.data());
    step.state_slots = static_cast<const int32_t*>(d_slots.data());
    step.max_context = c.prefill > 0 ? c.prefill : 101;
    for (const auto& [kname, kernel] : kKernels) {
      const double ms = median_ms(stream, [&](int) {
        kernels::gated_delta_rule(
            step, static_cast<float*>(state.data()), static_cast<const float*>(qkv.data()),
            static_cast<const float*>(a.data()), static_cast<const float*>(b.data()),
            static_cast<const float*>(A.data()), static_cast<const float*>(dt.data()), kShape,
            static_cast<float*>(out.data()), stream.get(), kernel);
      });
      check(cudaGetLastError(), "gated_delta_rule");
      std::printf("delta_rule %-18s %-7s %5lld tok %9.1f us\n", c.name, kname,
                  static_cast<long long>(n), ms * 1e3);
      rows.push_back({{"kernel", "gated_delta_rule"},
                      {"case", c.name},
                      {"variant", kname},
                      {"n_tokens", n},
                      {"n_seqs", n_seqs},
                      {"us", ms * 1e3}});
    }
  }
  return rows;
}

}  // namespace memra::bench
