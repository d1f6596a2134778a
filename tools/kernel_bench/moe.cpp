// memra-kernel-bench's mixture-of-experts timings on Qwen3-30B-A3B's shape (2048 wide, 128
// experts of 768, top 8; gate and up tiled Q4_K, down tiled Q6_K, as its Q4_K_M file): the
// router's top-k (moe_route), the experts' gate+up and down products (matmul_experts: a block per
// pair up to 64 pairs, sorted by expert above) and the weighted sum (moe_combine), at 1, 8 and 64
// tokens. Each call routes to a fresh random set of experts (16 sets in turn), so the experts'
// 340 MB cannot sit in L2 between calls. GB/s counts the bytes of the distinct experts a call
// reads, once each: a kernel that reads an expert once per pair shows it as a low percentage.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;

constexpr int kExperts = 128, kUsed = 8, kEmbd = 2048, kFf = 768, kIdSets = 16;

// n_expert tiled matrices of [n_in, n_out] from random valid ggml blocks.
cuda::DeviceBuffer tiled_stack(DType dtype, int n_in, int n_out, const cuda::Stream& stream,
                               size_t& expert_bytes) {
  const size_t ggml = dtype_row_bytes(dtype, static_cast<uint64_t>(n_in), "bench") * n_out;
  std::vector<uint8_t> host(ggml);
  uint64_t seed = 17 + static_cast<uint64_t>(n_out);
  for (size_t i = 0; i + 8 <= host.size(); i += 8) {
    const uint64_t v = splitmix(seed);
    std::copy_n(reinterpret_cast<const uint8_t*>(&v), 8, host.data() + i);
  }
  make_valid(dtype, host.data(), host.size());
  cuda::DeviceBuffer src(ggml);
  check(cudaMemcpy(src.data(), host.data(), ggml, cudaMemcpyHostToDevice), "upload experts");
  expert_bytes = kernels::matmul_tiled_bytes(dtype, n_in, n_out);
  cuda::DeviceBuffer out(expert_bytes * kExperts);
  for (int e = 0; e < kExperts; ++e)  // the same values in every expert: speed only
    kernels::matmul_tile(dtype, src.data(), n_in, n_out,
                         static_cast<uint8_t*>(out.data()) + e * expert_bytes, stream.get());
  check(cudaStreamSynchronize(stream.get()), "tile experts");
  return out;
}

struct Row {
  std::string kernel;
  int tokens;
  double us, bytes;
};

}  // namespace

nlohmann::json run_moe(const cuda::Stream& stream, double copy_tbps) {
  size_t gate_bytes = 0, down_bytes = 0;
  const cuda::DeviceBuffer gate = tiled_stack(DType::q4_k, kEmbd, kFf, stream, gate_bytes);
  const cuda::DeviceBuffer up = tiled_stack(DType::q4_k, kEmbd, kFf, stream, gate_bytes);
  const cuda::DeviceBuffer down = tiled_stack(DType::q6_k, kFf, kEmbd, stream, down_bytes);
  nlohmann::json rows = nlohmann::json::array();
  uint64_t seed = 5;
  for (const int tokens : {1, 8, 64}) {
    const int pairs = tokens * kUsed;
    // kIdSets routings: each token's kUsed distinct experts, in increasing order.
    std::vector<int32_t> ids(static_cast<size_t>(kIdSets) * pairs);
    double distinct = 0;
    for (int s = 0; s < kIdSets; ++s) {
      std::set<int32_t> all;
      for (int t = 0; t < tokens; ++t) {
        std::set<int32_t> mine;
        while (static_cast<int>(mine.size()) < kUsed)
          mine.insert(static_cast<int32_t>(splitmix(seed) % kExperts));
        std::copy(mine.begin(), mine.end(), ids.begin() + s * pairs + t * kUsed);
        all.insert(mine.begin(), mine.end());
      }
      distinct += static_cast<double>(all.size()) / kIdSets;
    }
    std::vector<float> x(static_cast<size_t>(pairs) * kEmbd), logits(tokens * kExperts);
    for (float& v : x) v = static_cast<float>(splitmix(seed) >> 40) / 8388608.0f - 1.0f;
    for (float& v : logits) v = static_cast<float>(splitmix(seed) >> 40) / 2097152.0f - 4.0f;
    cuda::DeviceBuffer d_ids(ids.size() * 4), d_x(x.size() * 4), d_logits(logits.size() * 4),
        d_w(pairs * 4), d_route_ids(pairs * 4), d_gate(pairs * kFf * 4), d_up(pairs * kFf * 4),
        d_y(pairs * kEmbd * 4), d_out(tokens * kEmbd * 4);
    check(cudaMemcpy(d_ids.data(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "ids");
    check(cudaMemcpy(d_x.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
    check(cudaMemcpy(d_logits.data(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice),
          "logits");
    std::vector<float> w(pairs, 1.0f / kUsed);
    check(cudaMemcpy(d_w.data(), w.data(), w.size() * 4, cudaMemcpyHostToDevice), "weights");
    const kernels::ExpertsOut gate_up[] = {
        {DType::q4_k, gate.data(), static_cast<int64_t>(gate_bytes), kFf,
         static_cast<float*>(d_gate.data())},
        {DType::q4_k, up.data(), static_cast<int64_t>(gate_bytes), kFf,
         static_cast<float*>(d_up.data())}};
    const kernels::ExpertsOut down_out[] = {{DType::q6_k, down.data(),
                                             static_cast<int64_t>(down_bytes), kEmbd,
                                             static_cast<float*>(d_y.data())}};
    cuda::DeviceBuffer scratch(
        std::max(kernels::matmul_experts_scratch_bytes(gate_up, 2, kEmbd, kUsed, pairs, kExperts),
                 kernels::matmul_experts_scratch_bytes(down_out, 1, kFf, 1, pairs, kExperts)));
    auto set_ids = [&](int i) {
      return static_cast<const int32_t*>(d_ids.data()) + (i % kIdSets) * pairs;
    };
    std::vector<Row> out;
    out.push_back({"moe_route", tokens,
                   1e3 * median_ms(stream,
                                   [&](int) {
                                     kernels::moe_route(static_cast<const float*>(d_logits.data()),
                                                        tokens, kExperts, kUsed, true, nullptr,
                                                        static_cast<int32_t*>(d_route_ids.data()),
                                                        static_cast<float*>(d_w.data()),
                                                        stream.get());
                                   }),
                   0.0});
    out.push_back({"experts gate+up Q4_K", tokens,
                   1e3 * median_ms(stream,
                                   [&](int i) {
                                     kernels::matmul_experts(gate_up, 2, kEmbd,
                                                             static_cast<const float*>(d_x.data()),
                                                             kUsed, set_ids(i), pairs, kExperts,
                                                             scratch.data(), stream.get());
                                   }),
                   distinct * 2.0 * static_cast<double>(gate_bytes)});
    out.push_back({"experts down Q6_K", tokens,
                   1e3 * median_ms(stream,
                                   [&](int i) {
                                     kernels::matmul_experts(
                                         down_out, 1, kFf, static_cast<const float*>(d_gate.data()),
                                         1, set_ids(i), pairs, kExperts, scratch.data(),
                                         stream.get());
                                   }),
                   distinct * static_cast<double>(down_bytes)});
    out.push_back({"moe_combine", tokens,
                   1e3 * median_ms(stream,
                                   [&](int) {
                                     kernels::moe_combine(
                                         static_cast<const float*>(d_y.data()),
                                         static_cast<const float*>(d_w.data()), tokens, kUsed,
                                         kEmbd, static_cast<float*>(d_out.data()), stream.get());
                                   }),
                   0.0});
    check(cudaGetLastError(), "moe kernels");
    for (const Row& r : out) {
      const double gbps = r.bytes / (r.us * 1e-6) / 1e9;
      std::printf("%-22s %3d tok %9.1f us", r.kernel.c_str(), r.tokens, r.us);
      if (r.bytes > 0)
        std::printf(" %8.0f GB/s %5.1f%% copy (%.0f experts)", gbps,
                    100.0 * gbps / (copy_tbps * 1e3), distinct);
      std::printf("\n");
      rows.push_back({{"kernel", r.kernel},
                      {"n_tokens", r.tokens},
                      {"us", r.us},
                      {"distinct_experts", distinct},
                      {"weight_gb_per_s", r.bytes > 0 ? gbps : 0.0},
                      {"pct_of_copy", r.bytes > 0 ? 100.0 * gbps / (copy_tbps * 1e3) : 0.0}});
    }
  }
  return rows;
}

}  // namespace memra::bench
