// The causal depthwise conv of the gated delta-net layers (then SiLU), with its per-sequence state.
// Two launches: every (token, channel) output at once (its window is x's earlier tokens of the
// same sequence, or the slot's state before them, so no output waits for another), then the state
// update, which must not start before every output has read the old state.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace memra::kernels {

namespace {

constexpr int kConvThreads = 256;

// One thread per (token blockIdx.x, channel). The taps are added in the CPU reference's order:
// the current input's first, then the window's oldest to newest.
__global__ void __launch_bounds__(kConvThreads)
    ssm_conv_kernel(const int32_t* positions, const int32_t* token_seq, const int32_t* seq_begin,
                    const int32_t* state_slots, const float* state, const float* x, int64_t dim,
                    int kernel, const float* w, float* y) {
  detail::wait_for_inputs();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kConvThreads + threadIdx.x;
  if (c >= dim) return;
  const int64_t t = blockIdx.x;
  const int32_t s = token_seq[t];
  const int64_t begin = seq_begin[s], i = t - begin;
  const int h = kernel - 1;  // inputs kept in the state
  const bool fresh = positions[begin] == 0;
  const float* st = state + static_cast<int64_t>(state_slots[s]) * h * dim;
  const float* wc = w + c * kernel;
  float acc = __fmul_rn(wc[h], x[t * dim + c]);
  for (int j = 0; j < h; ++j) {
    const int64_t idx = i - h + j;  // relative to the sequence's first token of the step
    const float v = idx >= 0 ? x[(begin + idx) * dim + c] : fresh ? 0.0f : st[(h + idx) * dim + c];
    acc = __fmaf_rn(wc[j], v, acc);
  }
  y[t * dim + c] = acc / (1.0f + expf(-acc));
}

// One thread per (sequence blockIdx.x, channel): the state's entry k becomes the input k - h
// places before the sequence's end, from x or, for a sequence shorter than h, from the old state
// (entry n + k > k: read before anything at or past it is written, so in place is safe).
__global__ void __launch_bounds__(kConvThreads)
    ssm_conv_state_kernel(const int32_t* positions, const int32_t* seq_begin,
                          const int32_t* state_slots, float* state, const float* x, int64_t dim,
                          int h) {
  detail::wait_for_inputs();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kConvThreads + threadIdx.x;
  if (c >= dim) return;
  const int64_t s = blockIdx.x;
  const int64_t begin = seq_begin[s], n = seq_begin[s + 1] - begin;
  const bool fresh = positions[begin] == 0;
  float* st = state + static_cast<int64_t>(state_slots[s]) * h * dim;
  for (int k = 0; k < h; ++k) {
    const int64_t idx = n - h + k;
    st[k * dim + c] = idx >= 0 ? x[(begin + idx) * dim + c] : fresh ? 0.0f : st[(n + k) * dim + c];
  }
}

}  // namespace

void ssm_conv(const StepDev& step, float* conv_state, const float* x, int64_t dim, int kernel,
              const float* w, float* y, cudaStream_t stream) {
  if (dim <= 0 || kernel < 1)
    fail(ErrorCode::invalid_argument, "ssm_conv: {} channels, kernel {}", dim, kernel);
  if (step.n_tokens == 0) return;
  if (step.n_seqs <= 0 || !step.seq_begin || !step.state_slots)
    fail(ErrorCode::invalid_argument, "ssm_conv: the step has no sequence table");
  const int64_t channel_blocks = (dim + kConvThreads - 1) / kConvThreads;
  if (channel_blocks > 65535)
    fail(ErrorCode::invalid_argument, "ssm_conv: {} channels exceed one launch", dim);
  detail::launch(ssm_conv_kernel,
                 dim3(static_cast<unsigned>(step.n_tokens), static_cast<unsigned>(channel_blocks)),
                 kConvThreads, 0, stream, step.positions, step.token_seq, step.seq_begin,
                 step.state_slots, conv_state, x, dim, kernel, w, y);
  if (kernel == 1) return;  // no state
  detail::launch(ssm_conv_state_kernel,
                 dim3(static_cast<unsigned>(step.n_seqs), static_cast<unsigned>(channel_blocks)),
                 kConvThreads, 0, stream, step.positions, step.seq_begin, step.state_slots,
                 conv_state, x, dim, kernel - 1);
}

}  // namespace memra::kernels
