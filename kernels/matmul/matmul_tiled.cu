// The tiled weight layout's host side (kernels.h): which matrices have it, its size, and the
// kernel that rewrites a ggml matrix into it (tiled.cuh says where each byte goes). Runs once per
// weight at load; the ggml copy can be freed afterwards.
#include "core/error.h"
#include "kernels/cuda_status.h"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels {
namespace {

using matmul_detail::kChunk;

// Quant e (0..255) of a ggml Q4_K block: nibble j % 2 of qs[32 (j / 2) + e % 32], j = e / 32.
__device__ uint32_t q4k_quant(const uint8_t* block, int e) {
  const int j = e >> 5;
  return (block[16 + 32 * (j >> 1) + (e & 31)] >> (4 * (j & 1))) & 15u;
}
// Quant e of a ggml Q6_K block, split into its low nibble and its 2 high bits.
__device__ uint32_t q6k_low(const uint8_t* block, int e) {
  const int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
  return (block[64 * h + 32 * (s & 1) + l] >> (4 * (s >> 1))) & 15u;
}
__device__ uint32_t q6k_high(const uint8_t* block, int e) {
  const int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
  return (block[128 + 32 * h + l] >> (2 * s)) & 3u;
}
// Quant e (0..255) of a chunk of eight ggml Q8_0 blocks (f16 d, int8 qs[32]), as its raw byte.
__device__ uint32_t q8_quant(const uint8_t* chunk, int e) {
  return chunk[34 * (e >> 5) + 2 + (e & 31)];
}

// Element index (within the chunk) and row (within the tile) of register i's pair member m of
// lane (g, t) at step s: the A fragment order of tiled.cuh.
struct Slot {
  int row, e;
};
__device__ Slot slot(int lane, int s, int i, int m) {
  const int g = lane >> 2, t = lane & 3;
  return {g + 8 * (i & 1), 16 * s + 4 * t + 2 * (i >> 1) + m};
}

// F16 / BF16: one warp per record; lane l writes its A fragment of each of the chunk's 16 steps
// (BF16 as the f16 pairs Weight<bf16>::to_f16 makes of it, the ggml kernels' operands).
template <DType D>
__global__ void tile_half_kernel(const uint8_t* __restrict__ src, int64_t row_bytes, int n_out,
                                 int n_chunks, uint8_t* __restrict__ dst) {
  detail::wait_for_inputs();
  using W = matmul_detail::Weight<D>;
  const int64_t rec_index = blockIdx.x;
  const int tile = static_cast<int>(rec_index / n_chunks),
            c = static_cast<int>(rec_index % n_chunks);
  const int lane = threadIdx.x;
  uint8_t* rec = dst + rec_index * matmul_detail::Tiled<D>::kBytes;
  for (int s = 0; s < kChunk / 16; ++s) {
    uint32_t words[4];
    for (int i = 0; i < 4; ++i) {
      const Slot sl = slot(lane, s, i, 0);  // the pair's first element: even, 4-byte aligned
      const int r = tile * 16 + sl.row;
      uint32_t pair = 0;
      if (r < n_out) {
        pair = *reinterpret_cast<const uint32_t*>(src + static_cast<int64_t>(r) * row_bytes +
                                                  2 * (static_cast<int64_t>(c) * kChunk + sl.e));
        if constexpr (D == DType::bf16) pair = W::to_f16(pair);
      }
      words[i] = pair;
    }
    *reinterpret_cast<uint4*>(rec + 512 * s + 16 * lane) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// One warp per record (tile, chunk); lane l writes its own fragments and, for l < 16, row l's
// scale data.
template <DType D>
__global__ void tile_kernel(const uint8_t* __restrict__ src, int64_t row_bytes, int n_out,
                            int n_chunks, uint8_t* __restrict__ dst) {
  detail::wait_for_inputs();
  // Bytes of one row's chunk in the file: one K-quant super-block, or eight Q8_0 blocks.
  constexpr int kRaw = D == DType::q4_k ? 144 : D == DType::q6_k ? 210 : 8 * 34;
  const int64_t rec_index = blockIdx.x;
  const int tile = static_cast<int>(rec_index / n_chunks),
            c = static_cast<int>(rec_index % n_chunks);
  const int lane = threadIdx.x;
  uint8_t* rec = dst + rec_index * matmul_detail::Tiled<D>::kBytes;
  auto block = [&](int row) -> const uint8_t* {
    const int r = tile * 16 + row;
    return r < n_out ? src + static_cast<int64_t>(r) * row_bytes + static_cast<int64_t>(c) * kRaw
                     : nullptr;
  };
  if constexpr (D == DType::q8_0) {
    for (int u = 0; u < 4; ++u) {
      uint32_t words[8] = {};
      for (int v = 0; v < 4; ++v) {
        for (int i = 0; i < 4; ++i) {
          for (int m = 0; m < 2; ++m) {
            const Slot sl = slot(lane, 4 * u + v, i, m);
            const uint8_t* b = block(sl.row);
            const int byte = 8 * v + 2 * i + m;
            words[byte >> 2] |= (b ? q8_quant(b, sl.e) : 0u) << (8 * (byte & 3));
          }
        }
      }
      auto* dst16 = reinterpret_cast<uint4*>(rec + 1024 * u + 32 * lane);
      dst16[0] = make_uint4(words[0], words[1], words[2], words[3]);
      dst16[1] = make_uint4(words[4], words[5], words[6], words[7]);
    }
    if (lane < 16) {
      const uint8_t* b = block(lane);
      for (int j = 0; j < 8; ++j) {
        rec[4096 + 16 * lane + 2 * j] = b ? b[34 * j] : 0;
        rec[4096 + 16 * lane + 2 * j + 1] = b ? b[34 * j + 1] : 0;
      }
    }
  } else {
    for (int u = 0; u < 4; ++u) {
      uint32_t words[4];
      for (int v = 0; v < 4; ++v) {
        const int s = 4 * u + v;
        uint32_t w = 0;
        for (int i = 0; i < 4; ++i) {
          for (int m = 0; m < 2; ++m) {
            const Slot sl = slot(lane, s, i, m);
            const uint8_t* b = block(sl.row);
            const uint32_t q = !b ? 0u : D == DType::q4_k ? q4k_quant(b, sl.e) : q6k_low(b, sl.e);
            w |= q << (4 * i + 16 * m);
          }
        }
        words[v] = w;
      }
      *reinterpret_cast<uint4*>(rec + 512 * u + 16 * lane) =
          make_uint4(words[0], words[1], words[2], words[3]);
    }
    if constexpr (D == DType::q6_k) {
      for (int half = 0; half < 2; ++half) {
        uint32_t words[4];
        for (int p = 0; p < 4; ++p) {
          uint32_t w = 0;
          for (int odd = 0; odd < 2; ++odd) {
            const int s = 8 * half + 2 * p + odd;
            for (int i = 0; i < 4; ++i) {
              for (int m = 0; m < 2; ++m) {
                const Slot sl = slot(lane, s, i, m);
                const uint8_t* b = block(sl.row);
                const uint32_t h = b ? q6k_high(b, sl.e) : 0u;
                w |= h << (16 * odd + 8 * m + 2 * i);
              }
            }
          }
          words[p] = w;
        }
        *reinterpret_cast<uint4*>(rec + 2048 + 512 * half + 16 * lane) =
            make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
    if (lane < 16) {
      const uint8_t* b = block(lane);
      if constexpr (D == DType::q4_k) {
        for (int i = 0; i < 16; ++i) rec[2048 + 16 * lane + i] = b ? b[i] : 0;
      } else {
        for (int i = 0; i < 16; ++i) rec[3072 + 16 * lane + i] = b ? b[192 + i] : 0;
        rec[3328 + 2 * lane] = b ? b[208] : 0;
        rec[3328 + 2 * lane + 1] = b ? b[209] : 0;
      }
    }
  }
}

int64_t tiled_record_bytes(DType wtype) {
  switch (wtype) {
    case DType::q4_k:
      return matmul_detail::Tiled<DType::q4_k>::kBytes;
    case DType::q6_k:
      return matmul_detail::Tiled<DType::q6_k>::kBytes;
    case DType::q8_0:
      return matmul_detail::Tiled<DType::q8_0>::kBytes;
    case DType::f16:
    case DType::bf16:
      return matmul_detail::TiledHalf::kBytes;
    default:
      return 0;
  }
}

}  // namespace

bool matmul_tiled_supports(DType wtype, int64_t n_in) {
  return tiled_record_bytes(wtype) > 0 && n_in > 0 && n_in % kChunk == 0;
}

size_t matmul_tiled_bytes(DType wtype, int64_t n_in, int64_t n_out) {
  if (!matmul_tiled_supports(wtype, n_in) || n_out <= 0) return 0;
  return static_cast<size_t>((n_out + 15) / 16 * (n_in / kChunk) * tiled_record_bytes(wtype));
}

void matmul_tile(DType wtype, const void* ggml, int64_t n_in, int64_t n_out, void* tiled,
                 cudaStream_t stream, int64_t n_matrices) {
  if (!matmul_tiled_supports(wtype, n_in))
    fail(ErrorCode::invalid_argument, "matmul_tile: no tiled layout for {} with {} inputs",
         dtype_name(wtype), n_in);
  if (n_out <= 0 || n_out > 65535 * 128)
    fail(ErrorCode::invalid_argument, "matmul_tile: n_out {}", n_out);
  if (n_matrices <= 0) fail(ErrorCode::invalid_argument, "matmul_tile: {} matrices", n_matrices);
  const int64_t n_chunks = n_in / kChunk;
  const int64_t records = (n_out + 15) / 16 * n_chunks;
  const int64_t row_bytes = n_in / dtype_traits(wtype).block_size * dtype_traits(wtype).type_size;
  const size_t tiled_bytes = matmul_tiled_bytes(wtype, n_in, n_out);
  const auto grid = static_cast<unsigned>(records);
  // The tiling kernel of wtype (matmul_tiled_supports: one of these five).
  const auto kernel = wtype == DType::q4_k   ? tile_kernel<DType::q4_k>
                      : wtype == DType::q6_k ? tile_kernel<DType::q6_k>
                      : wtype == DType::q8_0 ? tile_kernel<DType::q8_0>
                      : wtype == DType::f16  ? tile_half_kernel<DType::f16>
                                             : tile_half_kernel<DType::bf16>;
  for (int64_t m = 0; m < n_matrices; ++m) {
    const auto* src = static_cast<const uint8_t*>(ggml) + m * row_bytes * n_out;
    auto* dst = static_cast<uint8_t*>(tiled) + m * tiled_bytes;
    detail::launch(kernel, grid, 32, 0, stream, src, row_bytes, static_cast<int>(n_out),
                   static_cast<int>(n_chunks), dst);
  }
  // Complete before any product can run (kernels.h): one wait for the whole stack.
  detail::check_cuda(cudaStreamSynchronize(stream), "matmul_tile", "the tiling");
}

}  // namespace memra::kernels
