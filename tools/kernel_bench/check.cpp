// memra-kernel-bench's self-check (also run before timing): each supported weight type on small
// odd shapes against a CPU double reference over the operands the kernels multiply (exact weights,
// x rounded to f16 after its row's power-of-two scaling: kernels/matmul/matmul.cu), and
// bit-identity of a token's row across batch sizes 1..300 (the decode and prefill kernels). The
// full gate is memra-kernel-check; this keeps the benchmark from timing a kernel that computes
// garbage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "core/half.h"
#include "formats/quant.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;

struct Case {
  int n_in;
  int n_out;
};

// Sizes that cut chunks, 64-element sub-stages and 128-row tiles short.
std::vector<Case> cases_for(DType dtype) {
  const uint32_t block = dtype_traits(dtype).block_size;
  if (block == 256) return {{768, 200}, {256, 37}};
  if (block == 32) return {{800, 200}, {96, 37}};
  return {{784, 200}, {48, 37}};
}

// x as the matmul kernels see it: each row scaled by the power of two that brings its largest
// |x| into [2^14, 2^15), rounded to f16, scaled back (exact).
std::vector<float> as_kernels_see(const std::vector<float>& x, int n_in) {
  std::vector<float> out(x.size());
  for (size_t r = 0; r < x.size() / n_in; ++r) {
    float m = 0.0f;
    for (int i = 0; i < n_in; ++i) m = std::max(m, std::fabs(x[r * n_in + i]));
    int e = 0;
    if (m > 0.0f) (void)std::frexp(m, &e);
    const int shift = m > 0.0f ? 15 - e : 0;
    for (int i = 0; i < n_in; ++i) {
      const float v = std::ldexp(x[r * n_in + i], shift);
      out[r * n_in + i] = std::ldexp(f16_to_f32(f32_to_f16(v)), -shift);
    }
  }
  return out;
}

// Largest |gpu - ref| relative to sum |w x| of that element, and whether a token's row matches the
// largest batch's bits. Prints one line per case.
bool check_case(DType dtype, const Case& c, cudaStream_t stream) {
  std::mt19937 rng(1234u + static_cast<uint32_t>(dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<int> batches = {300, 1, 5, 8, 9, 77};
  const int max_tokens = batches[0];
  const size_t row_bytes = dtype_row_bytes(dtype, static_cast<uint64_t>(c.n_in), "check");
  std::vector<uint8_t> w(row_bytes * c.n_out);
  std::vector<float> row(c.n_in), wref(static_cast<size_t>(c.n_in) * c.n_out);
  for (int o = 0; o < c.n_out; ++o) {
    for (float& v : row) v = normal(rng) * 0.05f;
    quant::quantize_row(dtype, row.data(), w.data() + o * row_bytes, c.n_in);
    quant::dequantize_row(dtype, w.data() + o * row_bytes, wref.data() + size_t{1} * o * c.n_in,
                          c.n_in);
  }
  std::vector<float> x(static_cast<size_t>(max_tokens) * c.n_in);
  for (float& v : x) v = normal(rng);
  const bool exact = dtype == DType::f32;
  const std::vector<float> xk = exact ? x : as_kernels_see(x, c.n_in);
  std::vector<double> ref(static_cast<size_t>(max_tokens) * c.n_out),
      mag(static_cast<size_t>(max_tokens) * c.n_out);
  for (int t = 0; t < max_tokens; ++t) {
    for (int o = 0; o < c.n_out; ++o) {
      double s = 0.0, m = 0.0;
      for (int i = 0; i < c.n_in; ++i) {
        const double p = static_cast<double>(wref[size_t{1} * o * c.n_in + i]) *
                         static_cast<double>(xk[size_t{1} * t * c.n_in + i]);
        s += p;
        m += std::fabs(p);
      }
      ref[size_t{1} * t * c.n_out + o] = s;
      mag[size_t{1} * t * c.n_out + o] = m;
    }
  }

  const int64_t ldy = c.n_out + 3;  // the 3 extra columns must stay untouched
  cuda::DeviceBuffer dw(w.size()), dx(x.size() * 4), dy(size_t{1} * max_tokens * ldy * 4),
      scratch(kernels::matmul_scratch_bytes(max_tokens, c.n_in) + 16);
  check(cudaMemcpy(dw.data(), w.data(), w.size(), cudaMemcpyHostToDevice), "upload w");
  check(cudaMemcpy(dx.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), "upload x");
  std::vector<float> y(size_t{1} * max_tokens * ldy), first;
  double worst = 0.0;
  bool invariant = true, untouched = true;
  for (int tokens : batches) {
    check(cudaMemset(dy.data(), 0xff, dy.size()), "poison y");
    kernels::matmul(dtype, dw.data(), c.n_in, c.n_out, static_cast<const float*>(dx.data()), tokens,
                    static_cast<float*>(dy.data()), ldy, scratch.data(), stream);
    check(cudaStreamSynchronize(stream), "matmul");
    check(cudaMemcpy(y.data(), dy.data(), y.size() * 4, cudaMemcpyDeviceToHost), "download y");
    for (int t = 0; t < tokens; ++t) {
      for (int o = 0; o < c.n_out; ++o) {
        const size_t r = size_t{1} * t * c.n_out + o;
        const double err = std::fabs(y[t * ldy + o] - ref[r]) / (mag[r] + 1e-30);
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
      for (int o = c.n_out; o < ldy; ++o) {
        uint32_t bits;
        std::memcpy(&bits, &y[t * ldy + o], 4);
        untouched = untouched && bits == 0xffffffffu;
      }
    }
    if (first.empty()) {
      first = y;
    } else {
      invariant =
          invariant && std::memcmp(first.data(), y.data(), size_t{1} * tokens * ldy * 4) == 0;
    }
  }
  // f32 accumulation over n_in terms: ~1e-6 of sum |w x| expected; 1e-4 catches layout bugs.
  const bool ok = worst < (exact ? 1e-5 : 1e-4) && invariant && untouched;
  std::printf(
      "check %-5s n_in %4d n_out %3d: max err %.2e of sum|wx|, batch-invariant %s, ldy "
      "padding %s: %s\n",
      std::string(dtype_name(dtype)).c_str(), c.n_in, c.n_out, worst, invariant ? "yes" : "NO",
      untouched ? "untouched" : "WRITTEN", ok ? "ok" : "FAIL");
  return ok;
}

}  // namespace

bool run_check(const std::vector<DType>& dtypes, cudaStream_t stream) {
  bool all = true;
  for (DType dtype : dtypes) {
    for (const Case& c : cases_for(dtype)) all = check_case(dtype, c, stream) && all;
  }
  return all;
}

}  // namespace memra::bench
