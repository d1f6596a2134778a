// memra-kernel-bench's prompt-step elementwise timings: the kernels of a prefill step beside the
// products and attention (x's f16 preparation, the norms, the gated activation, the attention
// prologue's q/k norms, rope and cache write) at Qwen3-8B's widths for 512 and 2,048 tokens, each
// against the bytes it must move at the copy rate. Why: a
// serialized Nsight Compute table of a 512-token step gave them ~25% of its kernel time
// (PERFORMANCE.md, thirty-fourth round), where their bytes are a few us each; timed here in a
// burst (bench.h), at the clocks a step runs them at. The inputs stay L2-resident between calls,
// as a step's freshly written activations are.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"
#include "kernels/row_max.h"

namespace memra::bench {
namespace {

using cuda::check;

cuda::DeviceBuffer random_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  cuda::DeviceBuffer d(v.size() * sizeof(float));
  check(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
  return d;
}

}  // namespace

nlohmann::json run_elementwise(const cuda::Stream& stream, double copy_tbps) {
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937 rng(5);
  constexpr int64_t kDim = 4096, kFf = 12288;
  for (const int64_t n : {int64_t{512}, int64_t{2048}}) {
    cuda::DeviceBuffer x = random_floats(n * 2 * kFf, rng), d = random_floats(n * kDim, rng);
    cuda::DeviceBuffer w = random_floats(kDim, rng), y(static_cast<size_t>(n * kFf) * 4);
    cuda::DeviceBuffer scratch(kernels::matmul_scratch_bytes(n, kFf));
    float* xf = static_cast<float*>(x.data());
    float* df = static_cast<float*>(d.data());
    float* yf = static_cast<float*>(y.data());
    const float* wf = static_cast<const float*>(w.data());
    const auto time = [&](const char* name, int64_t width, double bytes, auto launch) {
      const double ms = median_ms(stream, [&](int) { launch(); });
      check(cudaGetLastError(), name);
      const double tbps = bytes / (ms * 1e-3) / 1e12;
      std::printf("%-24s %6lld x %-6lld %9.1f us %8.2f TB/s %6.1f%% copy\n", name,
                  static_cast<long long>(n), static_cast<long long>(width), ms * 1e3, tbps,
                  100.0 * tbps / copy_tbps);
      rows.push_back({{"kernel", name},
                      {"n_tokens", n},
                      {"width", width},
                      {"us", ms * 1e3},
                      {"tb_per_s", tbps},
                      {"copy_fraction", tbps / copy_tbps}});
    };
    // x_to_f16 (matmul_prepare_x): the rows read as f32, written as f16 in element order (xh, the
    // mma.sync kernels' form), one sum a 32-element group and a factor a row. A prefill step on
    // sm_90a writes the wgmma kernels' tile form instead (prepare_x.cu's launch_xp_groups), which
    // memra-kernel-bench --tokens 512 times inside each product's row: this row is not its cost
    // (PERFORMANCE.md, thirty-fifth round, item 4).
    for (const int64_t width : {kDim, kFf}) {
      time("x_to_f16 xh", width, n * width * (4.0 + 2.0 + 4.0 / 32),
           [&] { kernels::matmul_prepare_x(xf, n, width, scratch.data(), stream.get()); });
    }
    time("rms_norm", kDim, n * kDim * 8.0,
         [&] { kernels::rms_norm(xf, wf, n, kDim, 1e-6f, yf, stream.get()); });
    time("add_rms_norm", kDim, n * kDim * 16.0,
         [&] { kernels::add_rms_norm(xf, df, wf, n, kDim, 1e-6f, yf, stream.get()); });
    // The same writing each row's largest |y| for the products (kernels/row_max.h): what the norm
    // pays for the launch it saves.
    time("add_rms_norm row max", kDim, n * kDim * 16.0, [&] {
      kernels::rms_norm_row_max(xf, df, wf, n, kDim, 1e-6f, yf, scratch.data(), stream.get());
    });
    // The same writing x's rows form too (kernels/row_max.h, MEMRA_X_ROWS): y, then its f16 rows,
    // group sums and row scales, all the products need.
    time("add_rms_norm x rows", kDim, n * kDim * (16.0 + 2.0 + 4.0 / 32), [&] {
      kernels::rms_norm_x_rows(xf, df, wf, n, kDim, 1e-6f, yf, scratch.data(), stream.get());
    });
    time("act_mul silu", kFf, n * kFf * 12.0, [&] {
      kernels::act_mul(kernels::Act::silu, xf, xf + kFf, n, kFf, 2 * kFf, yf, stream.get());
    });
    // The same rows a block a row writing x's rows form for the down projection too (the gate and
    // up rows contiguous apart rather than interleaved: the same bytes).
    time("act_mul silu x rows", kFf, n * kFf * (12.0 + 2.0 + 4.0 / 32), [&] {
      (void)kernels::act_mul_x_rows(kernels::Act::silu, xf, xf + n * kFf, n, kFf, yf,
                                    scratch.data(), stream.get());
    });
    // qk_prologue at the 8B's heads (32 q, 8 kv, 128 dims, neox rope of every dim, q and k normed)
    // into an F16 cache: q and k read and written in place, v read, k and v written to the cache.
    // q, k and v are slices of the activation buffer above (its values stay bounded: the norms
    // rescale q and k to the weights' size each call).
    {
      constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128;
      constexpr int64_t kKv = int64_t{kKvHeads} * kHeadDim;
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
      std::vector<double> inv(kHeadDim / 2);
      for (int i = 0; i < kHeadDim / 2; ++i) inv[i] = std::pow(1e6, -2.0 * i / kHeadDim);
      cuda::DeviceBuffer dpos(pos.size() * 4), dinv(inv.size() * 8);
      cuda::DeviceBuffer kc(static_cast<size_t>(n * kKv) * 2), vc(static_cast<size_t>(n * kKv) * 2);
      check(cudaMemcpy(dpos.data(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice), "upload");
      check(cudaMemcpy(dinv.data(), inv.data(), inv.size() * 8, cudaMemcpyHostToDevice), "upload");
      kernels::PagedKv kv;
      kv.k = kc.data();
      kv.v = vc.data();
      kv.dtype = DType::f16;
      kv.n_kv_heads = kKvHeads;
      kv.head_dim = kHeadDim;
      kernels::StepDev step;
      step.n_tokens = static_cast<int32_t>(n);
      step.n_seqs = 1;
      step.positions = static_cast<const int32_t*>(dpos.data());
      step.slots = step.positions;  // token t into slot t
      float* q = xf;
      float* k = q + n * kHeads * kHeadDim;
      float* v = k + n * kKv;
      const double bytes = n * (8.0 * kHeads * kHeadDim + 8.0 * kKv + 4.0 * kKv + 4.0 * kKv);
      const auto* inv_freq = static_cast<const double*>(dinv.data());
      time("qk_prologue f16", kHeads * kHeadDim + 2 * kKv, bytes, [&] {
        kernels::qk_prologue(kv, step, q, k, v, kHeads, wf, wf, nullptr, 1e-6f, kHeadDim, true,
                             inv_freq, stream.get());
      });
      // The same reading the step's angle table (made once a forward for every layer, so not
      // timed here; its own row below).
      cuda::DeviceBuffer angles(static_cast<size_t>(n * kernels::qk_angle_table_floats(kHeadDim)) *
                                sizeof(float));
      auto* table = static_cast<float*>(angles.data());
      kernels::qk_angle_table(step, kHeadDim, inv_freq, table, stream.get());
      time("qk_prologue f16 table", kHeads * kHeadDim + 2 * kKv,
           bytes + n * kernels::qk_angle_table_floats(kHeadDim) * 4.0, [&] {
             kernels::qk_prologue(kv, step, q, k, v, kHeads, wf, wf, nullptr, 1e-6f, kHeadDim, true,
                                  inv_freq, stream.get(), table);
           });
      time("qk_angle_table", kHeadDim, n * kernels::qk_angle_table_floats(kHeadDim) * 4.0,
           [&] { kernels::qk_angle_table(step, kHeadDim, inv_freq, table, stream.get()); });
    }
  }
  return rows;
}

}  // namespace memra::bench
