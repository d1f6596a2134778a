// kv_store: copies this step's k/v rows into their paged-cache slots, converting to the cache
// dtype (f32 as is, f16, bf16 and fp8 e4m3 round-to-nearest-even, e4m3 saturated: see
// cache_convert.cuh). Slot s of the cache is row s of
// [n_blocks * block_size][n_kv_heads * head_dim]; a negative slot (a padding token) is skipped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/attention/cache_convert.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

template <typename T>
__global__ void kv_store_kernel(T* k_cache, T* v_cache, const int32_t* slots, int32_t n_tokens,
                                int64_t row, const float* k, const float* v, int64_t ld) {
  detail::wait_for_inputs();
  const int64_t n = int64_t{n_tokens} * row;
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const int64_t t = i / row, c = i % row;
    const int32_t slot = slots[t];
    if (slot < 0) continue;
    const int64_t dst = int64_t{slot} * row + c;
    k_cache[dst] = detail::to_cache<T>(k[t * ld + c]);
    v_cache[dst] = detail::to_cache<T>(v[t * ld + c]);
  }
}

}  // namespace

void kv_store(const PagedKv& kv, const StepDev& step, const float* k, const float* v, int64_t ld,
              cudaStream_t stream) {
  if (kv.n_kv_heads <= 0 || kv.head_dim <= 0)
    fail(ErrorCode::invalid_argument, "kv_store: {} kv heads of {} dims", kv.n_kv_heads,
         kv.head_dim);
  const int64_t row = int64_t{kv.n_kv_heads} * kv.head_dim;
  if (ld < row)
    fail(ErrorCode::invalid_argument, "kv_store: row stride {} < {} kv heads x {} dims", ld,
         kv.n_kv_heads, kv.head_dim);
  detail::require_non_negative("kv_store", step.n_tokens, "token count");
  if (step.n_tokens == 0) return;
  const unsigned blocks = detail::grid_for(int64_t{step.n_tokens} * row);
  if (kv.dtype == DType::f32) {
    detail::launch(kv_store_kernel<float>, blocks, detail::kThreads, 0, stream,
                   static_cast<float*>(kv.k), static_cast<float*>(kv.v), step.slots, step.n_tokens,
                   row, k, v, ld);
  } else if (kv.dtype == DType::bf16) {
    detail::launch(kv_store_kernel<__nv_bfloat16>, blocks, detail::kThreads, 0, stream,
                   static_cast<__nv_bfloat16*>(kv.k), static_cast<__nv_bfloat16*>(kv.v), step.slots,
                   step.n_tokens, row, k, v, ld);
  } else if (kv.dtype == DType::f16) {
    detail::launch(kv_store_kernel<__half>, blocks, detail::kThreads, 0, stream,
                   static_cast<__half*>(kv.k), static_cast<__half*>(kv.v), step.slots,
                   step.n_tokens, row, k, v, ld);
  } else if (kv.dtype == DType::f8_e4m3) {
    detail::launch(kv_store_kernel<__nv_fp8_e4m3>, blocks, detail::kThreads, 0, stream,
                   static_cast<__nv_fp8_e4m3*>(kv.k), static_cast<__nv_fp8_e4m3*>(kv.v), step.slots,
                   step.n_tokens, row, k, v, ld);
  } else {
    fail(ErrorCode::unsupported,
         "kv_store: KV cache type {} is not supported (F32, F16, BF16, F8_E4M3)",
         dtype_name(kv.dtype));
  }
}

}  // namespace memra::kernels
