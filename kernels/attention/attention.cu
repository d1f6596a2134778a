// Paged causal GQA attention: the host launch (one dispatch point from runtime head_dim and
// cache dtype to the template kernel in attention_split.cuh, plan choice, scratch sizing) and the
// combine kernel that merges split partials in increasing split order.
#include "kernels/attention/attention_split.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace memra::kernels {

namespace {

using detail::AttnParams;
using detail::kSplit;

// The split plan's partials are capped at this many (token, head, split) rows: ~68 MB of scratch
// at head_dim 128. Steps above it run one_pass, which needs no scratch and has enough tokens to
// fill the GPU anyway.
constexpr int64_t kMaxPartialRows = int64_t{1} << 17;

int64_t n_splits_of(const StepDev& step) {
  return (int64_t{step.max_context} + kSplit - 1) / kSplit;
}

int64_t partial_rows(const StepDev& step, int n_heads) {
  return int64_t{step.n_tokens} * n_heads * n_splits_of(step);
}

// One thread per dim of one (token, head): M and L are recomputed by every thread in the same
// order, so all threads agree. A position past the step's max_context (a caller bug) yields NaN
// rather than an out-of-bounds read.
__global__ void attention_combine_kernel(const float* partials, const int32_t* positions,
                                         int32_t window, int n_heads, int n_splits, int d_head,
                                         float* out) {
  const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const detail::KeyRange range = detail::key_range(positions[t], window);
  float* o = out + (int64_t{t} * n_heads + h) * d_head + d;
  if (range.last >= n_splits) {
    *o = __int_as_float(0x7fffffff);
    return;
  }
  const int64_t stride = d_head + 2;
  const float* part = partials + (int64_t{t} * n_heads + h) * n_splits * stride;
  const float* first = part + range.first * stride;
  float M = first[d_head], L = first[d_head + 1], O = first[d];
  for (int s = range.first + 1; s <= range.last; ++s) {
    const float* ps = part + s * stride;
    float a, b;
    detail::merge_weights(M, L, ps[d_head], ps[d_head + 1], a, b);
    O = detail::merge_value(O, ps[d], a, b);
  }
  *o = __fdiv_rn(O, L);
}

template <int D, typename CT>
void launch(const AttnParams& p, int n_tokens, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_tokens),
                  p.one_pass ? 1u : static_cast<unsigned>(p.n_splits),
                  static_cast<unsigned>(p.n_kv_heads * p.n_chunks));
  detail::attention_kernel<D, CT><<<grid, detail::kAttnThreads, 0, stream>>>(p);
  if (!p.one_pass) {
    attention_combine_kernel<<<
        dim3(static_cast<unsigned>(n_tokens), static_cast<unsigned>(p.n_heads)), D, 0, stream>>>(
        p.partials, p.positions, p.window, p.n_heads, p.n_splits, D, p.out);
  }
}

template <typename CT>
void dispatch_head_dim(const AttnParams& p, int head_dim, int n_tokens, cudaStream_t stream) {
  switch (head_dim) {
    case 32:  // tiny test models (the gate fixtures)
      return launch<32, CT>(p, n_tokens, stream);
    case 64:
      return launch<64, CT>(p, n_tokens, stream);
    case 128:
      return launch<128, CT>(p, n_tokens, stream);
    case 256:
      return launch<256, CT>(p, n_tokens, stream);
    default:
      fail(ErrorCode::unsupported,
           "attention: head_dim {} is not supported on CUDA (32, 64, 128, 256)", head_dim);
  }
}

}  // namespace

size_t attention_scratch_bytes(const StepDev& step, int n_heads, int head_dim) {
  const int64_t rows = partial_rows(step, n_heads);
  if (rows <= 0 || rows > kMaxPartialRows) return 0;
  return static_cast<size_t>(rows) * static_cast<size_t>(head_dim + 2) * sizeof(float);
}

size_t attention_scratch_bytes_max(int head_dim) {
  return static_cast<size_t>(kMaxPartialRows) * static_cast<size_t>(head_dim + 2) * sizeof(float);
}

void attention(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
               const AttentionArgs& args, float* out, void* scratch, cudaStream_t stream) {
  if (step.n_tokens < 0 || step.n_seqs < 0)
    fail(ErrorCode::invalid_argument, "attention: {} tokens, {} sequences", step.n_tokens,
         step.n_seqs);
  if (step.n_tokens == 0) return;
  if (kv.n_kv_heads <= 0 || args.n_heads <= 0 || args.n_heads % kv.n_kv_heads != 0)
    fail(ErrorCode::invalid_argument,
         "attention: {} query heads are not a positive multiple of {} kv heads", args.n_heads,
         kv.n_kv_heads);
  if (kv.block_size <= 0 || step.max_blocks <= 0 || step.max_context <= 0)
    fail(ErrorCode::invalid_argument,
         "attention: block size {}, {} blocks per table, max context {} must be positive",
         kv.block_size, step.max_blocks, step.max_context);
  if (ldq < int64_t{args.n_heads} * kv.head_dim)
    fail(ErrorCode::invalid_argument, "attention: q row stride {} < {} heads x {} dims", ldq,
         args.n_heads, kv.head_dim);
  const int group = args.n_heads / kv.n_kv_heads;
  AttnParams p{};
  p.k = kv.k;
  p.v = kv.v;
  p.block_size = kv.block_size;
  p.n_kv_heads = kv.n_kv_heads;
  p.positions = step.positions;
  p.token_seq = step.token_seq;
  p.block_tables = step.block_tables;
  p.max_blocks = step.max_blocks;
  p.q = q;
  p.ldq = ldq;
  p.n_heads = args.n_heads;
  p.group = group;
  p.n_chunks = (group + detail::kMaxGroup - 1) / detail::kMaxGroup;
  p.scale = args.scale;
  p.softcap = args.softcap;
  p.window = args.window;
  p.out = out;
  p.partials = static_cast<float*>(scratch);
  p.n_splits = static_cast<int32_t>(n_splits_of(step));
  const bool fits = partial_rows(step, args.n_heads) <= kMaxPartialRows;
  switch (args.plan) {
    case AttentionPlan::automatic:
      p.one_pass = !(fits && p.n_splits > 1);
      break;
    case AttentionPlan::split:
      p.one_pass = false;
      break;
    case AttentionPlan::one_pass:
      p.one_pass = true;
      break;
  }
  if (!p.one_pass && (!fits || scratch == nullptr))
    fail(ErrorCode::invalid_argument,
         "attention: the split plan needs attention_scratch_bytes() of scratch ({} partial rows, "
         "cap {})",
         partial_rows(step, args.n_heads), kMaxPartialRows);
  if (int64_t{kv.n_kv_heads} * p.n_chunks > 65535 || p.n_splits > 65535 || args.n_heads > 65535)
    fail(ErrorCode::invalid_argument, "attention: {} kv heads or {} splits exceed the grid",
         kv.n_kv_heads, p.n_splits);
  if (kv.dtype == DType::f32) {
    dispatch_head_dim<float>(p, kv.head_dim, step.n_tokens, stream);
  } else if (kv.dtype == DType::bf16) {
    dispatch_head_dim<__nv_bfloat16>(p, kv.head_dim, step.n_tokens, stream);
  } else if (kv.dtype == DType::f16) {
    dispatch_head_dim<__half>(p, kv.head_dim, step.n_tokens, stream);
  } else {
    fail(ErrorCode::unsupported, "attention: KV cache type {} is not supported (F32, F16, BF16)",
         dtype_name(kv.dtype));
  }
}

}  // namespace memra::kernels
