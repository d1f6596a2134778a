// kv_store into f32, f16 and bf16 paged caches: every written slot must hold the row exactly (bf16
// rounded to nearest even, as core/half.h's f32_to_bf16), every other slot must keep its poison
// bytes, and a token with slot -1 writes nothing. --teeth stores token 0 one slot too far.
#include <algorithm>
#include <cstring>

#include "check.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

template <typename T>
void check_one(Context& ctx, DType dtype, int n_kv_heads, int head_dim, int n_tokens) {
  const int32_t block_size = 16, n_blocks = (n_tokens + block_size - 1) / block_size + 3;
  const int64_t row = int64_t{n_kv_heads} * head_dim, ld = row + 12;
  const int64_t n_slots = int64_t{n_blocks} * block_size;
  const std::vector<int32_t> slots = ctx.padded_slots(n_slots, n_tokens);
  std::vector<int32_t> gpu_slots = slots;
  if (ctx.teeth()) gpu_slots[0] = static_cast<int32_t>((gpu_slots[0] + 1) % n_slots);
  std::vector<float> k = ctx.uniform(n_tokens * ld), v = ctx.uniform(n_tokens * ld);
  Dev<float> dk(ctx, k), dv(ctx, v);
  Dev<int32_t> dslots(ctx, gpu_slots);
  Dev<T> kc(n_slots * row), vc(n_slots * row);
  kc.poison(ctx);
  vc.poison(ctx);
  const kernels::PagedKv kv{kc.get(), vc.get(), dtype, block_size, n_kv_heads, head_dim};
  kernels::StepDev step;
  step.n_tokens = n_tokens;
  step.slots = dslots.get();
  kernels::kv_store(kv, step, dk.get(), dv.get(), ld, ctx.stream());
  ctx.sync();
  // Expected cache images: poison everywhere, the converted rows at their slots.
  T poison;
  std::memset(&poison, 0xFF, sizeof(T));
  std::vector<T> want_k(n_slots * row, poison), want_v(n_slots * row, poison);
  for (int t = 0; t < n_tokens; ++t) {
    if (slots[t] < 0) continue;
    for (int64_t c = 0; c < row; ++c) {
      const int64_t dst = int64_t{slots[t]} * row + c;
      if constexpr (sizeof(T) == 4) {
        want_k[dst] = k[t * ld + c], want_v[dst] = v[t * ld + c];
      } else if (dtype == DType::f16) {
        want_k[dst] = f32_to_f16(k[t * ld + c]), want_v[dst] = f32_to_f16(v[t * ld + c]);
      } else {
        want_k[dst] = f32_to_bf16(k[t * ld + c]), want_v[dst] = f32_to_bf16(v[t * ld + c]);
      }
    }
  }
  const std::vector<T> got_k = kc.download(ctx), got_v = vc.download(ctx);
  double mismatches = 0;
  for (size_t i = 0; i < want_k.size(); ++i) {
    mismatches += std::memcmp(&want_k[i], &got_k[i], sizeof(T)) != 0;
    mismatches += std::memcmp(&want_v[i], &got_v[i], sizeof(T)) != 0;
  }
  ctx.add({"kv_store", shape_str({n_tokens, n_kv_heads, head_dim}), std::string(dtype_name(dtype)),
           "bits", mismatches, 0.0, ctx.teeth() ? "token 0 stored one slot too far" : ""});
}

}  // namespace

void check_kv_store(Context& ctx) {
  if (!ctx.wants("kv_store")) return;
  check_one<float>(ctx, DType::f32, 1, 64, 2);
  check_one<float>(ctx, DType::f32, 8, 128, 77);
  check_one<uint16_t>(ctx, DType::bf16, 2, 256, 3);
  check_one<uint16_t>(ctx, DType::bf16, 8, 128, 301);
  check_one<uint16_t>(ctx, DType::f16, 8, 128, 33);
}

}  // namespace memra::kernel_check
