// The linear-attention kernels (kernels/ssm: ssm_conv, gated_delta_rule, rms_norm_gated,
// sigmoid_mul) against the CPU backend's own ops (backend/cpu, the oracle the engine's CPU runs:
// double sums, f32 state), on Qwen3.5-9B-like shapes (16 key and 32 value heads of 128, the conv
// over their 8192 channels) and small ones. Steps mix fresh sequences (position 0: the slot's old
// contents must be ignored), decode tokens and prefill chunks that carry state, in shuffled state
// slots; the outputs and the updated state are both compared. Plus the bitwise invariances: a
// sequence alone, inside a batch (in another slot) and split over two steps gives the same bits,
// and every gated_delta_rule kernel (token, chunk1..8) gives the token kernel's bits.
// --teeth: the GPU starts from a perturbed state, or gets the conv taps reversed, or a and b
// swapped, or a wrong eps, or a negated gate, or one input of the batched sequence 0.1% off, or
// the chunk kernels' last a gate 0.01 off.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>

#include "backend/ops.h"
#include "check.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

// Against the CPU's double sums, max |gpu - cpu| / max |cpu| per row: a token's outputs (all
// channels, all v heads), a conv state row, a v head's state matrix. Not per (token, head): a
// fresh sequence's first output is (k.q) delta, whose row max is as small as k.q happens to be,
// so its relative error is unbounded. A host emulation of the delta-rule kernel's f32 order
// measured 7e-7 worst (sequences up to 300 tokens) on these rows.
constexpr double kConvTol = 1e-5;
constexpr double kDeltaTol = 1e-5;
constexpr double kGatedNormTol = 1e-5;
constexpr double kSigmoidTol = 1e-6;
constexpr float kEps = 1e-6f;

struct Seq {
  int32_t n_tokens = 0;
  int32_t n_past = 0;  // its first position in the step: 0 starts fresh, > 0 carries state
};

std::string seqs_str(const std::vector<Seq>& seqs) {
  std::string s;
  for (const Seq& q : seqs) {
    if (!s.empty()) s += ',';
    s += std::to_string(q.n_tokens);
    s += '@';
    s += std::to_string(q.n_past);
  }
  return s;
}

// A step's metadata on both sides: the StepLayout the CPU ops read and its device copy.
class StepPair {
 public:
  StepPair(const Context& ctx, const std::vector<Seq>& seqs, const std::vector<int32_t>& slots)
      : host_(layout(seqs, slots)),
        positions_(ctx, host_.positions),
        token_seq_(ctx, host_.token_seq),
        begins_(ctx, begins(seqs)),
        slots_(ctx, slots) {
    dev_.n_tokens = host_.n_tokens();
    dev_.n_seqs = host_.n_seqs();
    dev_.positions = positions_.get();
    dev_.token_seq = token_seq_.get();
    dev_.seq_begin = begins_.get();
    dev_.state_slots = slots_.get();
  }
  const StepLayout& host() const { return host_; }
  const kernels::StepDev& dev() const { return dev_; }
  int64_t n_tokens() const { return host_.n_tokens(); }

 private:
  static StepLayout layout(const std::vector<Seq>& seqs, const std::vector<int32_t>& slots) {
    StepLayout h;
    h.block_size = 16;
    h.max_blocks = 1;
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int32_t i = 0; i < seqs[s].n_tokens; ++i) {
        h.tokens.push_back(0);
        h.positions.push_back(seqs[s].n_past + i);
        h.slots.push_back(0);
        h.token_seq.push_back(static_cast<int32_t>(s));
      }
      h.block_tables.push_back(0);
      h.max_context = std::max(h.max_context, seqs[s].n_past + seqs[s].n_tokens);
    }
    h.state_slots = slots;
    return h;
  }
  static std::vector<int32_t> begins(const std::vector<Seq>& seqs) {
    std::vector<int32_t> b = {0};
    for (const Seq& s : seqs) b.push_back(b.back() + s.n_tokens);
    return b;
  }

  StepLayout host_;
  Dev<int32_t> positions_, token_seq_, begins_, slots_;
  kernels::StepDev dev_;
};

std::vector<int32_t> shuffled_slots(Context& ctx, size_t n_seqs, int32_t n_slots) {
  std::vector<int32_t> all(static_cast<size_t>(n_slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), ctx.rng());
  return {all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_seqs)};
}

std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

std::unique_ptr<Ops> cpu_ops() {
  return ops_cpu_create(CpuOpsOptions{});
}

// ---- ssm_conv

// teeth: even variants start the GPU from a state 0.5 off in the carried sequences' slots, odd
// ones reverse each channel's taps.
void check_conv(Context& ctx, int64_t dim, int kernel, const std::vector<Seq>& seqs, int variant) {
  const int64_t h = kernel - 1;
  const int32_t n_slots = static_cast<int32_t>(seqs.size()) + 2;
  const std::vector<int32_t> slots = shuffled_slots(ctx, seqs.size(), n_slots);
  const StepPair step(ctx, seqs, slots);
  const int64_t n = step.n_tokens();
  const std::vector<float> x = ctx.uniform(n * dim), w = ctx.uniform(dim * kernel, -0.7f, 0.7f);
  const std::vector<float> state = ctx.uniform(n_slots * h * dim);  // fresh slots too: ignored
  std::vector<float> ref_y(n * dim), ref_state = state;
  auto cpu = cpu_ops();
  cpu->step_begin(step.host());
  cpu->ssm_conv({ref_state.data(), nullptr, n_slots, h * dim, 0}, x.data(), dim, kernel, w.data(),
                ref_y.data());
  std::vector<float> gpu_state = state, gpu_w = w;
  if (ctx.teeth() && variant % 2 == 0) {
    for (size_t s = 0; s < seqs.size(); ++s)
      if (seqs[s].n_past > 0)
        for (int64_t i = 0; i < h * dim; ++i) gpu_state[slots[s] * h * dim + i] += 0.5f;
  } else if (ctx.teeth()) {
    for (auto c = gpu_w.begin(); c != gpu_w.end(); c += kernel) std::reverse(c, c + kernel);
  }
  Dev<float> dx(ctx, x), dw(ctx, gpu_w), dstate(ctx, gpu_state), dy(n * dim);
  dy.poison(ctx);
  kernels::ssm_conv(step.dev(), dstate.get(), dx.get(), dim, kernel, dw.get(), dy.get(),
                    ctx.stream());
  ctx.sync();
  const double err = std::max(row_rel_max_error(dy.download(ctx), widen(ref_y), dim),
                              row_rel_max_error(dstate.download(ctx), widen(ref_state), dim));
  ctx.add({"ssm_conv", shape_str({dim, kernel}) + " " + seqs_str(seqs), "f32", "row-rel", err,
           kConvTol,
           !ctx.teeth()       ? ""
           : variant % 2 == 0 ? "carried state 0.5 off"
                              : "conv taps reversed"});
}

// ---- gated_delta_rule

struct DeltaInputs {
  std::vector<float> qkv, a, b, A, dt_bias, state;
};

DeltaInputs delta_inputs(Context& ctx, const DeltaNetParams& p, int64_t n, int32_t n_slots) {
  const int64_t row = 2 * int64_t{p.n_k_heads} * p.k_dim + int64_t{p.n_v_heads} * p.v_dim;
  DeltaInputs in;
  in.qkv = ctx.uniform(n * row);
  in.a = ctx.uniform(n * p.n_v_heads, -2.0f, 2.0f);
  in.b = ctx.uniform(n * p.n_v_heads, -3.0f, 3.0f);
  in.A = ctx.uniform(p.n_v_heads, -1.5f, -0.05f);  // -exp(A_log): decays from ~0.1 to ~0.99
  in.dt_bias = ctx.uniform(p.n_v_heads);
  in.state = ctx.uniform(int64_t{n_slots} * p.n_v_heads * p.k_dim * p.v_dim, -0.5f, 0.5f);
  return in;
}

kernels::DeltaRuleShape shape_of(const DeltaNetParams& p) {
  return {p.n_k_heads, p.n_v_heads, p.k_dim, p.v_dim};
}

// Runs the kernel on one step from and into `state` (device), returning the outputs.
std::vector<float> run_delta(Context& ctx, const StepPair& step, const DeltaNetParams& p,
                             const DeltaInputs& in, Dev<float>& state, bool swap_ab = false,
                             kernels::DeltaRuleKernel kernel = kernels::DeltaRuleKernel::auto_) {
  Dev<float> dqkv(ctx, in.qkv), da(ctx, in.a), db(ctx, in.b), dA(ctx, in.A), ddt(ctx, in.dt_bias);
  Dev<float> dout(step.n_tokens() * p.n_v_heads * p.v_dim);
  dout.poison(ctx);
  kernels::gated_delta_rule(step.dev(), state.get(), dqkv.get(), swap_ab ? db.get() : da.get(),
                            swap_ab ? da.get() : db.get(), dA.get(), ddt.get(), shape_of(p),
                            dout.get(), ctx.stream(), kernel);
  ctx.sync();
  return dout.download(ctx);
}

// teeth: even variants start the GPU from a state whose first entry of every head is 0.25 off,
// odd ones swap the a and b projections.
void check_delta(Context& ctx, const DeltaNetParams& p, const std::vector<Seq>& seqs, int variant) {
  const int32_t n_slots = static_cast<int32_t>(seqs.size()) + 1;
  const std::vector<int32_t> slots = shuffled_slots(ctx, seqs.size(), n_slots);
  const StepPair step(ctx, seqs, slots);
  const int64_t n = step.n_tokens(), head = int64_t{p.k_dim} * p.v_dim;
  const DeltaInputs in = delta_inputs(ctx, p, n, n_slots);
  std::vector<float> ref_out(n * p.n_v_heads * p.v_dim), ref_state = in.state;
  auto cpu = cpu_ops();
  cpu->step_begin(step.host());
  cpu->gated_delta_rule({nullptr, ref_state.data(), n_slots, 0, p.n_v_heads * head}, in.qkv.data(),
                        in.a.data(), in.b.data(), in.A.data(), in.dt_bias.data(), p,
                        ref_out.data());
  std::vector<float> gpu_state = in.state;
  const bool perturb = ctx.teeth() && variant % 2 == 0;
  if (perturb)
    for (int64_t hs = 0; hs < int64_t{n_slots} * p.n_v_heads; ++hs) gpu_state[hs * head] += 0.25f;
  Dev<float> dstate(ctx, gpu_state);
  const std::vector<float> out = run_delta(ctx, step, p, in, dstate, ctx.teeth() && !perturb);
  const double err =
      std::max(row_rel_max_error(out, widen(ref_out), int64_t{p.n_v_heads} * p.v_dim),
               row_rel_max_error(dstate.download(ctx), widen(ref_state), head));
  ctx.add({"gated_delta_rule",
           shape_str({p.n_k_heads, p.n_v_heads, p.k_dim, p.v_dim}) + " " + seqs_str(seqs), "f32",
           "row-rel", err, kDeltaTol,
           !ctx.teeth() ? ""
           : perturb    ? "initial state 0.25 off"
                        : "a and b swapped"});
}

// Every kernel choice (token, chunk1..8) on the same step, inputs and state: outputs and final
// state bit-identical to the token kernel's (the one the chunk kernels replaced for prefill).
// teeth: the chunk kernels get the last token's a gate 0.01 off (a later chunk's gates when the
// last sequence is long).
void check_delta_kernels(Context& ctx, const DeltaNetParams& p, const std::vector<Seq>& seqs) {
  using kernels::DeltaRuleKernel;
  const int32_t n_slots = static_cast<int32_t>(seqs.size()) + 1;
  const StepPair step(ctx, seqs, shuffled_slots(ctx, seqs.size(), n_slots));
  const DeltaInputs in = delta_inputs(ctx, p, step.n_tokens(), n_slots);
  Dev<float> ref_state(ctx, in.state);
  const std::vector<float> ref_out =
      run_delta(ctx, step, p, in, ref_state, false, DeltaRuleKernel::token);
  const std::vector<float> ref_st = ref_state.download(ctx);
  DeltaInputs changed = in;
  // (An absolute change: a relative one vanishes for an a near zero, which a random draw from
  // [-2, 2] gives now and then: 0.1% of it left every bit as it was in one run of the forty-second
  // round.)
  if (ctx.teeth()) changed.a.back() += 0.01f;
  double mismatches = 0.0;
  for (DeltaRuleKernel k : {DeltaRuleKernel::chunk1, DeltaRuleKernel::chunk2,
                            DeltaRuleKernel::chunk4, DeltaRuleKernel::chunk8}) {
    Dev<float> state(ctx, in.state);
    mismatches += bit_mismatches(ref_out, run_delta(ctx, step, p, changed, state, false, k));
    mismatches += bit_mismatches(ref_st, state.download(ctx));
  }
  ctx.add({"gated_delta_rule kernels",
           shape_str({p.n_k_heads, p.n_v_heads, p.k_dim, p.v_dim}) + " " + seqs_str(seqs) +
               " chunk1,2,4,8 vs token",
           "f32", "bits", mismatches, 0.0, ctx.teeth() ? "last token's a gate 0.01 off" : ""});
}

// The rows [first, first + count) of a [rows x width] array.
std::vector<float> rows_of(const std::vector<float>& v, int64_t width, int64_t first,
                           int64_t count) {
  return {v.begin() + first * width, v.begin() + (first + count) * width};
}

// Sequence X (n_past > 0: it carries state) alone in slot 0; in a batch between two others, in
// slot 2; and split over two steps: its outputs and final state bit-identical in all three.
// teeth: one q input of the batched X 0.1% off.
void check_delta_invariance(Context& ctx, const DeltaNetParams& p, Seq x_seq) {
  const int64_t row = 2 * int64_t{p.n_k_heads} * p.k_dim + int64_t{p.n_v_heads} * p.v_dim;
  const int64_t ab_row = p.n_v_heads, out_row = int64_t{p.n_v_heads} * p.v_dim;
  const int64_t slot_floats = out_row * p.k_dim, L = x_seq.n_tokens;
  const Seq before{3, 0}, after{5, 11};
  const int64_t nb = before.n_tokens, nt = nb + L + after.n_tokens;
  DeltaInputs batch = delta_inputs(ctx, p, nt, 3);
  // X's slot content is the same in both runs: the batch's slot 2 is copied to the lone slot 0.
  const std::vector<float> x_state = rows_of(batch.state, slot_floats, 2, 1);
  DeltaInputs alone = batch;
  alone.qkv = rows_of(batch.qkv, row, nb, L);
  alone.a = rows_of(batch.a, ab_row, nb, L);
  alone.b = rows_of(batch.b, ab_row, nb, L);
  alone.state = x_state;
  if (ctx.teeth()) batch.qkv[nb * row] *= 1.001f;
  Dev<float> s_batch(ctx, batch.state), s_alone(ctx, x_state), s_split(ctx, x_state);
  const StepPair step_batch(ctx, {before, x_seq, after}, {1, 2, 0});
  const StepPair step_alone(ctx, {x_seq}, {0});
  const std::vector<float> o_batch =
      rows_of(run_delta(ctx, step_batch, p, batch, s_batch), out_row, nb, L);
  const std::vector<float> o_alone = run_delta(ctx, step_alone, p, alone, s_alone);
  // Split: the first L1 tokens, then the rest from the state the first step left.
  const int64_t L1 = L / 3;
  std::vector<float> o_split;
  for (const auto& [first, count] : {std::pair{int64_t{0}, L1}, std::pair{L1, L - L1}}) {
    DeltaInputs part = alone;
    part.qkv = rows_of(alone.qkv, row, first, count);
    part.a = rows_of(alone.a, ab_row, first, count);
    part.b = rows_of(alone.b, ab_row, first, count);
    const Seq piece{static_cast<int32_t>(count), x_seq.n_past + static_cast<int32_t>(first)};
    const StepPair step(ctx, {piece}, {0});
    const std::vector<float> o = run_delta(ctx, step, p, part, s_split);
    o_split.insert(o_split.end(), o.begin(), o.end());
  }
  const std::vector<float> st_alone = s_alone.download(ctx);
  const double mismatches =
      bit_mismatches(o_alone, o_batch) + bit_mismatches(o_alone, o_split) +
      bit_mismatches(st_alone, rows_of(s_batch.download(ctx), slot_floats, 2, 1)) +
      bit_mismatches(st_alone, s_split.download(ctx));
  ctx.add({"gated_delta_rule invariance",
           shape_str({p.n_k_heads, p.n_v_heads, p.k_dim, p.v_dim}) + " alone/batch/split " +
               std::to_string(L),
           "f32", "bits", mismatches, 0.0, ctx.teeth() ? "one q input 0.1% off in the batch" : ""});
}

// The conv's invariance, as check_delta_invariance: X alone in slot 0, in a batch in slot 2, and
// split over two steps. teeth: one input of the batched X 0.1% off.
void check_conv_invariance(Context& ctx, int64_t dim, int kernel, Seq x_seq) {
  const int64_t h = kernel - 1, L = x_seq.n_tokens;
  const Seq before{2, 0}, after{1, 40};
  const int64_t nb = before.n_tokens, nt = nb + L + after.n_tokens;
  std::vector<float> x = ctx.uniform(nt * dim);
  const std::vector<float> w = ctx.uniform(dim * kernel, -0.7f, 0.7f);
  const std::vector<float> state = ctx.uniform(3 * h * dim);
  const std::vector<float> x_state = rows_of(state, h * dim, 2, 1);
  const std::vector<float> x_alone = rows_of(x, dim, nb, L);
  if (ctx.teeth()) x[nb * dim + dim / 2] *= 1.001f;
  Dev<float> dw(ctx, w), s_batch(ctx, state), s_alone(ctx, x_state), s_split(ctx, x_state);
  const auto run = [&](const StepPair& step, const std::vector<float>& in, Dev<float>& st) {
    Dev<float> dx(ctx, in), dy(step.n_tokens() * dim);
    dy.poison(ctx);
    kernels::ssm_conv(step.dev(), st.get(), dx.get(), dim, kernel, dw.get(), dy.get(),
                      ctx.stream());
    ctx.sync();
    return dy.download(ctx);
  };
  const std::vector<float> y_batch =
      rows_of(run(StepPair(ctx, {before, x_seq, after}, {1, 2, 0}), x, s_batch), dim, nb, L);
  const std::vector<float> y_alone = run(StepPair(ctx, {x_seq}, {0}), x_alone, s_alone);
  // Split so that the second piece is shorter than the window: its state mixes old and new.
  const int64_t L2 = std::min<int64_t>(h > 1 ? h - 1 : 1, L - 1), L1 = L - L2;
  std::vector<float> y_split = run(StepPair(ctx, {{static_cast<int32_t>(L1), x_seq.n_past}}, {0}),
                                   rows_of(x_alone, dim, 0, L1), s_split);
  const std::vector<float> y2 =
      run(StepPair(ctx, {{static_cast<int32_t>(L2), x_seq.n_past + static_cast<int32_t>(L1)}}, {0}),
          rows_of(x_alone, dim, L1, L2), s_split);
  y_split.insert(y_split.end(), y2.begin(), y2.end());
  const std::vector<float> st_alone = s_alone.download(ctx);
  const double mismatches =
      bit_mismatches(y_alone, y_batch) + bit_mismatches(y_alone, y_split) +
      bit_mismatches(st_alone, rows_of(s_batch.download(ctx), h * dim, 2, 1)) +
      bit_mismatches(st_alone, s_split.download(ctx));
  ctx.add({"ssm_conv invariance",
           shape_str({dim, kernel}) + " alone/batch/split " + std::to_string(L), "f32", "bits",
           mismatches, 0.0, ctx.teeth() ? "one input 0.1% off in the batch" : ""});
}

// ---- rms_norm_gated, sigmoid_mul

// teeth: eps 1e-3 instead of 1e-6. in_place: y written over x, as the delta-net block does.
void check_norm_gated(Context& ctx, int64_t rows, int64_t dim, bool in_place) {
  const std::vector<float> x = ctx.uniform(rows * dim), z = ctx.uniform(rows * dim, -4.0f, 4.0f);
  const std::vector<float> w = ctx.uniform(dim, 0.5f, 1.5f);
  std::vector<float> ref(rows * dim);
  cpu_ops()->rms_norm_gated(x.data(), w.data(), z.data(), rows, dim, kEps, ref.data());
  Dev<float> dx(ctx, x), dz(ctx, z), dw(ctx, w), dy(rows * dim);
  dy.poison(ctx);
  float* y = in_place ? dx.get() : dy.get();
  kernels::rms_norm_gated(dx.get(), dw.get(), dz.get(), rows, dim, ctx.teeth() ? 1e-3f : kEps, y,
                          ctx.stream());
  ctx.sync();
  const std::vector<float> got = in_place ? dx.download(ctx) : dy.download(ctx);
  ctx.add({"rms_norm_gated", shape_str({rows, dim}) + (in_place ? " in place" : ""), "f32", "rel",
           rel_error(got, widen(ref), 1e-3), kGatedNormTol,
           ctx.teeth() ? "eps 1e-3 instead of 1e-6" : ""});
}

// Row r alone equals row r inside a call over many rows, bit for bit. teeth: one input of the
// batched row 0.1% off.
void check_norm_gated_invariance(Context& ctx, int64_t rows, int64_t dim) {
  std::vector<float> x = ctx.uniform(rows * dim);
  const std::vector<float> z = ctx.uniform(rows * dim, -4.0f, 4.0f), w = ctx.uniform(dim);
  const int64_t r = rows / 2;
  const std::vector<float> x1 = rows_of(x, dim, r, 1), z1 = rows_of(z, dim, r, 1);
  if (ctx.teeth()) x[r * dim] *= 1.001f;
  Dev<float> dx(ctx, x), dz(ctx, z), dw(ctx, w), dy(rows * dim), dx1(ctx, x1), dz1(ctx, z1),
      dy1(dim);
  kernels::rms_norm_gated(dx.get(), dw.get(), dz.get(), rows, dim, kEps, dy.get(), ctx.stream());
  kernels::rms_norm_gated(dx1.get(), dw.get(), dz1.get(), 1, dim, kEps, dy1.get(), ctx.stream());
  ctx.sync();
  ctx.add({"rms_norm_gated invariance", "row alone vs " + shape_str({rows, dim}), "f32", "bits",
           bit_mismatches(rows_of(dy.download(ctx), dim, r, 1), dy1.download(ctx)), 0.0,
           ctx.teeth() ? "one input 0.1% off in the batch" : ""});
}

// teeth: the gate negated (sigmoid(-g) = 1 - sigmoid(g)).
void check_sigmoid_mul(Context& ctx, int64_t n) {
  const std::vector<float> y = ctx.uniform(n, -3.0f, 3.0f), g = ctx.uniform(n, -8.0f, 8.0f);
  std::vector<float> ref = y, gpu_g = g;
  cpu_ops()->sigmoid_mul(ref.data(), g.data(), n);
  if (ctx.teeth())
    for (float& v : gpu_g) v = -v;
  Dev<float> dy(ctx, y), dg(ctx, gpu_g);
  kernels::sigmoid_mul(dy.get(), dg.get(), n, ctx.stream());
  ctx.sync();
  ctx.add({"sigmoid_mul", shape_str({n}), "f32", "rel",
           rel_error(dy.download(ctx), widen(ref), 1e-3), kSigmoidTol,
           ctx.teeth() ? "gate negated" : ""});
}

}  // namespace

void check_ssm(Context& ctx) {
  // Qwen3.5-9B-like: 16 key heads, 32 value heads, both 128 wide; conv over 2 x 16 x 128 + 32 x
  // 128 = 8192 channels, kernel 4. The small shapes are the test fixture's (2 k / 4 v heads of 16
  // and 24) and odd sizes: a k_dim that is not a multiple of 32, 256-wide keys.
  const DeltaNetParams big{16, 32, 128, 128}, fixture{2, 4, 16, 24}, odd{1, 3, 40, 20},
      wide{2, 2, 256, 64}, mid{4, 8, 64, 96};
  // n_tokens@n_past: decodes with state, fresh prompts, chunks shorter and longer than the window.
  const std::vector<Seq> mixed = {{1, 37}, {5, 0}, {2, 1}, {300, 64}};
  if (ctx.wants("ssm_conv")) {
    check_conv(ctx, 8192, 4, mixed, 0);
    check_conv(ctx, 8192, 4, {{1, 9}, {1, 0}, {1, 2}}, 1);  // a decode step
    check_conv(ctx, 160, 4, {{3, 0}, {1, 2}, {7, 10}}, 2);
    check_conv(ctx, 1000, 3, {{1, 1}, {6, 4}}, 3);
    check_conv_invariance(ctx, 8192, 4, {40, 17});
    check_conv_invariance(ctx, 160, 4, {9, 3});
  }
  if (ctx.wants("gated_delta_rule")) {
    check_delta(ctx, big, {{1, 50}, {1, 0}, {17, 3}, {64, 0}}, 0);
    check_delta(ctx, big, {{1, 20}, {1, 7}, {1, 1}, {1, 300}}, 1);  // a decode step
    check_delta(ctx, fixture, {{5, 0}, {1, 7}, {3, 2}}, 2);
    check_delta(ctx, odd, {{4, 9}, {2, 0}}, 3);
    check_delta(ctx, wide, {{6, 1}, {3, 0}}, 4);
    check_delta(ctx, mid, {{1, 5}, {33, 12}}, 5);
    // Several 32-token chunks of batched scalars, the last one partial, a fresh one mid-step.
    check_delta(ctx, big, {{100, 0}, {1, 9}, {70, 33}}, 6);
    check_delta(ctx, odd, {{65, 2}, {31, 0}}, 7);
    // The same bits from every kernel: long and short sequences, decode steps, odd shapes.
    check_delta_kernels(ctx, big, {{1, 50}, {1, 0}, {100, 3}, {64, 0}, {33, 7}});
    check_delta_kernels(ctx, big, {{1, 20}, {1, 7}, {1, 1}, {1, 300}});
    check_delta_kernels(ctx, fixture, {{5, 0}, {1, 7}, {70, 2}});
    check_delta_kernels(ctx, odd, {{4, 9}, {2, 0}, {97, 1}});
    check_delta_kernels(ctx, wide, {{6, 1}, {40, 0}});
    check_delta_kernels(ctx, mid, {{1, 5}, {33, 12}, {32, 0}});
    check_delta_kernels(ctx, {1, 1, 1, 1}, {{3, 0}, {40, 2}});
    check_delta_invariance(ctx, big, {24, 30});
    check_delta_invariance(ctx, fixture, {10, 4});
  }
  if (ctx.wants("rms_norm_gated")) {
    check_norm_gated(ctx, 37 * 32, 128, false);
    check_norm_gated(ctx, 12, 24, true);
    check_norm_gated(ctx, 5, 1000, false);
    check_norm_gated_invariance(ctx, 301, 128);
  }
  if (ctx.wants("sigmoid_mul")) {
    check_sigmoid_mul(ctx, 1);
    check_sigmoid_mul(ctx, 37 * 16 * 256);
  }
}

}  // namespace memra::kernel_check
