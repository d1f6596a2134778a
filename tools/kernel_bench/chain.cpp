// memra-kernel-bench --chain: what a persistent decode step would save at the kernel boundaries,
// measured before one is written. A decode step's one-token products, every layer's q/k/v,
// output, gate/up and down (tiled Q4_K, the Qwen3-0.6B and -8B shapes, each layer's weights
// its own copy so L2 holds none between steps), run two ways over the same prepared x:
//   launches    one matmul_shared_x call a product (the one-token kernel, programmatic dependent
//               launch, its first chunk loaded before the wait), in a CUDA graph as the engine's
//               decode steps are;
//   persistent  kernels::decode_chain_run: one resident grid, the same block code on the same
//               blocks, a grid-wide barrier where the launches have a boundary, with 0, 1 or 2
//               (decode_chain_run's `early`) of the next call's weights asked for before it
//               (stream launches, not a graph: a cooperative launch may not be captured);
//   barriers    the persistent kernel over as many calls with no blocks: the barriers alone;
//   boundaries  as many launches of an empty kernel (128 blocks, then the grid's): the launches'
//               boundaries alone.
// Both ways must give the same bits (checked here; a difference fails the run). The products
// stand for a step without its small kernels (norms, attention, the activation): what a
// boundary costs between products, not a step's time.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;

struct Model {
  const char* name;
  int layers, embd, q, kv, ff;
};
constexpr Model kModels[] = {{"qwen3-0.6b", 28, 1024, 2048, 1024, 3072},
                             {"qwen3-8b", 36, 4096, 4096, 1024, 12288}};

// Median microseconds of one replay of a graph recorded from record(stream).
template <typename F>
double graph_us(const cuda::Stream& stream, F&& record) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "capture");
  record();
  check(cudaStreamEndCapture(stream.get(), &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const double ms = median_ms(stream, [&](int) { (void)cudaGraphLaunch(exec, stream.get()); });
  check(cudaStreamSynchronize(stream.get()), "replays");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms * 1e3;
}

// Median microseconds of one call of launch() on the stream (the persistent runs: a memset and one
// cooperative launch, whose gap between calls a graph would hide; this counts it against them).
template <typename F>
double stream_us(const cuda::Stream& stream, F&& launch) {
  const double ms = median_ms(stream, [&](int) { launch(); });
  check(cudaStreamSynchronize(stream.get()), "runs");
  return ms * 1e3;
}

nlohmann::json run_model(const Model& m, const cuda::Stream& stream, double copy_tbps,
                         bool& identical) {
  // Per layer: q/k/v (one call of three outputs), o, gate/up (two outputs), down.
  struct Proj {
    int n_in;
    std::vector<int> n_outs;
  };
  const std::vector<Proj> projs = {
      {m.embd, {m.q, m.kv, m.kv}}, {m.q, {m.embd}}, {m.embd, {m.ff, m.ff}}, {m.ff, {m.embd}}};
  // Each matrix of a layer, one copy a layer (tiled_stack), so L2 holds none between steps.
  struct Stack {
    cuda::DeviceBuffer bytes;
    size_t each = 0;
  };
  std::vector<std::vector<Stack>> stacks(projs.size());
  for (size_t p = 0; p < projs.size(); ++p)
    for (int n_out : projs[p].n_outs) {
      Stack st;
      const int n_in = projs[p].n_in;
      st.bytes = tiled_stack(DType::q4_k, n_in, n_out, m.layers,
                             29 + static_cast<uint64_t>(n_out) * 3 + static_cast<uint64_t>(n_in),
                             stream, st.each);
      stacks[p].push_back(std::move(st));
    }

  std::vector<std::unique_ptr<cuda::DeviceBuffer>> owned;  // x, scratch, y, plans
  auto buffer = [&](size_t bytes) {
    owned.push_back(std::make_unique<cuda::DeviceBuffer>(bytes));
    return owned.back()->data();
  };
  std::vector<std::vector<kernels::MatmulOut>> outs;  // per call
  std::vector<kernels::DecodeChainCall> calls;
  std::vector<const float*> xs;               // per call
  std::vector<std::pair<float*, size_t>> ys;  // every output, for the comparison
  double weight_bytes = 0;
  uint64_t seed = 5;
  outs.reserve(static_cast<size_t>(m.layers) * projs.size());
  for (int layer = 0; layer < m.layers; ++layer) {
    for (size_t p = 0; p < projs.size(); ++p) {
      const Proj& pr = projs[p];
      std::vector<float> x(static_cast<size_t>(pr.n_in));
      for (float& v : x) v = static_cast<float>(splitmix(seed) % 2001) / 1000.0f - 1.0f;
      auto* dx = static_cast<float*>(buffer(x.size() * 4));
      check(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
      xs.push_back(dx);
      void* scratch = buffer(kernels::matmul_scratch_bytes(1, pr.n_in));
      kernels::matmul_prepare_x(dx, 1, pr.n_in, scratch, stream.get());
      outs.emplace_back();
      for (size_t o = 0; o < pr.n_outs.size(); ++o) {
        const Stack& st = stacks[p][o];
        const void* w = static_cast<const uint8_t*>(st.bytes.data()) + layer * st.each;
        weight_bytes += static_cast<double>(st.each);
        auto* y = static_cast<float*>(buffer(static_cast<size_t>(pr.n_outs[o]) * 4));
        ys.emplace_back(y, static_cast<size_t>(pr.n_outs[o]));
        outs.back().push_back(
            {DType::q4_k, w, pr.n_outs[o], y, pr.n_outs[o], kernels::WeightLayout::tiled});
      }
      calls.push_back({outs.back().data(), static_cast<int>(outs.back().size()), pr.n_in, scratch});
    }
  }
  check(cudaStreamSynchronize(stream.get()), "setup");
  const int n = static_cast<int>(calls.size());
  void* plan_mem = buffer(kernels::decode_chain_bytes(n));
  const kernels::DecodeChain chain = kernels::decode_chain_plan(calls.data(), n, plan_mem);
  std::vector<kernels::DecodeChainCall> empty = calls;
  for (auto& c : empty) c.n_outs = 0;
  void* empty_mem = buffer(kernels::decode_chain_bytes(n));
  const kernels::DecodeChain barriers = kernels::decode_chain_plan(empty.data(), n, empty_mem);
  auto* counters = static_cast<unsigned*>(buffer(kernels::kDecodeChainCounters * sizeof(unsigned)));

  auto launches = [&] {
    for (size_t i = 0; i < calls.size(); ++i) {
      const kernels::DecodeChainCall& c = calls[i];
      kernels::matmul_shared_x(c.outs, c.n_outs, c.n_in, xs[i], 1, c.scratch, stream.get(), true);
    }
  };
  auto snapshot = [&] {
    std::vector<float> all;
    for (const auto& [y, count] : ys) {
      const size_t at = all.size();
      all.resize(at + count);
      check(cudaMemcpy(all.data() + at, y, count * 4, cudaMemcpyDeviceToHost), "read y");
    }
    return all;
  };
  auto clear = [&] {
    for (const auto& [y, count] : ys) check(cudaMemset(y, 0xff, count * 4), "clear y");
  };
  launches();
  check(cudaStreamSynchronize(stream.get()), "launches");
  const std::vector<float> want = snapshot();

  nlohmann::json rows = nlohmann::json::array();
  // A row's figures; the weight rate only where the row multiplies (not the boundaries or the
  // barriers alone).
  auto row = [&](const std::string& way, double us, int boundaries) {
    const bool work = way.rfind("boundaries", 0) != 0 && way != "barriers";
    const double gbps = weight_bytes / (us * 1e-6) / 1e9;
    std::printf("chain %-10s %-22s %3d calls %9.1f us %7.2f us/layer", m.name, way.c_str(),
                boundaries, us, us / m.layers);
    if (work) std::printf(" %7.0f GB/s %5.1f%% copy", gbps, 100.0 * gbps / (copy_tbps * 1e3));
    std::printf("\n");
    nlohmann::json r = {{"model", m.name},
                        {"way", way},
                        {"calls", boundaries},
                        {"us", us},
                        {"us_per_layer", us / m.layers}};
    if (work) {
      r["weight_bytes"] = weight_bytes;
      r["weight_gb_per_s"] = gbps;
      r["pct_of_copy"] = 100.0 * gbps / (copy_tbps * 1e3);
    }
    rows.push_back(r);
  };
  row("launches", graph_us(stream, launches), n);
  // The boundaries alone, as launched (a graph): 128 empty blocks a launch (the 0.6B's steps
  // have 64-192 blocks), then one of every resident block's size.
  for (int blocks : {128, chain.grid})
    row("boundaries-" + std::to_string(blocks),
        graph_us(stream, [&] { kernels::decode_chain_boundaries(n, blocks, stream.get()); }), n);
  // The first run's placement (blockIdx order), then the blocks spread over the SMs with each
  // early mode.
  struct Way {
    const char* name;
    int early;
    bool spread;
  };
  for (const Way& w : {Way{"persistent-e0-unspread", 0, false}, Way{"persistent-e0", 0, true},
                       Way{"persistent-e1", 1, true}, Way{"persistent-e2", 2, true}}) {
    clear();
    kernels::decode_chain_run(chain, w.early, w.spread, counters, stream.get());
    check(cudaGetLastError(), "persistent chain launch");
    check(cudaStreamSynchronize(stream.get()), "persistent chain");
    const std::vector<float> got = snapshot();
    const bool same = std::memcmp(got.data(), want.data(), want.size() * 4) == 0;
    identical = identical && same;
    if (!same) std::printf("chain %s %s: outputs DIFFER\n", m.name, w.name);
    row(w.name,
        stream_us(
            stream,
            [&] { kernels::decode_chain_run(chain, w.early, w.spread, counters, stream.get()); }),
        n);
  }
  row("barriers",
      stream_us(stream,
                [&] { kernels::decode_chain_run(barriers, 0, true, counters, stream.get()); }),
      n);
  std::printf("chain %s: grid %d blocks, %.1f MB of weights, outputs %s\n", m.name, chain.grid,
              weight_bytes / 1e6, identical ? "identical" : "DIFFER");
  return rows;
}

}  // namespace

nlohmann::json run_chain(const cuda::Stream& stream, double copy_tbps, bool& identical) {
  identical = true;
  nlohmann::json rows = nlohmann::json::array();
  for (const Model& m : kModels)
    for (auto& r : run_model(m, stream, copy_tbps, identical)) rows.push_back(r);
  return rows;
}

}  // namespace memra::bench
