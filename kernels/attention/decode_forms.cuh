// Which instantiation of the decode kernel (attention_decode.cuh) serves a launch, and what its
// tensor form needs from the host: the one-split form's variants at head_dim 128 (a flag a bit),
// the prologue form's, the forms of the other shapes, the tensor maps of the caches, and whether
// the device runs the kernel's sm_90 code. Private to attention.cu (its one includer).
#pragma once

#include <cuda.h>

#include <utility>

#include "core/error.h"
#include "kernels/attention/attention_decode.cuh"
#include "kernels/tensor_map.h"

namespace memra::kernels::detail {

// The one-split form's variants at head_dim 128 (bits of `variant`, the kernel's flags of the same
// names): 1 kStamps (MEMRA_DECODE_STAMPS), 2 kBulk (MEMRA_DECODE_BULK), 4 kChains
// (MEMRA_DECODE_CHAINS), 8 kCluster (MEMRA_DECODE_CLUSTER_MERGE) and 16 kTransposed
// (MEMRA_DECODE_TRANSPOSED), these two with kBulk and kChains only (else ignored), and 32 kTensor
// (MEMRA_DECODE_TENSOR; with kTransposed only, else ignored), and 64 kAsync
// (MEMRA_DECODE_CLUSTER_MERGE=async; with kCluster and kTensor only, else ignored).
constexpr int kStampsVariant = 1, kBulkVariant = 2, kChainsVariant = 4, kClusterVariant = 8,
              kTransposedVariant = 16, kTensorVariant = 32, kAsyncVariant = 64;
constexpr int kVariants = 128;
template <typename CT, int kVariant>
auto one_split_variant() {
  constexpr bool kStamps = (kVariant & kStampsVariant) != 0;
  constexpr bool kBulk = (kVariant & kBulkVariant) != 0;
  constexpr bool kChains = (kVariant & kChainsVariant) != 0;
  constexpr bool kCluster = kBulk && kChains && (kVariant & kClusterVariant) != 0;
  constexpr bool kTransposed = kBulk && kChains && (kVariant & kTransposedVariant) != 0;
  constexpr bool kTensor = kTransposed && (kVariant & kTensorVariant) != 0;
  constexpr bool kAsync = kCluster && kTensor && (kVariant & kAsyncVariant) != 0;
  return decode_attention_kernel<128, CT, false, false, false, kStamps, kBulk, kChains, kCluster,
                                 kTransposed, kTensor, kAsync>;
}
// The one-split variant that runs the attention prologue in its blocks (kPrologue: the default
// form's flags, with or without stamps), and the flags it takes.
constexpr int kPrologueVariant = kBulkVariant | kChainsVariant | kClusterVariant |
                                 kTransposedVariant | kTensorVariant | kAsyncVariant;
template <typename CT>
auto prologue_variant(bool stamps) {
  return stamps ? decode_attention_kernel<128, CT, false, false, false, true, true, true, true,
                                          true, true, true, true>
                : decode_attention_kernel<128, CT, false, false, false, false, true, true, true,
                                          true, true, true, true>;
}
template <typename CT, int... kV>
auto one_split_variant_of(int variant, std::integer_sequence<int, kV...>) {
  using Kernel = decltype(one_split_variant<CT, 0>());
  static const Kernel kernels[] = {one_split_variant<CT, kV>()...};
  return kernels[variant];
}

// The decode kernel's tensor copies' maps of q's K and V caches (decode_tensor.cuh: 64 dims x the
// kv heads' half rows x the cache's slots, boxes of 64 x 1 x block_size, a 128-byte swizzle),
// where that form serves the launch: a head_dim 128 16-bit cache whose blocks (8 to 256 slots)
// the caller counted. false: not taken (the bulk copies serve it, the same bits).
inline bool encode_decode_maps(AttnParams& q) {
  if (q.n_blocks <= 0 || q.bs_shift < 3 || q.bs_shift > 8) return false;
  const cuuint64_t dims[3] = {64, static_cast<cuuint64_t>(q.n_kv_heads) * 2,
                              static_cast<cuuint64_t>(q.n_blocks) << q.bs_shift};
  const cuuint64_t strides[2] = {128, static_cast<cuuint64_t>(q.n_kv_heads) * 256};  // bytes
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(q.block_size)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const auto encode = [&](CUtensorMap& map, const void* cache) {
    const CUresult r = tensor_map_encoder()(
        &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(cache), dims, strides, box,
        element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
      fail(ErrorCode::internal,
           "attention: cuTensorMapEncodeTiled refused a cache of {} blocks of {} slots x {} kv "
           "heads at {} ({})",
           q.n_blocks, q.block_size, q.n_kv_heads, cache, static_cast<int>(r));
  };
  encode(q.k_map, q.k);
  encode(q.v_map, q.v);
  return true;
}

// Whether the runtime loads sm_90 (or later) code of `kernel` on this device: the bulk form's
// copies are Hopper instructions, and its sm_80 code traps. Checked once a process (one kind of
// device).
template <typename Kernel>
bool bulk_code_loaded(Kernel kernel) {
  static const bool loaded = [&] {
    cudaFuncAttributes attr{};
    const bool ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.binaryVersion >= 90;
    if (!ok) (void)cudaGetLastError();
    return ok;
  }();
  return loaded;
}

// The decode kernel's instantiation of form kShared for a launch: runs of splits a block (the
// two-blocks form only) and a split a chunk at a time (the forms with V in K's rows only), that
// with the transposed products (`transposed`, head_dim 128 only); `variant`: the one-split form at
// head_dim 128's (one_split_variant), 0 the plain form.
template <int D, typename CT, bool kShared>
auto decode_form_kernel(bool runs, bool pipe, bool transposed, int variant) {
  if constexpr (!kShared && D == 128)
    if (variant != 0)
      return one_split_variant_of<CT>(variant, std::make_integer_sequence<int, kVariants>{});
  if constexpr (!DecodeConfig<D, CT, kShared>::kSeparateV) {
    // (At head_dim 128 only the two-blocks form has V in K's rows.)
    if constexpr (D == 128 && kShared)
      if (pipe && transposed)
        return runs ? decode_attention_kernel<D, CT, true, true, true, false, false, false, false,
                                              true>
                    : decode_attention_kernel<D, CT, true, false, true, false, false, false, false,
                                              true>;
    if constexpr (kShared)
      if (runs)
        return pipe ? decode_attention_kernel<D, CT, kShared, true, true>
                    : decode_attention_kernel<D, CT, kShared, true, false>;
    if (pipe) return decode_attention_kernel<D, CT, kShared, false, true>;
  }
  return decode_attention_kernel<D, CT, kShared, false, false>;
}

}  // namespace memra::kernels::detail
