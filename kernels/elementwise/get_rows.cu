// get_rows: embedding lookup that dequantizes one table row per id (F32, F16, BF16, the legacy
// 32-element blocks and Q4_K/Q5_K/Q6_K). One thread per output element; each value is computed
// with the CPU dequantizer's exact float steps (src/formats/quant_legacy.cpp, quant_k.cpp), every
// multiply and add separately rounded (__fmul_rn etc., never fused), so results are bit-identical.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

using detail::f16_bits_to_f32;
using detail::load_u16;

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return f16_bits_to_f32(load_u16(p));
}

// Element j < 16 is the low nibble of qs[j], element j + 16 the high nibble.
__device__ __forceinline__ int nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}

// Bit j of the little-endian 32-bit qh field (read bytewise: the field is not 4-byte aligned).
__device__ __forceinline__ int high_bit(const uint8_t* qh, int j) {
  return (qh[j / 8] >> (j % 8)) & 1;
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Element e of the block at b, for each supported dtype.
template <DType kType>
__device__ __forceinline__ float dequant(const uint8_t* b, int e) {
  if constexpr (kType == DType::f32) {
    return reinterpret_cast<const float*>(b)[0];
  } else if constexpr (kType == DType::f16) {
    return f16_at(b);
  } else if constexpr (kType == DType::bf16) {
    return detail::bf16_bits_to_f32(load_u16(b));
  } else if constexpr (kType == DType::q4_0) {
    return __fmul_rn(f16_at(b), static_cast<float>(nibble(b + 2, e) - 8));
  } else if constexpr (kType == DType::q4_1) {
    return __fadd_rn(__fmul_rn(f16_at(b), static_cast<float>(nibble(b + 4, e))), f16_at(b + 2));
  } else if constexpr (kType == DType::q5_0) {
    const int q = nibble(b + 6, e) | (high_bit(b + 2, e) << 4);
    return __fmul_rn(f16_at(b), static_cast<float>(q - 16));
  } else if constexpr (kType == DType::q5_1) {
    const int q = nibble(b + 8, e) | (high_bit(b + 4, e) << 4);
    return __fadd_rn(__fmul_rn(f16_at(b), static_cast<float>(q)), f16_at(b + 2));
  } else if constexpr (kType == DType::q8_0) {
    return __fmul_rn(static_cast<float>(static_cast<int8_t>(b[2 + e])), f16_at(b));
  } else if constexpr (kType == DType::q4_k || kType == DType::q5_k) {
    const int j = e / 32, l = e % 32;  // sub-block of 32, bytes 32 * (j / 2), nibble j % 2
    int sc, m;
    scale_min_k4(j, b + 4, sc, m);
    const float dl = __fmul_rn(f16_at(b), static_cast<float>(sc));
    const float ml = __fmul_rn(f16_at(b + 2), static_cast<float>(m));
    const uint8_t* qs = b + (kType == DType::q4_k ? 16 : 48);
    int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f;
    if constexpr (kType == DType::q5_k) q |= ((b[16 + l] >> j) & 1) << 4;  // qh at byte 16
    return __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
  } else {
    static_assert(kType == DType::q6_k);
    // e = 128 h + 32 s + idx: nibble s / 2 of ql[64 h + 32 (s % 2) + idx], bits 2s..2s+1 of
    // qh[32 h + idx] (qh at byte 128); scale index 8 h + 2 s + idx / 16 (int8 at byte 192).
    const int h = e / 128, s = (e % 128) / 32, idx = e % 32;
    const int lo = (b[64 * h + 32 * (s % 2) + idx] >> (4 * (s / 2))) & 0x0f;
    const int hi = (b[128 + 32 * h + idx] >> (2 * s)) & 0x03;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + 2 * s + idx / 16]);
    const float dl = __fmul_rn(f16_at(b + 208), static_cast<float>(sc));
    return __fmul_rn(dl, static_cast<float>((lo | (hi << 4)) - 32));
  }
}

template <DType kType, int kBlock, int kBytes>
__global__ void get_rows_kernel(const uint8_t* table, int64_t n_cols, int64_t row_bytes,
                                const int32_t* ids, int64_t n_ids, float scale, float* out) {
  detail::wait_for_inputs();
  const int64_t n = n_ids * n_cols;
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const int64_t r = i / n_cols, c = i % n_cols;
    const uint8_t* block =
        table + static_cast<int64_t>(ids[r]) * row_bytes + (c / kBlock) * int64_t{kBytes};
    out[i] = __fmul_rn(dequant<kType>(block, static_cast<int>(c % kBlock)), scale);
  }
}

template <DType kType, int kBlock, int kBytes>
void launch(const void* table, int64_t n_cols, const int32_t* ids, int64_t n_ids, float scale,
            float* out, cudaStream_t stream) {
  if (n_cols % kBlock != 0)
    fail(ErrorCode::invalid_argument, "get_rows: {} columns are not a multiple of {}'s block of {}",
         n_cols, dtype_name(kType), kBlock);
  const int64_t row_bytes = n_cols / kBlock * kBytes;
  detail::launch(get_rows_kernel<kType, kBlock, kBytes>, detail::grid_for(n_ids * n_cols),
                 detail::kThreads, 0, stream, static_cast<const uint8_t*>(table), n_cols, row_bytes,
                 ids, n_ids, scale, out);
}

}  // namespace

void get_rows(DType dtype, const void* table, int64_t n_cols, const int32_t* ids, int64_t n_ids,
              float scale, float* out, cudaStream_t stream) {
  detail::require_non_negative("get_rows", n_ids, "id count");
  detail::require_non_negative("get_rows", n_cols, "row length");
  if (n_ids == 0 || n_cols == 0) return;
  switch (dtype) {
    case DType::f32:
      return launch<DType::f32, 1, 4>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::f16:
      return launch<DType::f16, 1, 2>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::bf16:
      return launch<DType::bf16, 1, 2>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q4_0:
      return launch<DType::q4_0, 32, 18>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q4_1:
      return launch<DType::q4_1, 32, 20>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q5_0:
      return launch<DType::q5_0, 32, 22>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q5_1:
      return launch<DType::q5_1, 32, 24>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q8_0:
      return launch<DType::q8_0, 32, 34>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q4_k:
      return launch<DType::q4_k, 256, 144>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q5_k:
      return launch<DType::q5_k, 256, 176>(table, n_cols, ids, n_ids, scale, out, stream);
    case DType::q6_k:
      return launch<DType::q6_k, 256, 210>(table, n_cols, ids, n_ids, scale, out, stream);
    default:
      fail(ErrorCode::unsupported, "get_rows: table type {} is not supported on CUDA",
           dtype_name(dtype));
  }
}

}  // namespace memra::kernels
