// kv_store into f32, f16, bf16 and fp8 e4m3 paged caches: every written slot must hold the row
// exactly (bf16 rounded to nearest even, as core/half.h's f32_to_bf16; e4m3 rounded to nearest
// even and saturated, as core/fp8.h's f32_to_e4m3, over values from below its smallest subnormal
// to past its largest finite value, +-Inf and the 464 tie included), every other slot must keep
// its poison bytes, and a token with slot -1 writes nothing. --teeth stores token 0 one slot too
// far.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "check.h"
#include "core/fp8.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

// Values u x 2^e, e in [-14, 11], and a few edges: what an e4m3 cache rounds, flushes and
// saturates.
void widen(Context& ctx, std::vector<float>& x) {
  for (float& v : x) v = std::ldexp(v, ctx.randint(-14, 11));
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {inf, -inf, 464.0f, -464.0f, 448.0f, 1e-30f, -0.0009765625f, 15.5f};
  for (size_t i = 0; i < std::size(edges) && 3 * i < x.size(); ++i) x[3 * i] = edges[i];
}

template <typename T>
void check_one(Context& ctx, DType dtype, int n_kv_heads, int head_dim, int n_tokens,
               bool wide = false) {
  const int32_t block_size = 16, n_blocks = (n_tokens + block_size - 1) / block_size + 3;
  const int64_t row = int64_t{n_kv_heads} * head_dim, ld = row + 12;
  const int64_t n_slots = int64_t{n_blocks} * block_size;
  const std::vector<int32_t> slots = ctx.padded_slots(n_slots, n_tokens);
  std::vector<int32_t> gpu_slots = slots;
  if (ctx.teeth()) gpu_slots[0] = static_cast<int32_t>((gpu_slots[0] + 1) % n_slots);
  std::vector<float> k = ctx.uniform(n_tokens * ld), v = ctx.uniform(n_tokens * ld);
  if (wide) {
    widen(ctx, k);
    widen(ctx, v);
  }
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
      } else if constexpr (sizeof(T) == 1) {
        want_k[dst] = f32_to_e4m3(k[t * ld + c]), want_v[dst] = f32_to_e4m3(v[t * ld + c]);
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
  ctx.add({"kv_store", shape_str({n_tokens, n_kv_heads, head_dim}) + (wide ? " wide" : ""),
           std::string(dtype_name(dtype)), "bits", mismatches, 0.0,
           ctx.teeth() ? "token 0 stored one slot too far" : ""});
}

}  // namespace

void check_kv_store(Context& ctx) {
  if (!ctx.wants("kv_store")) return;
  check_one<float>(ctx, DType::f32, 1, 64, 2);
  check_one<float>(ctx, DType::f32, 8, 128, 77);
  check_one<uint16_t>(ctx, DType::bf16, 2, 256, 3);
  check_one<uint16_t>(ctx, DType::bf16, 8, 128, 301);
  check_one<uint16_t>(ctx, DType::f16, 8, 128, 33);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 8, 128, 33);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 2, 256, 77, /*wide=*/true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 4, 16, 5, /*wide=*/true);
}

}  // namespace memra::kernel_check
