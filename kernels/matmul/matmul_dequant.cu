// The kernels around the fast (not batch-invariant) prefill matmul of `--deterministic off`
// (kernels.h; the cuBLASLt GEMM itself is the backend's): a tiled matrix dequantized to a plain
// f16 [n_out][n_in] copy, and the per-token scaling that undoes x's power of two afterwards.
//
// Why a copy. The canonical kernels apply each scale group's f32 scale to the group's mma sum,
// which costs one FMA per (row, token, group) on the CUDA cores beside the tensor cores' 32: at
// prefill sizes that scaling, not the tensor cores, sets the pace (118 TFLOP/s on the H200 for
// Q4_K against 366 for BF16 and cuBLASLt's ~700). Dequantizing once per matrix and step (read
// 0.56-2 bytes a weight, write 2) costs ~30 us for an 8B gate matrix, after which cuBLASLt runs at
// its own rate. The rounding differs from the canonical order (each weight is rounded to f16,
// and cuBLASLt sums in its own order), so a token's outputs depend on which path its step took:
// hence the flag.
#include "core/error.h"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled.cuh"

namespace memra::kernels {
namespace {

using matmul_detail::kChunk;
using matmul_detail::Tiled;

constexpr int kWarps = 8;

// One warp per tile record (16 rows x 256 elements): lane (g, t) holds, per k16 step s, register
// i's two quants of row g + 8 (i & 1), elements 16 s + 4 t + 2 (i >> 1) + {0, 1} (weight_frag.cuh's
// k permutation), so rows g and g + 8 each get four consecutive elements: one 8-byte store each.
template <DType D>
__global__ void __launch_bounds__(kWarps * 32)
    dequant_tiled_kernel(const uint8_t* __restrict__ w, int n_chunks, int n_out, int64_t n_in,
                         int64_t n_records, uint16_t* __restrict__ out) {
  detail::wait_for_inputs();
  using T = Tiled<D>;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t record = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (record >= n_records) return;
  const int64_t tile = record / n_chunks;
  const int chunk = static_cast<int>(record % n_chunks);
  const uint8_t* rec = w + record * T::kBytes;
  const typename T::Head head[2] = {T::head(rec, g), T::head(rec, g + 8)};
  const int64_t rows[2] = {tile * 16 + g, tile * 16 + g + 8};
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const typename T::Quad quad = T::load(rec, u, lane);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int step = 4 * u + v;
      uint32_t af[4];
      T::frag(quad, v, af);
      const int group = step * 16 / T::kGroup;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // row g + 8h: registers h (elements 4t, +1) and h + 2 (+2, +3)
        if (rows[h] >= n_out) continue;
        const float2 sc = T::kScaled ? T::scale(head[h], group) : make_float2(1.0f, 0.0f);
        uint32_t packed[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float2 q = __half22float2(matmul_detail::bits_h2(af[h + 2 * r]));
          const float lo = T::kScaled ? fmaf(sc.x, q.x, sc.y) : q.x;
          const float hi = T::kScaled ? fmaf(sc.x, q.y, sc.y) : q.y;
          packed[r] = matmul_detail::pack_f16(lo, hi);
        }
        *reinterpret_cast<uint2*>(out + rows[h] * n_in + int64_t{chunk} * kChunk + 16 * step +
                                  4 * t) = make_uint2(packed[0], packed[1]);
      }
    }
  }
}

__global__ void scale_rows_kernel(float* y, const float* s, int64_t n_rows, int64_t n, int64_t ld) {
  detail::wait_for_inputs();
  const int64_t total = n_rows * n;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t r = i / n;
    y[r * ld + i % n] *= s[r];
  }
}

}  // namespace

bool matmul_dequant_supported(DType wtype, WeightLayout layout) {
  return layout == WeightLayout::tiled &&
         (wtype == DType::q4_k || wtype == DType::q6_k || wtype == DType::q8_0 ||
          wtype == DType::f16 || wtype == DType::bf16);
}

void matmul_dequant_f16(DType wtype, const void* tiled, int64_t n_in, int64_t n_out, void* out,
                        cudaStream_t stream) {
  if (n_in <= 0 || n_in % kChunk != 0 || n_in > (int64_t{1} << 30) || n_out < 0 ||
      n_out > (int64_t{1} << 30))
    fail(ErrorCode::invalid_argument, "matmul_dequant_f16: unsupported sizes n_in {} n_out {}",
         n_in, n_out);
  if (n_out == 0) return;
  const int n_chunks = static_cast<int>(n_in / kChunk);
  const int64_t n_records = (n_out + 15) / 16 * n_chunks;
  const auto blocks = static_cast<unsigned>((n_records + kWarps - 1) / kWarps);
  auto* w = static_cast<const uint8_t*>(tiled);
  auto* o = static_cast<uint16_t*>(out);
  const int rows = static_cast<int>(n_out);
  switch (wtype) {
#define MEMRA_CASE(D)                                                                          \
  case D:                                                                                      \
    detail::launch(dequant_tiled_kernel<D>, blocks, kWarps * 32, 0, stream, w, n_chunks, rows, \
                   n_in, n_records, o);                                                        \
    return;
    MEMRA_CASE(DType::q4_k)
    MEMRA_CASE(DType::q6_k)
    MEMRA_CASE(DType::q8_0)
    MEMRA_CASE(DType::f16)
    MEMRA_CASE(DType::bf16)
#undef MEMRA_CASE
    default:
      fail(ErrorCode::unsupported, "matmul_dequant_f16: no tiled f16 copy of {}",
           dtype_name(wtype));
  }
}

void scale_rows(float* y, const float* s, int64_t n_rows, int64_t n, int64_t ld,
                cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  detail::launch(scale_rows_kernel, detail::grid_for(n_rows * n), detail::kThreads, 0, stream, y, s,
                 n_rows, n, ld);
}

}  // namespace memra::kernels
