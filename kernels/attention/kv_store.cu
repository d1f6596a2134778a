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
  detail::with_cache_type(kv.dtype, "kv_store", [&](auto tag) {
    using CT = decltype(tag);
    detail::launch(kv_store_kernel<CT>, blocks, detail::kThreads, 0, stream, static_cast<CT*>(kv.k),
                   static_cast<CT*>(kv.v), step.slots, step.n_tokens, row, k, v, ld);
  });
}

}  // namespace memra::kernels
