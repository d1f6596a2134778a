// The mixture-of-experts kernels (kernels/moe and the expert mode of the one-token decode matmul)
// against the CPU backend's ops (backend/cpu/moe_cpu.cpp, the oracle the engine's CPU runs) and
// against the plain matmul kernels:
// - moe_route: ids exactly the CPU's (ties to the lower expert, a NaN row), weights within 1e-6
//   (the GPU sums the exponentials as a lane tree, the CPU in expert order).
// - matmul_experts, both paths (a block per pair; pairs sorted by expert on the device), up to
//   kExpertPairsMax pairs whatever MEMRA_MOE_DEVICE_MAX_PAIRS says (called directly): every
//   pair's row bit-identical to kernels::matmul of that expert's tiled matrix over the rows the
//   expert got (so to any batch: matmul is batch-invariant).
// - matmul_experts_group (the grouped path's sort): begin, rows and place exactly a host stable
//   counting sort's, from 65 to kExpertPairsMax pairs.
// - moe_combine and sigmoid_scale_rows: bit-identical to the CPU (one rounding per operation).
// --teeth: row 0's extreme logits swapped and the normalization flipped, one pair routed to the
// next expert (matmul_experts and its sort), one weight 0.1% off, a negated gate.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "backend/cpu/moe_cpu.h"
#include "backend/ops.h"
#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr double kRouteWeightTol = 1e-6;

void check_route(Context& ctx, int64_t n, int n_expert, int k, bool normalize, bool scaled) {
  std::vector<float> logits = ctx.uniform(n * n_expert, -4.0f, 4.0f);
  // Ties: row 1 repeats its first logit across a few experts; row 2 is all equal; row 3 has a NaN.
  if (n > 1)
    for (int e = 1; e < std::min(n_expert, 2 * k); e += 2) logits[n_expert + e] = logits[n_expert];
  if (n > 2) std::fill(logits.begin() + 2 * n_expert, logits.begin() + 3 * n_expert, 0.25f);
  if (n > 3) logits[3 * n_expert + 1] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> scale =
      scaled ? ctx.uniform(n_expert, 0.5f, 2.0f) : std::vector<float>{};
  std::vector<int32_t> ref_ids(n * k);
  std::vector<float> ref_w(n * k);
  cpu::moe_route(logits.data(), n, {n_expert, k, normalize, scaled ? scale.data() : nullptr},
                 ref_ids.data(), ref_w.data());
  // Teeth: row 0's largest and smallest logits trade places (other ids) and the GPU gets the
  // other normalization (other weights, even for one expert a token).
  if (ctx.teeth()) {
    std::iter_swap(std::max_element(logits.begin(), logits.begin() + n_expert),
                   std::min_element(logits.begin(), logits.begin() + n_expert));
    normalize = !normalize;
  }
  Dev<float> dl(ctx, logits), dscale(ctx, scaled ? scale : std::vector<float>{1.0f}), dw(n * k);
  Dev<int32_t> dids(n * k);
  dw.poison(ctx);
  dids.poison(ctx);
  kernels::moe_route(dl.get(), n, n_expert, k, normalize, scaled ? dscale.get() : nullptr,
                     dids.get(), dw.get(), ctx.stream());
  ctx.sync();
  const std::vector<int32_t> ids = dids.download(ctx);
  const std::vector<float> w = dw.download(ctx);
  double id_errors = 0;
  for (size_t i = 0; i < ids.size(); ++i) id_errors += ids[i] != ref_ids[i];
  const std::string shape =
      shape_str({n, n_expert, k}) + (normalize ? " norm" : "") + (scaled ? " scaled" : "");
  const std::string broken =
      ctx.teeth() ? "row 0's largest and smallest logits swapped, normalization flipped" : "";
  ctx.add({"moe_route ids", shape, "f32", "bits", id_errors, 0.0, broken});
  // The NaN row's weights are NaN on both sides and compare as such (rel_error: NaN vs NaN ok).
  std::vector<double> ref(ref_w.begin(), ref_w.end());
  std::vector<float> got = w;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::isnan(ref[i]) && std::isnan(got[i])) ref[i] = got[i] = 0.0f;
  ctx.add({"moe_route weights", shape, "f32", "rel", rel_error(got, ref, 1e-3), kRouteWeightTol,
           broken});
}

// How the pairs pick experts: uniformly, or skewed as a prefill's routing can be (three hot
// experts take about half the pairs, expert 0 and the top quarter none, the rest a few each).
enum class Routing { uniform, skewed };

std::vector<int32_t> random_ids(Context& ctx, int64_t n_pairs, int n_expert, Routing routing) {
  std::vector<int32_t> ids(n_pairs);
  if (routing == Routing::uniform || n_expert < 8) {
    for (auto& id : ids) id = ctx.randint(0, n_expert - 1);
    return ids;
  }
  const int32_t hot[3] = {1, n_expert / 2 - 1, n_expert / 2};
  for (auto& id : ids) {
    const int32_t r = ctx.randint(0, 99);
    id = r < 50 ? hot[r % 3] : ctx.randint(2, n_expert * 3 / 4 - 1);
  }
  return ids;
}

const char* routing_str(Routing routing) {
  return routing == Routing::skewed ? " skewed" : "";
}

void check_experts(Context& ctx, DType dtype, int64_t n_in, int64_t n_out, int n_expert,
                   int64_t n_tokens, int k, bool per_pair_x, Routing routing = Routing::uniform,
                   kernels::WeightLayout layout = kernels::WeightLayout::tiled) {
  const int64_t n_pairs = n_tokens * k, x_div = per_pair_x ? 1 : k;
  const int64_t n_x = per_pair_x ? n_pairs : n_tokens;
  const bool is_tiled = layout == kernels::WeightLayout::tiled;
  const size_t expert_bytes = is_tiled ? kernels::matmul_tiled_bytes(dtype, n_in, n_out)
                                       : dtype_row_bytes(dtype, n_in, "expert") * n_out;
  Dev<uint8_t> tiled(expert_bytes * n_expert);  // the stack in `layout`
  for (int e = 0; e < n_expert; ++e) {
    const std::vector<uint8_t> w = random_weights(ctx, dtype, n_in, n_out);
    if (!is_tiled) {
      cuda::check(cudaMemcpyAsync(tiled.get() + e * expert_bytes, w.data(), w.size(),
                                  cudaMemcpyHostToDevice, ctx.stream()),
                  "upload");
      ctx.sync();
      continue;
    }
    const Dev<uint8_t> ggml(ctx, w);
    kernels::matmul_tile(dtype, ggml.get(), n_in, n_out, tiled.get() + e * expert_bytes,
                         ctx.stream());
    ctx.sync();
  }
  std::vector<int32_t> ids = random_ids(ctx, n_pairs, n_expert, routing);
  const std::vector<float> x = wide_range_x(ctx, n_x, n_in);
  Dev<float> dx(ctx, x), dy(n_pairs * n_out);
  // Reference: each expert's rows through the plain matmul kernel, as many as it got.
  std::vector<float> ref(n_pairs * n_out);
  for (int e = 0; e < n_expert; ++e) {
    std::vector<int64_t> pairs;
    for (int64_t p = 0; p < n_pairs; ++p)
      if (ids[p] == e) pairs.push_back(p);
    if (pairs.empty()) continue;
    const int64_t m = static_cast<int64_t>(pairs.size());
    std::vector<float> xe(m * n_in);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(x.begin() + pairs[i] / x_div * n_in, n_in, xe.begin() + i * n_in);
    Dev<float> dxe(ctx, xe), dye(m * n_out);
    Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(m, n_in));
    kernels::matmul(dtype, tiled.get() + e * expert_bytes, n_in, n_out, dxe.get(), m, dye.get(),
                    n_out, scratch.get(), ctx.stream(), layout);
    ctx.sync();
    const std::vector<float> ye = dye.download(ctx);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(ye.begin() + i * n_out, n_out, ref.begin() + pairs[i] * n_out);
  }
  if (ctx.teeth()) ids[0] = (ids[0] + 1) % n_expert;
  Dev<int32_t> dids(ctx, ids);
  dy.poison(ctx);
  const kernels::ExpertsOut out{dtype, tiled.get(), static_cast<int64_t>(expert_bytes),
                                n_out, dy.get(),    layout};
  Dev<uint8_t> scratch(kernels::matmul_experts_scratch_bytes(&out, 1, n_in, static_cast<int>(x_div),
                                                             n_pairs, n_expert));
  kernels::matmul_experts(&out, 1, n_in, dx.get(), static_cast<int>(x_div), dids.get(), n_pairs,
                          n_expert, scratch.get(), ctx.stream());
  ctx.sync();
  ctx.add({"matmul_experts",
           shape_str({n_in, n_out, n_expert, n_tokens, k}) + (per_pair_x ? " x/pair" : " x/token") +
               routing_str(routing) + (is_tiled ? "" : " ggml") + " vs matmul",
           std::string(dtype_name(dtype)), "bits", bit_mismatches(dy.download(ctx), ref), 0.0,
           ctx.teeth() ? "pair 0 routed to the next expert" : ""});
}

// The grouped path's sort against a host stable counting sort: every begin, rows and place
// entry (a pure function of ids, ties in pair order).
void check_group(Context& ctx, int64_t n_pairs, int n_expert, int x_div, Routing routing) {
  std::vector<int32_t> ids = random_ids(ctx, n_pairs, n_expert, routing);
  std::vector<int32_t> ref_begin(n_expert + 1, 0), ref_rows(n_pairs), ref_place(n_pairs);
  for (const int32_t id : ids) ++ref_begin[id + 1];
  for (int e = 0; e < n_expert; ++e) ref_begin[e + 1] += ref_begin[e];
  std::vector<int32_t> next(ref_begin.begin(), ref_begin.end() - 1);
  for (int64_t p = 0; p < n_pairs; ++p) {
    const int32_t at = next[ids[p]]++;
    ref_place[p] = at;
    ref_rows[at] = static_cast<int32_t>(p / x_div);
  }
  // Broken: pair 0 routed to the next expert; with one expert (no next), rows read as if each
  // token had one pair more.
  const bool route_off = ctx.teeth() && n_expert > 1;
  if (route_off) ids[0] = (ids[0] + 1) % n_expert;
  const int dev_x_div = ctx.teeth() && !route_off ? x_div + 1 : x_div;
  Dev<int32_t> dids(ctx, ids), begin(n_expert + 1), rows(n_pairs), place(n_pairs);
  begin.poison(ctx);
  rows.poison(ctx);
  place.poison(ctx);
  kernels::matmul_experts_group(dids.get(), n_pairs, n_expert, dev_x_div, begin.get(), rows.get(),
                                place.get(), ctx.stream());
  ctx.sync();
  double mismatches = 0;
  const auto count = [&](const std::vector<int32_t>& got, const std::vector<int32_t>& ref) {
    for (size_t i = 0; i < ref.size(); ++i) mismatches += got[i] != ref[i];
  };
  count(begin.download(ctx), ref_begin);
  count(rows.download(ctx), ref_rows);
  count(place.download(ctx), ref_place);
  ctx.add({"matmul_experts_group",
           shape_str({n_pairs, n_expert, x_div}) + routing_str(routing) + " vs host stable sort",
           "i32", "bits", mismatches, 0.0,
           !ctx.teeth() ? ""
           : route_off  ? "pair 0 routed to the next expert"
                        : "rows read with x_div + 1"});
}

void check_combine(Context& ctx, int64_t n, int k, int64_t dim) {
  const std::vector<float> y = ctx.uniform(n * k * dim);
  std::vector<float> w = ctx.uniform(n * k, 0.0f, 1.0f), ref(n * dim);
  cpu::moe_combine(y.data(), w.data(), n, k, dim, ref.data());
  if (ctx.teeth()) w[0] *= 1.001f;
  Dev<float> dy(ctx, y), dw(ctx, w), dout(n * dim);
  dout.poison(ctx);
  kernels::moe_combine(dy.get(), dw.get(), n, k, dim, dout.get(), ctx.stream());
  ctx.sync();
  ctx.add({"moe_combine", shape_str({n, k, dim}), "f32", "bits",
           bit_mismatches(dout.download(ctx), ref), 0.0, ctx.teeth() ? "one weight 0.1% off" : ""});
}

void check_sigmoid_rows(Context& ctx, int64_t n, int64_t dim) {
  const std::vector<float> y = ctx.uniform(n * dim);
  std::vector<float> g = ctx.uniform(n, -6.0f, 6.0f), ref = y;
  cpu::sigmoid_scale_rows(ref.data(), g.data(), n, dim);
  if (ctx.teeth())
    for (float& v : g) v = -v;
  Dev<float> dy(ctx, y), dg(ctx, g);
  kernels::sigmoid_scale_rows(dy.get(), dg.get(), n, dim, ctx.stream());
  ctx.sync();
  ctx.add({"sigmoid_scale_rows", shape_str({n, dim}), "f32", "bits",
           bit_mismatches(dy.download(ctx), ref), 0.0, ctx.teeth() ? "gate negated" : ""});
}

}  // namespace

void check_moe(Context& ctx) {
  if (ctx.wants("moe_route")) {
    check_route(ctx, 7, 128, 8, true, false);   // Qwen3-30B-A3B's router
    check_route(ctx, 33, 256, 8, true, false);  // Qwen3.6-35B-A3B's
    check_route(ctx, 5, 128, 8, true, true);    // Gemma 4 26B-A4B's (per-expert scale)
    check_route(ctx, 9, 60, 4, false, false);   // odd sizes, no renormalization
    check_route(ctx, 4, 512, 1, true, false);   // the widest router, one expert
  }
  if (ctx.wants("matmul_experts")) {
    check_experts(ctx, DType::q4_k, 2048, 768, 16, 1, 8, false);  // gate/up at batch 1
    check_experts(ctx, DType::q6_k, 768, 2048, 16, 1, 8, true);   // down at batch 1
    check_experts(ctx, DType::q8_0, 1024, 272, 6, 5, 4, false);   // odd rows, few experts
    check_experts(ctx, DType::q6_k, 256, 48, 4, 3, 2, false);     // a single chunk of K
    // Over kExpertPairsPerPair pairs: sorted by expert, each expert's rows in one block.
    check_experts(ctx, DType::q4_k, 512, 512, 32, 64, 8, true);     // 512 pairs: the old limit
    check_experts(ctx, DType::q4_k, 2048, 768, 128, 16, 8, false);  // most experts empty
    check_experts(ctx, DType::q8_0, 256, 96, 2, 50, 2, false);      // 100 rows an expert: 2 groups
    check_experts(ctx, DType::q6_k, 768, 2048, 8, 9, 8, true);      // every expert, 9 rows each
    check_experts(ctx, DType::q6_k, 256, 64, 16, 16, 8, true);      // 8-row passes, some two
    // Past the old 512-pair limit (the default now goes to kExpertPairsMax): a prefill's pairs,
    // partial last chunks of the sort, hot experts in many passes.
    check_experts(ctx, DType::q4_k, 512, 256, 128, 125, 8, false, Routing::skewed);  // 1000
    check_experts(ctx, DType::q4_k, 2048, 768, 128, 512, 8, false);  // 4096: 30B-A3B's gate
    check_experts(ctx, DType::q6_k, 768, 512, 128, 512, 8, true, Routing::skewed);   // 4096
    check_experts(ctx, DType::q8_0, 256, 96, 256, 4500, 2, false, Routing::skewed);  // 9000
    // Experts in the file's layout (MEMRA_MOE_DEVICE_GGML, main keeps it on): K no multiple of
    // 256 (Gemma 4 26B-A4B's 704-wide down, in llama.cpp's Q4_K_M fallback types), a block per
    // pair up to 64 pairs, the sort above, decode and prefill sizes.
    constexpr auto kGgml = kernels::WeightLayout::ggml;
    check_experts(ctx, DType::q8_0, 704, 256, 16, 1, 8, true, Routing::uniform, kGgml);
    check_experts(ctx, DType::q5_0, 704, 272, 16, 8, 8, true, Routing::uniform, kGgml);
    check_experts(ctx, DType::q5_0, 704, 2816, 32, 1, 8, true, Routing::uniform, kGgml);  // G4
    check_experts(ctx, DType::bf16, 64, 48, 8, 3, 2, false, Routing::uniform, kGgml);  // fixtures'
    check_experts(ctx, DType::q4_0, 96, 40, 4, 32, 2, false, Routing::skewed, kGgml);  // 64 pairs
    check_experts(ctx, DType::q8_0, 704, 512, 128, 512, 8, true, Routing::skewed, kGgml);
    check_experts(ctx, DType::q4_k, 512, 96, 8, 20, 4, false, Routing::uniform, kGgml);
  }
  if (ctx.wants("matmul_experts_group")) {
    check_group(ctx, 65, 1, 1, Routing::uniform);  // one expert: every pair a tie
    check_group(ctx, 100, 16, 1, Routing::uniform);
    check_group(ctx, 512, 4, 8, Routing::uniform);  // the old cap, long runs of ties
    check_group(ctx, 512, 128, 8, Routing::skewed);
    check_group(ctx, 1000, 128, 8, Routing::skewed);
    check_group(ctx, 4096, 128, 8, Routing::uniform);
    check_group(ctx, 9000, 256, 2, Routing::skewed);
    check_group(ctx, 16384, 512, 8, Routing::skewed);  // kExpertPairsMax, the widest router
    check_group(ctx, 16384, 2, 1, Routing::uniform);   // kExpertPairsMax, about 8192 rows each
  }
  if (ctx.wants("moe_combine")) {
    check_combine(ctx, 1, 8, 2048);
    check_combine(ctx, 37, 4, 1000);
  }
  if (ctx.wants("sigmoid_scale_rows")) {
    check_sigmoid_rows(ctx, 1, 2048);
    check_sigmoid_rows(ctx, 29, 515);
  }
}

}  // namespace memra::kernel_check
