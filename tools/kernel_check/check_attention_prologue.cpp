// Attention with its prologue handed in (kernels.h's AttentionPrologue) against qk_prologue then
// attention, run on copies of the same inputs: the outputs and both cache images must match bit
// for bit. At one token on a 16-bit cache the decode kernel runs the prologue in its blocks
// (decode_prologue.cuh); every other step runs qk_prologue's launch first, which this checks too
// (two sequences, an fp8 cache, a 256-dim head). Each row says which ran: where the prologue ran
// in attention's blocks q is left as the caller wrote it. The caches start as random finite
// values, the token's own slot included (a stale row its copies land and must replace); blocks
// are shuffled, so the block table matters. A padding token (slot -1) writes nothing and reads
// what its slot holds, either way. --teeth swaps the q and k norm weights of the handed-in
// prologue (cases with norms) or its pair layout (cases without).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "check.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr int32_t kBlockSize = 16;

struct PrologueCase {
  DType cache;
  int n_heads, n_kv_heads, head_dim;
  std::vector<int32_t> pos;  // a token per sequence: its position (its context is pos + 1)
  bool norms = true, neox = true;
  int32_t window = 0;
  bool padding = false;  // the last token's slot -1
};

// Random finite cache elements of the cache's type, as bytes.
std::vector<uint8_t> random_cache(Context& ctx, DType dtype, int64_t n) {
  const size_t size = dtype_traits(dtype).type_size;
  std::vector<uint8_t> bytes(n * size);
  const std::vector<float> values = ctx.uniform(n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (size == 1) {
      bytes[i] = static_cast<uint8_t>(ctx.randint(0, 0x7e) | (ctx.randint(0, 1) << 7));  // finite
    } else if (size == 2) {
      const uint16_t h = dtype == DType::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    }
  }
  return bytes;
}

void check_one(Context& ctx, const PrologueCase& c) {
  const int hd = c.head_dim, n_tokens = static_cast<int>(c.pos.size());
  const int64_t q_row = int64_t{c.n_heads} * hd, kv_row = int64_t{c.n_kv_heads} * hd;
  // Block tables: each sequence's blocks, shuffled among all of them.
  int32_t max_blocks = 0, used = 0, max_context = 0;
  for (const int32_t p : c.pos) {
    max_blocks = std::max(max_blocks, p / kBlockSize + 1);
    used += p / kBlockSize + 1;
    max_context = std::max(max_context, p + 1);
  }
  const int32_t n_blocks = used + 3;
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), ctx.rng());
  std::vector<int32_t> tables(static_cast<size_t>(n_tokens) * max_blocks, -1), seqs(n_tokens),
      slots(n_tokens);
  size_t next = 0;
  for (int t = 0; t < n_tokens; ++t) {
    for (int32_t b = 0; b <= c.pos[t] / kBlockSize; ++b) tables[t * max_blocks + b] = ids[next++];
    seqs[t] = t;
    slots[t] = tables[t * max_blocks + c.pos[t] / kBlockSize] * kBlockSize + c.pos[t] % kBlockSize;
  }
  if (c.padding) slots.back() = -1;
  const int64_t n_slots = int64_t{n_blocks} * kBlockSize;
  const std::vector<uint8_t> k_cache = random_cache(ctx, c.cache, n_slots * kv_row);
  const std::vector<uint8_t> v_cache = random_cache(ctx, c.cache, n_slots * kv_row);
  const std::vector<float> q = ctx.uniform(n_tokens * q_row, -4.0f, 4.0f);
  const std::vector<float> k = ctx.uniform(n_tokens * kv_row, -4.0f, 4.0f);
  const std::vector<float> v = ctx.uniform(n_tokens * kv_row, -2.0f, 2.0f);
  const std::vector<float> qw = ctx.uniform(hd, 0.5f, 1.5f), kw = ctx.uniform(hd, 0.5f, 1.5f);
  std::vector<double> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(1000000.0, -2.0 * i / hd);

  Dev<int32_t> dpos(ctx, c.pos), dseqs(ctx, seqs), dtables(ctx, tables), dslots(ctx, slots);
  Dev<double> dfreq(ctx, inv_freq);
  Dev<float> dqw(ctx, qw), dkw(ctx, kw);
  kernels::StepDev step;
  step.n_tokens = n_tokens;
  step.n_seqs = n_tokens;
  step.max_blocks = max_blocks;
  step.max_context = max_context;
  step.positions = dpos.get();
  step.token_seq = dseqs.get();
  step.block_tables = dtables.get();
  step.slots = dslots.get();
  Dev<float> angles(static_cast<size_t>(n_tokens * kernels::qk_angle_table_floats(hd)));
  kernels::qk_angle_table(step, hd, dfreq.get(), angles.get(), ctx.stream());
  kernels::AttentionArgs args;
  args.n_heads = c.n_heads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  args.window = c.window;
  constexpr float kEps = 1e-6f;

  struct Outcome {
    std::vector<float> out, q;
    std::vector<uint8_t> k_cache, v_cache;
  };
  // One way: qk_prologue then attention (handed false), or attention with the prologue handed in.
  const auto run = [&](bool handed) {
    Dev<float> dq(ctx, q), dk(ctx, k), dv(ctx, v), out(n_tokens * q_row);
    Dev<uint8_t> kc(ctx, k_cache), vc(ctx, v_cache);
    out.poison(ctx);
    const kernels::PagedKv kv{kc.get(), vc.get(), c.cache, kBlockSize, c.n_kv_heads, hd, n_blocks};
    Dev<uint8_t> scratch(kernels::attention_scratch_bytes(step, c.n_heads, hd));
    kernels::attention_scratch_clear(scratch.get(), ctx.stream());
    const bool swap = handed && ctx.teeth() && c.norms;
    const bool neox = handed && ctx.teeth() && !c.norms ? !c.neox : c.neox;
    const float* q_norm = c.norms ? (swap ? dkw.get() : dqw.get()) : nullptr;
    const float* k_norm = c.norms ? (swap ? dqw.get() : dkw.get()) : nullptr;
    if (handed) {
      const kernels::AttentionPrologue pro{.q = dq.get(),
                                           .k = dk.get(),
                                           .v = dv.get(),
                                           .q_norm = q_norm,
                                           .k_norm = k_norm,
                                           .eps = kEps,
                                           .n_rot = hd,
                                           .neox = neox,
                                           .inv_freq = dfreq.get(),
                                           .angle_table = angles.get()};
      kernels::attention(kv, step, dq.get(), q_row, args, out.get(), scratch.get(), ctx.stream(),
                         &pro);
    } else {
      kernels::qk_prologue(kv, step, dq.get(), dk.get(), dv.get(), c.n_heads, q_norm, k_norm,
                           nullptr, kEps, hd, neox, dfreq.get(), ctx.stream(), angles.get());
      kernels::attention(kv, step, dq.get(), q_row, args, out.get(), scratch.get(), ctx.stream());
    }
    ctx.sync();
    return Outcome{out.download(ctx), dq.download(ctx), kc.download(ctx), vc.download(ctx)};
  };
  const Outcome plain = run(false), handed = run(true);
  double mismatches = bit_mismatches(handed.out, plain.out);
  const size_t size = dtype_traits(c.cache).type_size;
  for (size_t i = 0; i < plain.k_cache.size(); i += size) {
    mismatches += std::memcmp(&handed.k_cache[i], &plain.k_cache[i], size) != 0;
    mismatches += std::memcmp(&handed.v_cache[i], &plain.v_cache[i], size) != 0;
  }
  // Where the prologue ran in attention's blocks, q is the caller's (qk_prologue rotates it).
  const bool inside = bit_mismatches(handed.q, q) == 0;
  std::string shape = std::to_string(n_tokens) + "tok h" + std::to_string(c.n_heads) + "/" +
                      std::to_string(c.n_kv_heads) + " d" + std::to_string(hd) + " pos";
  for (const int32_t p : c.pos) shape.append(" ").append(std::to_string(p));
  if (c.window > 0) shape += " w" + std::to_string(c.window);
  shape += std::string(c.neox ? " neox" : " normal") + (c.norms ? " norms" : "") +
           (c.padding ? " pad" : "") + (inside ? " (in attention)" : " (own launch)");
  ctx.add({"attention_prologue", shape, std::string(dtype_name(c.cache)), "bits", mismatches, 0.0,
           !ctx.teeth() ? ""
           : c.norms    ? "q and k norm weights swapped"
                        : "pair layout swapped"});
}

}  // namespace

void check_attention_prologue(Context& ctx) {
  if (!ctx.wants("attention_prologue")) return;
  // Qwen3-0.6B's heads (16 / 8) and 8B's (32 / 8) at one token: a first split (positions 0, 3,
  // 200), a split's last and first keys (255, 256, 511, 512), two to eight splits (the cluster
  // merge's), past eight (another form: the prologue's own launch).
  for (const int32_t p : {0, 3, 200, 255, 256, 300, 511, 512, 777, 1500, 2047, 2500})
    check_one(ctx, {DType::f16, 16, 8, 128, {p}});
  for (const int32_t p : {17, 256, 600, 1023, 1800}) check_one(ctx, {DType::f16, 32, 8, 128, {p}});
  for (const int32_t p : {5, 300, 900}) check_one(ctx, {DType::bf16, 32, 8, 128, {p}});
  // Llama 3's layout without norms; GQA 1 and 16 (the kv head's query heads over several
  // blocks); a window; a padding token.
  check_one(ctx, {DType::f16, 32, 8, 128, {450}, false, false});
  check_one(ctx, {DType::bf16, 8, 8, 128, {333}});
  check_one(ctx, {DType::f16, 32, 2, 128, {700}});
  check_one(ctx, {DType::f16, 16, 8, 128, {1200}, true, true, 300});
  check_one(ctx, {DType::f16, 16, 8, 128, {400}, true, true, 0, true});
  // Steps the prologue runs before: two sequences, an fp8 cache, 256-dim heads.
  check_one(ctx, {DType::f16, 16, 8, 128, {100, 700}});
  check_one(ctx, {DType::f8_e4m3, 16, 8, 128, {300}});
  check_one(ctx, {DType::bf16, 8, 4, 256, {300}});
}

}  // namespace memra::kernel_check
