// memra-kernel-bench's mixture-of-experts timings on Qwen3-30B-A3B's shape (2048 wide, 128
// experts of 768, top 8; gate and up tiled Q4_K, down tiled Q6_K, as its Q4_K_M file): the
// router's top-k (moe_route), the experts' gate+up and down products (matmul_experts: a block per
// pair up to 64 pairs, sorted by expert above) and the weighted sum (moe_combine), at 1, 8 and 64
// tokens. Each call routes to a fresh random set of experts (16 sets in turn), so the experts'
// 340 MB cannot sit in L2 between calls. GB/s counts the bytes of the distinct experts a call
// reads, once each: a kernel that reads an expert once per pair shows it as a low percentage.
// Then Gemma 4 26B-A4B's experts in the file's layout and its F32 router (run_gemma4_shape).
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

struct Row {
  std::string kernel;
  int tokens;
  double us, bytes;
};

// n_expert matrices of [n_in, n_out] in the file's layout (random valid ggml blocks), each
// expert_bytes long.
cuda::DeviceBuffer ggml_stack(DType dtype, int n_in, int n_out, int n_expert,
                              size_t& expert_bytes) {
  expert_bytes = dtype_row_bytes(dtype, static_cast<uint64_t>(n_in), "bench") * n_out;
  std::vector<uint8_t> host(expert_bytes * n_expert);
  uint64_t seed = 29 + static_cast<uint64_t>(n_out) + static_cast<uint64_t>(dtype);
  for (size_t i = 0; i + 8 <= host.size(); i += 8) {
    const uint64_t v = splitmix(seed);
    std::copy_n(reinterpret_cast<const uint8_t*>(&v), 8, host.data() + i);
  }
  make_valid(dtype, host.data(), host.size());
  cuda::DeviceBuffer out(host.size());
  check(cudaMemcpy(out.data(), host.data(), host.size(), cudaMemcpyHostToDevice), "upload experts");
  return out;
}

void print_row(const Row& r, double distinct, double copy_tbps, nlohmann::json& rows) {
  const double gbps = r.bytes / (r.us * 1e-6) / 1e9;
  std::printf("%-22s %3d tok %9.1f us", r.kernel.c_str(), r.tokens, r.us);
  if (r.bytes > 0)
    std::printf(" %8.0f GB/s %5.1f%% copy (%.0f experts)", gbps, 100.0 * gbps / (copy_tbps * 1e3),
                distinct);
  std::printf("\n");
  rows.push_back({{"kernel", r.kernel},
                  {"n_tokens", r.tokens},
                  {"us", r.us},
                  {"distinct_experts", distinct},
                  {"weight_gb_per_s", r.bytes > 0 ? gbps : 0.0},
                  {"pct_of_copy", r.bytes > 0 ? 100.0 * gbps / (copy_tbps * 1e3) : 0.0}});
}

// kIdSets routings of `tokens` tokens: each token's `used` distinct experts of n_expert, in
// increasing order; distinct = the distinct experts a routing holds, averaged.
std::vector<int32_t> routings(int tokens, int used, int n_expert, uint64_t& seed,
                              double& distinct) {
  const int pairs = tokens * used;
  std::vector<int32_t> ids(static_cast<size_t>(kIdSets) * pairs);
  distinct = 0;
  for (int s = 0; s < kIdSets; ++s) {
    std::set<int32_t> all;
    for (int t = 0; t < tokens; ++t) {
      std::set<int32_t> mine;
      while (static_cast<int>(mine.size()) < used)
        mine.insert(static_cast<int32_t>(splitmix(seed) % n_expert));
      std::copy(mine.begin(), mine.end(), ids.begin() + s * pairs + t * used);
      all.insert(mine.begin(), mine.end());
    }
    distinct += static_cast<double>(all.size()) / kIdSets;
  }
  return ids;
}

// Gemma 4 26B-A4B's expert products that its Q4_K_M file keeps in the file's layout (128
// experts, top 8, 2816 wide, down experts 704 -> 2816 in Q8_0 or Q5_0: K = 704 is no multiple of
// the tiled layout's 256) and its F32 router (2816 -> 128, the exact path), at 1, 8 and 64
// tokens. The router's 16 copies rotate like the routings, so its 1.4 MB is not in L2 either.
void run_gemma4_shape(const cuda::Stream& stream, double copy_tbps, nlohmann::json& rows) {
  constexpr int kG4Experts = 128, kG4Used = 8, kG4Embd = 2816, kG4Ff = 704;
  size_t q8_bytes = 0, q5_bytes = 0;
  const cuda::DeviceBuffer q8 = ggml_stack(DType::q8_0, kG4Ff, kG4Embd, kG4Experts, q8_bytes);
  const cuda::DeviceBuffer q5 = ggml_stack(DType::q5_0, kG4Ff, kG4Embd, kG4Experts, q5_bytes);
  size_t router_bytes = 0;
  const cuda::DeviceBuffer router =
      ggml_stack(DType::f32, kG4Embd, kG4Experts, kIdSets, router_bytes);
  uint64_t seed = 11;
  for (const int tokens : {1, 8, 64}) {
    const int pairs = tokens * kG4Used;
    double distinct = 0;
    const std::vector<int32_t> ids = routings(tokens, kG4Used, kG4Experts, seed, distinct);
    std::vector<float> x(static_cast<size_t>(pairs) * kG4Embd);
    for (float& v : x) v = static_cast<float>(splitmix(seed) >> 40) / 8388608.0f - 1.0f;
    cuda::DeviceBuffer d_ids(ids.size() * 4), d_x(x.size() * 4), d_y(pairs * kG4Embd * 4);
    check(cudaMemcpy(d_ids.data(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "ids");
    check(cudaMemcpy(d_x.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
    auto set_ids = [&](int i) {
      return static_cast<const int32_t*>(d_ids.data()) + (i % kIdSets) * pairs;
    };
    const auto* xf = static_cast<const float*>(d_x.data());
    auto* y = static_cast<float*>(d_y.data());
    const kernels::ExpertsOut q8_out[] = {{DType::q8_0, q8.data(), static_cast<int64_t>(q8_bytes),
                                           kG4Embd, y, kernels::WeightLayout::ggml}};
    const kernels::ExpertsOut q5_out[] = {{DType::q5_0, q5.data(), static_cast<int64_t>(q5_bytes),
                                           kG4Embd, y, kernels::WeightLayout::ggml}};
    cuda::DeviceBuffer scratch(
        std::max({kernels::matmul_experts_scratch_bytes(q8_out, 1, kG4Ff, 1, pairs, kG4Experts),
                  kernels::matmul_experts_scratch_bytes(q5_out, 1, kG4Ff, 1, pairs, kG4Experts),
                  kernels::matmul_scratch_bytes(tokens, kG4Embd)}));
    std::vector<Row> out;
    for (const auto* o : {q8_out, q5_out}) {
      const double bytes = distinct * static_cast<double>(o->expert_bytes);
      out.push_back({"g4 down ggml " + std::string(dtype_name(o->wtype)), tokens,
                     1e3 * median_ms(stream,
                                     [&](int i) {
                                       kernels::matmul_experts(o, 1, kG4Ff, xf, 1, set_ids(i),
                                                               pairs, kG4Experts, scratch.data(),
                                                               stream.get());
                                     }),
                     bytes});
    }
    out.push_back({"g4 router F32 exact", tokens,
                   1e3 * median_ms(stream,
                                   [&](int i) {
                                     const kernels::MatmulOut r{
                                         DType::f32,
                                         static_cast<const uint8_t*>(router.data()) +
                                             (i % kIdSets) * router_bytes,
                                         kG4Experts, y, kG4Experts};
                                     kernels::matmul_shared_x(&r, 1, kG4Embd, xf, tokens,
                                                              scratch.data(), stream.get());
                                   }),
                   static_cast<double>(router_bytes)});
    check(cudaGetLastError(), "gemma 4 expert kernels");
    for (const Row& r : out) print_row(r, distinct, copy_tbps, rows);
  }
}

}  // namespace

nlohmann::json run_moe(const cuda::Stream& stream, double copy_tbps) {
  size_t gate_bytes = 0, down_bytes = 0;
  const cuda::DeviceBuffer gate =
      tiled_stack(DType::q4_k, kEmbd, kFf, kExperts, 17 + kFf, stream, gate_bytes);
  const cuda::DeviceBuffer up =
      tiled_stack(DType::q4_k, kEmbd, kFf, kExperts, 17 + kFf, stream, gate_bytes);
  const cuda::DeviceBuffer down =
      tiled_stack(DType::q6_k, kFf, kEmbd, kExperts, 17 + kEmbd, stream, down_bytes);
  nlohmann::json rows = nlohmann::json::array();
  uint64_t seed = 5;
  for (const int tokens : {1, 8, 64}) {
    const int pairs = tokens * kUsed;
    double distinct = 0;
    const std::vector<int32_t> ids = routings(tokens, kUsed, kExperts, seed, distinct);
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
    for (const Row& r : out) print_row(r, distinct, copy_tbps, rows);
  }
  run_gemma4_shape(stream, copy_tbps, rows);
  return rows;
}

}  // namespace memra::bench
