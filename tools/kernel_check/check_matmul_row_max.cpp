// rms_norm_row_max, then matmul_shared_x_handed (a prompt step's norm handing the products its
// rows' largest |x|, kernels/row_max.h) == the plain kernel then matmul_shared_x finding the maxima
// itself: the kernel's outputs and every product's bit for bit, at prompt-step token counts whose
// tiled outputs take x's wgmma form by token groups on sm_90a (elsewhere the products prepare x
// themselves and the maxima are not read; the comparison holds either way). Likewise
// rms_norm_x_rows and act_mul_x_rows, each then matmul_shared_x_handed (the kernel writing x's rows
// form itself, read on sm_90a unless MEMRA_X_ROWS=0), at prompt-step token counts and at 40 and
// 64 tokens, where every product takes the pipelined Q4_K or the scaled Q6_K / Q8_0 wgmma kernel
// and reads the rows form unless MEMRA_X_ROWS_DECODE=0 (elsewhere the products prepare x
// themselves). And act_mul_part_max, then matmul_shared_x_handed at one token, where the one-token
// kernel (and the tiled decode kernel for a BF16 output) reads x raw from the activation's partial
// maxima (matmul/one_token_x.cuh). And one-token decode attention handing the o product its
// outputs' partial maxima (attention_part_max, MEMRA_RAW_X_ATTENTION), then
// matmul_shared_x_handed with that many.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/row_max.h"

namespace memra::kernel_check {
namespace {

// The products of every case: tiled Q4_K, Q6_K and BF16 outputs over the same x, or at decode
// token counts Q4_K, Q6_K and Q8_0 (a BF16 output of 64 rows takes the tiled decode kernel there,
// which reads x's other forms, so the rows form would not be read).
constexpr int kOuts = 3;
using Types = DType[kOuts];
constexpr Types kTypes = {DType::q4_k, DType::q6_k, DType::bf16};
constexpr Types kDecodeTypes = {DType::q4_k, DType::q6_k, DType::q8_0};
constexpr int64_t kOutRows[kOuts] = {160, 48, 64};

std::string types_str(const Types& types) {
  std::string s;
  for (DType t : types) s.append(s.empty() ? "" : "+").append(dtype_name(t));
  return s + " tiled";
}

// The outputs' weights for each type (tiled), over dim inputs.
std::vector<Dev<uint8_t>> tiled_weights(Context& ctx, const Types& types, int64_t dim) {
  std::vector<Dev<uint8_t>> ws;
  for (int i = 0; i < kOuts; ++i) {
    Dev<uint8_t> ggml(ctx, random_weights(ctx, types[i], dim, kOutRows[i]));
    ws.emplace_back(kernels::matmul_tiled_bytes(types[i], dim, kOutRows[i]));
    kernels::matmul_tile(types[i], ggml.get(), dim, kOutRows[i], ws.back().get(), ctx.stream());
    ctx.sync();
  }
  return ws;
}

// The products' outputs twice, poisoned: `plain` for the plain kernel's x, `given` for the row-max
// path's.
struct OutputPairs {
  std::vector<Dev<float>> plain, given;
  std::vector<kernels::MatmulOut> plain_outs, given_outs;

  OutputPairs(Context& ctx, const Types& types, const std::vector<Dev<uint8_t>>& ws, int64_t rows) {
    for (int i = 0; i < kOuts; ++i) {
      plain.emplace_back(rows * kOutRows[i]);
      given.emplace_back(rows * kOutRows[i]);
      plain.back().poison(ctx);
      given.back().poison(ctx);
    }
    for (int i = 0; i < kOuts; ++i) {
      const auto out = [&](const Dev<float>& y) {
        return kernels::MatmulOut{types[i], ws[i].get(), kOutRows[i],
                                  y.get(),  kOutRows[i], kernels::WeightLayout::tiled};
      };
      plain_outs.push_back(out(plain[i]));
      given_outs.push_back(out(given[i]));
    }
  }
  double mismatches(const Context& ctx) const {
    double bad = 0;
    for (int i = 0; i < kOuts; ++i)
      bad += bit_mismatches(given[i].download(ctx), plain[i].download(ctx));
    return bad;
  }
};

using kernels::Handed;

// Whether the products read what is handed over at this many rows of dim (elsewhere they prepare
// x themselves from the kernel's output, and the comparison holds all the same).
bool handed_read(Handed h, int64_t rows, int64_t dim) {
  if (h == Handed::part_max) return kernels::part_max_read(rows, dim);
  return h == Handed::row_max ? kernels::row_max_pays(rows) : kernels::x_rows_pays(rows, dim);
}

// The tooth where the products read what was handed over: row 0's largest |x| made 2^17 times
// smaller, so that its f16 form overflows (a power of two within f16's range would not show: the
// row's scale is undone exactly, whichever power it is), row 0's first 64 values of the rows form
// zeroed, or every partial maximum made 2^17 times smaller (the row's largest is one of them;
// n_parts of them, 0: the activation's part_max_count(dim)).
void break_handed(Context& ctx, Handed h, void* scratch, int64_t rows, int64_t dim,
                  int n_parts = 0) {
  if (h == Handed::part_max) {
    float* p = kernels::matmul_detail::scratch_part_max(scratch);
    std::vector<float> v(n_parts > 0 ? static_cast<size_t>(n_parts)
                                     : static_cast<size_t>(kernels::part_max_count(dim)));
    const size_t bytes = v.size() * sizeof(float);
    cuda::check(cudaMemcpyAsync(v.data(), p, bytes, cudaMemcpyDeviceToHost, ctx.stream()), "read");
    ctx.sync();
    for (float& m : v) m = std::ldexp(m, -17);
    cuda::check(cudaMemcpyAsync(p, v.data(), bytes, cudaMemcpyHostToDevice, ctx.stream()), "write");
    ctx.sync();
    return;
  }
  if (h == Handed::rows) {
    cuda::check(cudaMemsetAsync(kernels::matmul_detail::scratch_x_rows(scratch, rows, dim), 0,
                                64 * sizeof(uint16_t), ctx.stream()),
                "zero row 0's first values");
    return;
  }
  float* m0 = kernels::matmul_detail::scratch_row_max(scratch, rows, dim);
  float v = 0.0f;
  cuda::check(cudaMemcpyAsync(&v, m0, sizeof v, cudaMemcpyDeviceToHost, ctx.stream()), "read");
  ctx.sync();
  v = std::ldexp(v, -17);
  cuda::check(cudaMemcpyAsync(m0, &v, sizeof v, cudaMemcpyHostToDevice, ctx.stream()), "write");
  ctx.sync();
}

// A case's name and tooth: where read, break_handed's; elsewhere `elsewhere`, a defect of the
// kernel itself.
std::string case_name(Handed h, const char* kernel) {
  const char* form = h == Handed::row_max ? " row-max x" : h == Handed::rows ? " rows x" : " raw x";
  return std::string("matmul ") + kernel + form;
}
std::string tooth(const Context& ctx, Handed h, bool read, const char* elsewhere) {
  if (!ctx.teeth()) return "";
  if (!read) return elsewhere;
  if (h == Handed::part_max) return "every partial maximum 2^-17 of itself in the scratch";
  return h == Handed::row_max ? "row 0's largest |x| 2^-17 of itself in the scratch"
                              : "row 0's first 64 values zeroed in x's rows form";
}

// Dim 1024 and 4096 take the norm's register form of 4 chunks a thread, 5120 of 8, 12288 its loop
// form (kernels/elementwise/norm_row.cuh).
void check_norm_case(Context& ctx, Handed h, int64_t dim, int64_t rows, bool residual,
                     const Types& types, const std::vector<Dev<uint8_t>>& ws,
                     const Dev<float>& dw) {
  const std::vector<float> x = ctx.uniform(rows * dim), d = ctx.uniform(rows * dim);
  Dev<float> x1(ctx, x), x2(ctx, x), dd(ctx, d), y1(rows * dim), y2(rows * dim);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, dim)),
      s2(kernels::matmul_scratch_bytes(rows, dim));
  OutputPairs o(ctx, types, ws, rows);
  const bool read = handed_read(h, rows, dim);
  const float eps = 1e-6f, given_eps = ctx.teeth() && !read ? 1e-3f : eps;
  if (residual)
    kernels::add_rms_norm(x1.get(), dd.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
  else
    kernels::rms_norm(x1.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
  kernels::matmul_shared_x(o.plain_outs.data(), kOuts, dim, y1.get(), rows, s1.get(), ctx.stream());
  float* const d2 = residual ? dd.get() : nullptr;
  if (h == Handed::row_max)
    kernels::rms_norm_row_max(x2.get(), d2, dw.get(), rows, dim, given_eps, y2.get(), s2.get(),
                              ctx.stream());
  else
    kernels::rms_norm_x_rows(x2.get(), d2, dw.get(), rows, dim, given_eps, y2.get(), s2.get(),
                             ctx.stream());
  if (ctx.teeth() && read) break_handed(ctx, h, s2.get(), rows, dim);
  kernels::matmul_shared_x_handed(h, o.given_outs.data(), kOuts, dim, y2.get(), rows, s2.get(),
                                  ctx.stream());
  ctx.sync();
  const double bad = bit_mismatches(y2.download(ctx), y1.download(ctx)) +
                     bit_mismatches(x2.download(ctx), x1.download(ctx)) + o.mismatches(ctx);
  ctx.add({case_name(h, "norm"),
           std::string(residual ? "add_rms_norm " : "rms_norm ") + shape_str({rows, dim}) + " " +
               types_str(types),
           "mixed", "bits", bad, 0.0, tooth(ctx, h, read, "eps 1e-3 in the norm")});
}

// The gated activation's rows of n_cols (the down projection's input): one float4 round a thread at
// 1,024 wide, three at 12,288, a partial round at 5,120. Handed::part_max: one row, a part a block
// (1, 4, 5 and 12 of them).
void check_act_case(Context& ctx, Handed h, kernels::Act act, int64_t n_cols, int64_t rows,
                    const Types& types, const std::vector<Dev<uint8_t>>& ws) {
  const Dev<float> gate(ctx, ctx.uniform(rows * n_cols, -4.0f, 4.0f));
  const Dev<float> up(ctx, ctx.uniform(rows * n_cols));
  Dev<float> a1(rows * n_cols), a2(rows * n_cols);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, n_cols)),
      s2(kernels::matmul_scratch_bytes(rows, n_cols));
  OutputPairs o(ctx, types, ws, rows);
  const bool read = handed_read(h, rows, n_cols);
  const kernels::Act other =
      act == kernels::Act::silu ? kernels::Act::gelu_tanh : kernels::Act::silu;
  kernels::act_mul(act, gate.get(), up.get(), rows, n_cols, n_cols, a1.get(), ctx.stream());
  kernels::matmul_shared_x(o.plain_outs.data(), kOuts, n_cols, a1.get(), rows, s1.get(),
                           ctx.stream());
  const kernels::Act given_act = ctx.teeth() && !read ? other : act;
  const bool launched =
      h == Handed::part_max
          ? rows == 1 && kernels::act_mul_part_max(given_act, gate.get(), up.get(), n_cols,
                                                   a2.get(), s2.get(), ctx.stream())
          : kernels::act_mul_x_rows(given_act, gate.get(), up.get(), rows, n_cols, a2.get(),
                                    s2.get(), ctx.stream());
  if (!launched)
    fail(ErrorCode::internal, "{} refused aligned rows of {}", case_name(h, "act"), n_cols);
  if (ctx.teeth() && read) break_handed(ctx, h, s2.get(), rows, n_cols);
  kernels::matmul_shared_x_handed(h, o.given_outs.data(), kOuts, n_cols, a2.get(), rows, s2.get(),
                                  ctx.stream());
  ctx.sync();
  const double bad = bit_mismatches(a2.download(ctx), a1.download(ctx)) + o.mismatches(ctx);
  ctx.add({case_name(h, "act"),
           std::string(act == kernels::Act::silu ? "silu " : "gelu_tanh ") +
               shape_str({rows, n_cols}) + " " + types_str(types),
           "mixed", "bits", bad, 0.0, tooth(ctx, h, read, "the other activation")});
}

// One-token decode attention over a context of `context` keys (an F16 cache of head_dim 128 in
// shuffled blocks of 16), n_heads over n_kv_heads, handing the o product its outputs' partial
// maxima where its form writes them (the one-split form merging through a cluster: 2 to 8
// splits), then matmul_shared_x_handed with that many, against the same attention then
// matmul_shared_x: the outputs and every product bit for bit. Where the launch writes none (one
// split: nothing to merge) the products prepare x and the comparison holds all the same.
void check_attention_case(Context& ctx, int n_heads, int n_kv_heads, int32_t context,
                          const Types& types, const std::vector<Dev<uint8_t>>& ws) {
  constexpr int kHeadDim = 128;
  constexpr int32_t kBlock = 16;
  const int64_t width = int64_t{n_heads} * kHeadDim, row = int64_t{n_kv_heads} * kHeadDim;
  const int32_t n_blocks = (context + kBlock - 1) / kBlock;
  const auto cache = [&] {
    const std::vector<float> f = ctx.uniform(static_cast<size_t>(n_blocks * kBlock * row));
    std::vector<uint8_t> bytes(2 * f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t h = f32_to_f16(f[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    return Dev<uint8_t>(ctx, bytes);
  };
  const Dev<uint8_t> kc = cache(), vc = cache();
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), ctx.rng());
  const Dev<int32_t> pos(ctx, {context - 1}), seq(ctx, {0}), tables(ctx, table);
  const Dev<float> q(ctx, ctx.uniform(static_cast<size_t>(width), -2.0f, 2.0f));
  kernels::PagedKv kv;
  kv.k = kc.get();
  kv.v = vc.get();
  kv.dtype = DType::f16;
  kv.block_size = kBlock;
  kv.n_kv_heads = n_kv_heads;
  kv.head_dim = kHeadDim;
  kv.n_blocks = n_blocks;
  kernels::StepDev step;
  step.n_tokens = 1;
  step.n_seqs = 1;
  step.max_blocks = n_blocks;
  step.positions = pos.get();
  step.token_seq = seq.get();
  step.block_tables = tables.get();
  step.max_context = context;
  kernels::AttentionArgs args;
  args.n_heads = n_heads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const size_t attn_bytes = kernels::attention_scratch_bytes(step, n_heads, kHeadDim);
  Dev<uint8_t> as1(attn_bytes), as2(attn_bytes);
  kernels::attention_scratch_clear(as1.get(), ctx.stream());
  kernels::attention_scratch_clear(as2.get(), ctx.stream());
  Dev<float> a1(static_cast<size_t>(width)), a2(static_cast<size_t>(width));
  a1.poison(ctx);
  a2.poison(ctx);
  Dev<uint8_t> s1(kernels::matmul_scratch_bytes(1, width)),
      s2(kernels::matmul_scratch_bytes(1, width));
  OutputPairs o(ctx, types, ws, 1);
  kernels::attention(kv, step, q.get(), width, args, a1.get(), as1.get(), ctx.stream());
  kernels::matmul_shared_x(o.plain_outs.data(), kOuts, width, a1.get(), 1, s1.get(), ctx.stream());
  const int parts = kernels::attention_part_max(kv, step, q.get(), width, args, a2.get(), as2.get(),
                                                kernels::matmul_detail::scratch_part_max(s2.get()),
                                                static_cast<int>(kernels::part_max_capacity(width)),
                                                ctx.stream());
  const bool read = parts > 0 && kernels::part_max_read(1, width);
  if (ctx.teeth() && read) break_handed(ctx, Handed::part_max, s2.get(), 1, width, parts);
  if (ctx.teeth() && !read) {  // a defect of the products: x's last element 1% off
    std::vector<float> x = a2.download(ctx);
    x.back() = x.back() * 1.01f + 0.01f;
    a2.upload(ctx, x);
  }
  if (parts > 0)
    kernels::matmul_shared_x_handed(Handed::part_max, o.given_outs.data(), kOuts, width, a2.get(),
                                    1, s2.get(), ctx.stream(), nullptr, parts);
  else
    kernels::matmul_shared_x(o.given_outs.data(), kOuts, width, a2.get(), 1, s2.get(),
                             ctx.stream());
  ctx.sync();
  const double bad = bit_mismatches(a2.download(ctx), a1.download(ctx)) + o.mismatches(ctx);
  ctx.add({"matmul attention raw x",
           std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " heads x 128, " +
               std::to_string(context) + " keys, " + std::to_string(parts) + " parts " +
               types_str(types),
           "f16", "bits", bad, 0.0,
           ctx.teeth() ? read ? "every partial maximum 2^-17 of itself in the scratch"
                              : "x's last element 1% off"
                       : ""});
}

}  // namespace

void check_matmul_row_max(Context& ctx) {
  for (int64_t dim : {1024, 4096, 5120, 12288}) {
    const std::vector<Dev<uint8_t>> ws = tiled_weights(ctx, kTypes, dim);
    const std::vector<Dev<uint8_t>> ws_decode = tiled_weights(ctx, kDecodeTypes, dim);
    const Dev<float> dw(ctx, ctx.uniform(dim, 0.5f, 1.5f));
    for (int64_t rows : {int64_t{65}, int64_t{130}, int64_t{300}}) {
      if (dim >= 12288 && rows > 130) continue;  // the loop form's rows are alike past that
      for (bool residual : {true, false})
        check_norm_case(ctx, Handed::row_max, dim, rows, residual, kTypes, ws, dw);
      check_norm_case(ctx, Handed::rows, dim, rows, rows == 130, kTypes, ws, dw);
    }
    // A decode step's (the rows form unless MEMRA_X_ROWS_DECODE=0): 40 tokens, a partial box of
    // the products' 64.
    for (int64_t rows : {int64_t{40}, int64_t{64}})
      check_norm_case(ctx, Handed::rows, dim, rows, rows == 40, kDecodeTypes, ws_decode, dw);
    check_act_case(ctx, Handed::rows, kernels::Act::silu, dim, 40, kDecodeTypes, ws_decode);
    // A one-token step's, x read raw: every product on the one-token kernel, or Q4_K and Q6_K
    // there and a BF16 output on the tiled decode kernel's own launch.
    for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh})
      check_act_case(ctx, Handed::part_max, act, dim, 1, kDecodeTypes, ws_decode);
    check_act_case(ctx, Handed::part_max, kernels::Act::silu, dim, 1, kTypes, ws);
    if (dim == 5120) {
      check_act_case(ctx, Handed::rows, kernels::Act::silu, dim, 130, kTypes, ws);
      continue;
    }
    for (int64_t rows : {int64_t{65}, int64_t{300}})
      for (kernels::Act act : {kernels::Act::silu, kernels::Act::gelu_tanh})
        check_act_case(ctx, Handed::rows, act, dim, rows, kTypes, ws);
  }
  // A one-token step's decode attention handing the o product its partial maxima: Qwen3-0.6B's
  // and -8B's heads, contexts of 1, 2, 3, 5 and 8 splits.
  for (const auto& [n_heads, n_kv_heads] : {std::pair{16, 8}, std::pair{32, 8}}) {
    const int64_t width = int64_t{n_heads} * 128;
    const std::vector<Dev<uint8_t>> ws = tiled_weights(ctx, kTypes, width);
    const std::vector<Dev<uint8_t>> ws_decode = tiled_weights(ctx, kDecodeTypes, width);
    for (int32_t context : {100, 300, 513, 1100, 2048})
      check_attention_case(ctx, n_heads, n_kv_heads, context, kDecodeTypes, ws_decode);
    check_attention_case(ctx, n_heads, n_kv_heads, 700, kTypes, ws);
  }
}

}  // namespace memra::kernel_check
