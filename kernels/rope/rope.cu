// Rotary position embedding, in place, neox (i, i + n_rot/2) or normal (2i, 2i + 1) pairs. One
// block per token: its cos/sin table is computed once in double (angle = position * inv_freq[i],
// as the CPU reference does, then rounded to float) and shared by all heads of the token.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/rope/rope_table.cuh"

namespace memra::kernels {

namespace {

constexpr int kRopeThreads = 128;

// Dynamic shared memory: cos[n_rot / 2] then sin[n_rot / 2].
__global__ void __launch_bounds__(kRopeThreads)
    rope_kernel(float* x, int64_t ld, int n_heads, int head_dim, int n_rot, bool neox,
                const int32_t* positions, const double* inv_freq) {
  detail::wait_for_inputs();
  extern __shared__ float table[];
  const int half = n_rot / 2;
  float* cos_t = table;
  float* sin_t = table + half;
  const int64_t t = blockIdx.x;
  detail::rope_table(cos_t, sin_t, half, positions[t], inv_freq, threadIdx.x, kRopeThreads);
  __syncthreads();
  float* row = x + t * ld;
  const int n = n_heads * half;
  for (int k = threadIdx.x; k < n; k += kRopeThreads) {
    const int h = k / half, i = k % half;
    float* v = row + static_cast<int64_t>(h) * head_dim;
    const int2 d = detail::rope_pair(i, half, neox);
    const float2 r = detail::rope_rotate(v[d.x], v[d.y], cos_t[i], sin_t[i]);
    v[d.x] = r.x;
    v[d.y] = r.y;
  }
}

}  // namespace

void rope(float* x, int64_t n_tokens, int64_t ld, int n_heads, int head_dim, int n_rot, bool neox,
          const int32_t* positions, const double* inv_freq, cudaStream_t stream) {
  detail::require_non_negative("rope", n_tokens, "token count");
  if (n_heads <= 0 || head_dim <= 0)
    fail(ErrorCode::invalid_argument, "rope: {} heads of {} dims", n_heads, head_dim);
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    fail(ErrorCode::invalid_argument, "rope: n_rot {} must be even and in 2..head_dim ({})", n_rot,
         head_dim);
  if (ld < int64_t{n_heads} * head_dim)
    fail(ErrorCode::invalid_argument, "rope: row stride {} < {} heads x {} dims", ld, n_heads,
         head_dim);
  if (n_tokens > 0x7fffffff)
    fail(ErrorCode::invalid_argument, "rope: {} tokens exceed one launch", n_tokens);
  if (n_tokens == 0) return;
  const size_t smem = sizeof(float) * static_cast<size_t>(n_rot);
  detail::launch(rope_kernel, static_cast<unsigned>(n_tokens), kRopeThreads, smem, stream, x, ld,
                 n_heads, head_dim, n_rot, neox, positions, inv_freq);
}

}  // namespace memra::kernels
