// Shared pieces of memra-kernel-check: the run context (seeded RNG, stream, --teeth, --filter,
// the result table), device arrays that poison themselves, and the error measures. The CPU
// references live beside each family's checks and are written independently of the kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "core/dtype.h"

namespace memra::kernel_check {

// One row of the table. error <= tolerance passes (a NaN error fails). metric says how error is
// measured: "rel" = max |gpu - ref| / max(|ref|, floor), "rel-max" = max |gpu - ref| / max |ref|,
// "row-rel" = rel-max per output row, worst row; "bits" = number of elements whose bits differ
// (exact checks).
struct Result {
  std::string kernel, shape, dtype, metric;
  double error = 0.0, tolerance = 0.0;
  std::string broken;  // --teeth: the deliberate defect this run carried
  bool pass() const { return error <= tolerance; }
};

struct Options {
  uint64_t seed = 0;
  bool teeth = false;
  std::string filter;
};

class Context {
 public:
  explicit Context(const Options& options);
  std::mt19937_64& rng() { return rng_; }
  cudaStream_t stream() const { return stream_.get(); }
  void sync() const;  // synchronizes the stream and checks for a launch error
  bool teeth() const { return options_.teeth; }
  // True when the family/kernel name matches --filter (every name when there is none).
  bool wants(const std::string& name) const;
  void add(Result result);  // records and prints one table row
  const std::vector<Result>& results() const { return results_; }

  // Random floats uniform in [lo, hi], never exactly zero.
  std::vector<float> uniform(size_t n, float lo = -1.0f, float hi = 1.0f);
  int32_t randint(int32_t lo, int32_t hi);  // inclusive
  // Cache slots for n_tokens tokens: distinct, random in [0, n_slots), the last -1 (a padding
  // token, which writes nothing).
  std::vector<int32_t> padded_slots(int64_t n_slots, int n_tokens);

 private:
  Options options_;
  std::mt19937_64 rng_;
  cuda::Stream stream_;
  std::vector<Result> results_;
};

// A device array of n elements (at least one byte is allocated). Uploads and downloads go
// through the context's stream and synchronize.
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : buf_(n == 0 ? 1 : n * sizeof(T)), n_(n) {}
  Dev(const Context& ctx, const std::vector<T>& host) : Dev(host.size()) { upload(ctx, host); }
  T* get() const { return static_cast<T*>(buf_.data()); }
  size_t size() const { return n_; }
  void upload(const Context& ctx, const std::vector<T>& host) {
    cuda::check(
        cudaMemcpyAsync(get(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, ctx.stream()),
        "upload");
    ctx.sync();
  }
  std::vector<T> download(const Context& ctx) const {
    std::vector<T> host(n_);
    cuda::check(
        cudaMemcpyAsync(host.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()),
        "download");
    ctx.sync();
    return host;
  }
  // 0xFF bytes: NaN as f32, so an element a kernel failed to write shows up in the comparison.
  void poison(const Context& ctx) {
    cuda::check(cudaMemsetAsync(get(), 0xFF, n_ * sizeof(T), ctx.stream()), "poison");
    ctx.sync();
  }

 private:
  cuda::DeviceBuffer buf_;
  size_t n_;
};

// max |gpu - ref| / max(|ref|, floor_frac * max|ref|); +inf when any gpu value is NaN/Inf where
// ref is finite (an unwritten, poisoned element).
double rel_error(const std::vector<float>& gpu, const std::vector<double>& ref, double floor_frac);
// max |gpu - ref| / max |ref| (matmul's measure).
double rel_max_error(const std::vector<float>& gpu, const std::vector<double>& ref);
// The worst rel_max_error over consecutive rows of `width` elements (attention: one (token,
// head) output row, so long-context rows, whose values are averages and small, are measured
// against their own scale).
double row_rel_max_error(const std::vector<float>& gpu, const std::vector<double>& ref,
                         size_t width);
// Number of elements whose bit patterns differ.
double bit_mismatches(const std::vector<float>& a, const std::vector<float>& b);

// matmul weights of dtype (check_matmul.cpp): random floats quantized with quant::quantize_row,
// or random valid blocks for types without a quantizer; n_out rows in the ggml layout.
std::vector<uint8_t> random_weights(Context& ctx, DType dtype, int64_t n_in, int64_t n_out);

// fn(i) for i in [0, n) on every core, each index once (fn must not touch ctx's RNG: draw first).
// For the CPU references and the weights' quantization, the slow part of a run.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);
// w (n_out rows of dtype) as the GPU gets it: under --teeth with the top exponent bit of every
// block's scale (or value) of row 0 flipped, which wrecks output column 0.
std::vector<uint8_t> gpu_weights(Context& ctx, DType dtype, const std::vector<uint8_t>& w,
                                 int64_t n_out);
// x rows of very different magnitudes (each row scaled by 2^k, k in [-20, 20], one row past
// f16's range): the per-row scaling must keep every row's relative precision.
std::vector<float> wide_range_x(Context& ctx, int64_t n_tokens, int64_t n_in);

// "kernel shape dtype" filter text of a case.
std::string shape_str(std::initializer_list<int64_t> dims);

// The check families (one file each). Each adds its rows to the context.
void check_elementwise(Context& ctx);
void check_norm(Context& ctx);
void check_norm_fused(Context& ctx);  // post_norm_add_norm, rms_norm_dual
void check_get_rows(Context& ctx);
void check_rope(Context& ctx);
void check_kv_store(Context& ctx);
void check_qk_prologue(Context& ctx);
void check_attention_prologue(Context& ctx);
void check_attention(Context& ctx);
void check_matmul(Context& ctx);
void check_matmul_row_max(Context& ctx);  // check_matmul calls it
void check_matmul_fast(Context& ctx);
void check_sampling(Context& ctx);
void check_sample_rows(Context& ctx);
void check_ssm(Context& ctx);  // ssm_conv, gated_delta_rule, rms_norm_gated, sigmoid_mul
void check_moe(Context& ctx);  // moe_route, matmul_experts, moe_combine, sigmoid_scale_rows

}  // namespace memra::kernel_check
