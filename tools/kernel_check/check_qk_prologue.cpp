// The fused attention prologue (qk_prologue) against the five (six) kernels it replaces, run on
// copies of the same inputs: [rms_norm(v),] rms_norm(q), rms_norm(k), rope(q), rope(k),
// kv_store(k, v). q, k, v and both cache images must match bit for bit (the fused kernel claims the
// plain kernels' arithmetic; the plain kernels are checked against double references in their own
// families). Slots are distinct and random, the last token is padding (slot -1, nothing stored,
// its v still normed). --teeth drops the v norm (Gemma 4's cases, which norm v), or swaps the q and
// k norm weights (other cases with norms) or the pair layout (cases without).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

template <typename T>
double cache_mismatches(const std::vector<T>& a, const std::vector<T>& b) {
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

template <typename T>
void check_one(Context& ctx, DType dtype, int n_tokens, int n_heads, int n_kv_heads, int head_dim,
               int n_rot, bool neox, bool norms, bool v_norm = false) {
  const int32_t block_size = 16, n_blocks = (n_tokens + block_size - 1) / block_size + 2;
  const int64_t q_row = int64_t{n_heads} * head_dim, kv_row = int64_t{n_kv_heads} * head_dim;
  const int64_t n_slots = int64_t{n_blocks} * block_size;
  const std::vector<int32_t> slots = ctx.padded_slots(n_slots, n_tokens);
  std::vector<int32_t> pos(n_tokens);
  for (int32_t& p : pos) p = ctx.randint(0, 40000);
  std::vector<double> inv_freq(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) inv_freq[i] = std::pow(1000000.0, -2.0 * i / n_rot);
  // Activations of a few units, as q/k projections are; norm weights around 1.
  const std::vector<float> q = ctx.uniform(n_tokens * q_row, -4.0f, 4.0f);
  const std::vector<float> k = ctx.uniform(n_tokens * kv_row, -4.0f, 4.0f);
  const std::vector<float> v = ctx.uniform(n_tokens * kv_row, -4.0f, 4.0f);
  const std::vector<float> qw = ctx.uniform(head_dim, 0.5f, 1.5f);
  const std::vector<float> kw = ctx.uniform(head_dim, 0.5f, 1.5f);
  const std::vector<float> vw = ctx.uniform(head_dim, 0.5f, 1.5f);
  Dev<int32_t> dslots(ctx, slots), dpos(ctx, pos);
  Dev<double> dfreq(ctx, inv_freq);
  Dev<float> dqw(ctx, qw), dkw(ctx, kw), dvw(ctx, vw);
  constexpr float kEps = 1e-6f;

  kernels::StepDev step;
  step.n_tokens = n_tokens;
  step.positions = dpos.get();
  step.slots = dslots.get();
  auto paged = [&](Dev<T>& kc, Dev<T>& vc) {
    return kernels::PagedKv{kc.get(), vc.get(), dtype, block_size, n_kv_heads, head_dim};
  };

  // The plain kernels.
  Dev<float> pq(ctx, q), pk(ctx, k), pv(ctx, v);
  Dev<T> pkc(n_slots * kv_row), pvc(n_slots * kv_row);
  pkc.poison(ctx);
  pvc.poison(ctx);
  if (v_norm)
    kernels::rms_norm(pv.get(), dvw.get(), n_tokens * int64_t{n_kv_heads}, head_dim, kEps, pv.get(),
                      ctx.stream());
  if (norms) {
    kernels::rms_norm(pq.get(), dqw.get(), n_tokens * int64_t{n_heads}, head_dim, kEps, pq.get(),
                      ctx.stream());
    kernels::rms_norm(pk.get(), dkw.get(), n_tokens * int64_t{n_kv_heads}, head_dim, kEps, pk.get(),
                      ctx.stream());
  }
  kernels::rope(pq.get(), n_tokens, q_row, n_heads, head_dim, n_rot, neox, dpos.get(), dfreq.get(),
                ctx.stream());
  kernels::rope(pk.get(), n_tokens, kv_row, n_kv_heads, head_dim, n_rot, neox, dpos.get(),
                dfreq.get(), ctx.stream());
  kernels::kv_store(paged(pkc, pvc), step, pk.get(), pv.get(), kv_row, ctx.stream());

  // The fused kernel, computing its angles and reading them from the step's angle table
  // (kernels::qk_angle_table, as the CUDA backend runs it).
  const bool drop_v = ctx.teeth() && v_norm;
  const bool swap = ctx.teeth() && norms && !v_norm;
  const float* q_norm = norms ? (swap ? dkw.get() : dqw.get()) : nullptr;
  const float* k_norm = norms ? (swap ? dqw.get() : dkw.get()) : nullptr;
  const bool fused_neox = ctx.teeth() && !norms ? !neox : neox;
  const float* fused_v_norm = v_norm && !drop_v ? dvw.get() : nullptr;
  const std::vector<float> plain_q = pq.download(ctx), plain_k = pk.download(ctx),
                           plain_v = pv.download(ctx);
  const std::vector<T> plain_kc = pkc.download(ctx), plain_vc = pvc.download(ctx);
  Dev<float> angles(static_cast<size_t>(n_tokens * kernels::qk_angle_table_floats(n_rot)));
  kernels::qk_angle_table(step, n_rot, dfreq.get(), angles.get(), ctx.stream());
  for (const bool with_table : {false, true}) {
    Dev<float> fq(ctx, q), fk(ctx, k), fv(ctx, v);
    Dev<T> fkc(n_slots * kv_row), fvc(n_slots * kv_row);
    fkc.poison(ctx);
    fvc.poison(ctx);
    kernels::qk_prologue(paged(fkc, fvc), step, fq.get(), fk.get(), fv.get(), n_heads, q_norm,
                         k_norm, fused_v_norm, kEps, n_rot, fused_neox, dfreq.get(), ctx.stream(),
                         with_table ? angles.get() : nullptr);
    ctx.sync();
    const double mismatches =
        bit_mismatches(fq.download(ctx), plain_q) + bit_mismatches(fk.download(ctx), plain_k) +
        bit_mismatches(fv.download(ctx), plain_v) + cache_mismatches(fkc.download(ctx), plain_kc) +
        cache_mismatches(fvc.download(ctx), plain_vc);
    ctx.add({"qk_prologue",
             shape_str({n_tokens, n_heads, n_kv_heads, head_dim}) + " rot " +
                 std::to_string(n_rot) + (neox ? " neox" : " normal") + (norms ? " norms" : "") +
                 (v_norm ? " +v" : "") + (with_table ? " angle table" : ""),
             std::string(dtype_name(dtype)), "bits", mismatches, 0.0,
             !ctx.teeth() ? ""
             : drop_v     ? "v norm dropped"
             : norms      ? "q and k norm weights swapped"
                          : "pair layout swapped"});
  }
}

}  // namespace

void check_qk_prologue(Context& ctx) {
  if (!ctx.wants("qk_prologue")) return;
  check_one<uint16_t>(ctx, DType::f16, 2, 32, 8, 128, 128, true, true);  // 8B decode
  check_one<uint16_t>(ctx, DType::f16, 77, 16, 8, 128, 128, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 5, 8, 1, 256, 256, true, true);  // gemma3
  check_one<uint16_t>(ctx, DType::bf16, 9, 16, 4, 256, 64, true, true);  // partial rotary
  check_one<float>(ctx, DType::f32, 33, 14, 2, 64, 64, false, false);    // llama: no norms
  check_one<float>(ctx, DType::f32, 3, 6, 2, 100, 100, true, true);      // dims not a 4-multiple
  check_one<uint16_t>(ctx, DType::f16, 7, 16, 2, 512, 128, true, true);  // gemma4 full attention
  check_one<uint16_t>(ctx, DType::bf16, 2, 32, 4, 512, 128, true, true);
  check_one<float>(ctx, DType::f32, 11, 4, 2, 16, 16, true, true);  // the gemma4 fixture's sliding
  check_one<uint16_t>(ctx, DType::bf16, 5, 4, 2, 16, 16, true, true);
  // F8_E4M3 caches: 8B decode and prefill, gemma3, partial rotary, llama without norms (the
  // teeth's pair-layout variant), gemma4's 512 and 16 wide heads.
  check_one<uint8_t>(ctx, DType::f8_e4m3, 2, 32, 8, 128, 128, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 77, 16, 8, 128, 128, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 5, 8, 1, 256, 256, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 9, 16, 4, 256, 64, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 33, 14, 2, 64, 64, false, false);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 7, 16, 2, 512, 128, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 11, 4, 2, 16, 16, true, true);
  // Gemma 4's v norm in the prologue: 26B-A4B's sliding (16 heads, 8 kv of 256) and full (2 kv of
  // 512, a quarter rotated) layers, decode and prefill, each cache type; an odd head size.
  check_one<uint16_t>(ctx, DType::f16, 2, 16, 8, 256, 256, true, true, true);
  check_one<uint16_t>(ctx, DType::f16, 2, 16, 2, 512, 128, true, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 9, 16, 8, 256, 256, true, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 9, 16, 2, 512, 128, true, true, true);
  check_one<float>(ctx, DType::f32, 5, 16, 8, 256, 256, true, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 2, 16, 8, 256, 256, true, true, true);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 2, 16, 2, 512, 128, true, true, true);
  check_one<float>(ctx, DType::f32, 3, 6, 2, 100, 100, true, true, true);
  check_one<float>(ctx, DType::f32, 11, 4, 2, 16, 16, true, true, true);  // the fixture's sliding
  // Prompts: over 64 tokens a warp takes several heads (qk_prologue.cu's heads_per_warp): the 8B at
  // 130 and 300 tokens (2 and 4 heads a warp), a partial rotary table whose rows start after
  // padding, Gemma 3 and 4 with the v norm, dims not a 4-multiple (element copies), fp8.
  check_one<uint16_t>(ctx, DType::f16, 130, 32, 8, 128, 128, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 300, 32, 8, 128, 128, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 200, 16, 4, 256, 64, true, true);
  check_one<uint16_t>(ctx, DType::f16, 150, 8, 4, 128, 6, true, true);
  check_one<uint16_t>(ctx, DType::bf16, 140, 16, 8, 256, 256, true, true, true);
  check_one<uint16_t>(ctx, DType::f16, 260, 16, 2, 512, 128, true, true, true);
  check_one<float>(ctx, DType::f32, 190, 6, 2, 100, 100, true, true, true);
  check_one<float>(ctx, DType::f32, 129, 14, 2, 64, 64, false, false);
  check_one<uint8_t>(ctx, DType::f8_e4m3, 320, 32, 8, 128, 128, true, true);
  // 128-dim heads in the normal pair layout (Llama 3: qk_prologue.cu's four-a-lane kernel with the
  // angle table): decode without norms, a prompt without norms, with norms into an F32 cache.
  check_one<uint16_t>(ctx, DType::f16, 3, 32, 8, 128, 128, false, false);
  check_one<uint16_t>(ctx, DType::bf16, 200, 32, 8, 128, 128, false, false);
  check_one<float>(ctx, DType::f32, 70, 8, 2, 128, 128, false, true);
}

}  // namespace memra::kernel_check
