// Paged attention against a double reference: head dims 64/128/256, GQA 1..16, window, softcap,
// f32, f16 and bf16 caches, steps that mix fresh prefills, prefill chunks with n_past > 0 and
// decode tokens at contexts crossing many splits, random non-contiguous block tables. The cache is
// written from the host (independent of kv_store); unused slots hold NaN, so a read outside a
// query's range shows. Bitwise invariances: split plan == one_pass plan, and a query alone in
// its own step == the same query inside the mixed step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "check.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

constexpr double kAttnTol = 1e-5;  // measured ~1e-6 on an H200

struct Seq {
  int32_t n_past, n_new;
};

struct Case {
  int n_heads, n_kv_heads, head_dim;
  DType cache;
  int32_t window;
  float softcap;
  int32_t block_size;
  std::vector<Seq> seqs;
};

// Host image of one step: metadata, q, and the cache contents (as the f32 values the kernel
// reads, i.e. already rounded to bf16 for a bf16 cache).
struct Step {
  int32_t n_tokens = 0, max_blocks = 0, max_context = 0, n_blocks = 0;
  std::vector<int32_t> positions, token_seq, block_tables;
  std::vector<float> q;  // [n_tokens x ldq]
  int64_t ldq = 0;
  std::vector<float> k, v;  // [n_blocks * block_size x n_kv_heads x head_dim], NaN when unused
};

Step make_step(Context& ctx, const Case& c) {
  Step s;
  const int32_t bs = c.block_size;
  for (const Seq& q : c.seqs) {
    s.max_blocks = std::max(s.max_blocks, (q.n_past + q.n_new + bs - 1) / bs);
    s.max_context = std::max(s.max_context, q.n_past + q.n_new);
  }
  int32_t used = 0;
  for (const Seq& q : c.seqs) used += (q.n_past + q.n_new + bs - 1) / bs;
  s.n_blocks = used + 5;  // spare blocks stay NaN
  std::vector<int32_t> ids(s.n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), ctx.rng());
  const int64_t row = int64_t{c.n_kv_heads} * c.head_dim;
  s.k.assign(int64_t{s.n_blocks} * bs * row, NAN);
  s.v.assign(s.k.size(), NAN);
  s.block_tables.assign(c.seqs.size() * s.max_blocks, -1);
  size_t next = 0;
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const int32_t len = c.seqs[i].n_past + c.seqs[i].n_new;
    for (int32_t b = 0; b < (len + bs - 1) / bs; ++b)
      s.block_tables[i * s.max_blocks + b] = ids[next++];
    for (int32_t p = 0; p < len; ++p) {
      const int64_t slot = int64_t{s.block_tables[i * s.max_blocks + p / bs]} * bs + p % bs;
      std::vector<float> kr = ctx.uniform(row), vr = ctx.uniform(row);
      for (int64_t e = 0; e < row; ++e) {
        if (c.cache == DType::bf16) {
          kr[e] = bf16_to_f32(f32_to_bf16(kr[e]));
          vr[e] = bf16_to_f32(f32_to_bf16(vr[e]));
        } else if (c.cache == DType::f16) {
          kr[e] = f16_to_f32(f32_to_f16(kr[e]));
          vr[e] = f16_to_f32(f32_to_f16(vr[e]));
        }
        s.k[slot * row + e] = kr[e];
        s.v[slot * row + e] = vr[e];
      }
    }
    for (int32_t j = 0; j < c.seqs[i].n_new; ++j) {
      s.positions.push_back(c.seqs[i].n_past + j);
      s.token_seq.push_back(static_cast<int32_t>(i));
    }
  }
  s.n_tokens = static_cast<int32_t>(s.positions.size());
  s.ldq = int64_t{c.n_heads} * c.head_dim + 4;
  s.q = ctx.uniform(s.n_tokens * s.ldq, -2.0f, 2.0f);  // peaked enough to make softmax matter
  return s;
}

std::vector<double> attention_ref(const Case& c, const Step& s, float scale) {
  const int d = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const int64_t row = int64_t{c.n_kv_heads} * d;
  std::vector<double> out(int64_t{s.n_tokens} * c.n_heads * d);
  std::vector<double> w, acc(d);
  for (int32_t t = 0; t < s.n_tokens; ++t) {
    const int32_t p = s.positions[t];
    const int32_t lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
    const int32_t* table = s.block_tables.data() + int64_t{s.token_seq[t]} * s.max_blocks;
    for (int h = 0; h < c.n_heads; ++h) {
      const float* q = s.q.data() + t * s.ldq + int64_t{h} * d;
      const int64_t head_off = int64_t{h / group} * d;
      w.assign(p - lo + 1, 0.0);
      double mx = -INFINITY;
      for (int32_t j = lo; j <= p; ++j) {
        const int64_t slot = int64_t{table[j / c.block_size]} * c.block_size + j % c.block_size;
        const float* k = s.k.data() + slot * row + head_off;
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += double{q[e]} * k[e];
        double sc = dot * scale;
        if (c.softcap > 0) sc = c.softcap * std::tanh(sc / c.softcap);
        w[j - lo] = sc;
        mx = std::max(mx, sc);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int32_t j = lo; j <= p; ++j) {
        const int64_t slot = int64_t{table[j / c.block_size]} * c.block_size + j % c.block_size;
        const float* v = s.v.data() + slot * row + head_off;
        const double e = std::exp(w[j - lo] - mx);
        sum += e;
        for (int x = 0; x < d; ++x) acc[x] += e * v[x];
      }
      double* o = out.data() + (int64_t{t} * c.n_heads + h) * d;
      for (int x = 0; x < d; ++x) o[x] = acc[x] / sum;
    }
  }
  return out;
}

// Device copies of a step; run() launches attention with a given plan and returns the output.
class DevStep {
 public:
  DevStep(Context& ctx, const Case& c, const Step& s)
      : ctx_(ctx),
        c_(c),
        s_(s),
        pos_(ctx, s.positions),
        seq_(ctx, s.token_seq),
        tables_(ctx, s.block_tables),
        q_(ctx, s.q),
        kc_(cache_bytes()),
        vc_(cache_bytes()),
        out_(int64_t{s.n_tokens} * c.n_heads * c.head_dim) {
    upload_cache(kc_, s.k);
    upload_cache(vc_, s.v);
  }

  // Overrides for --teeth: positions / window / softcap / q as the GPU sees them.
  std::vector<float> run(kernels::AttentionPlan plan, float scale, const std::vector<int32_t>* pos,
                         int32_t window, float softcap, const std::vector<float>* q) {
    if (pos) pos_.upload(ctx_, *pos);
    if (q) q_.upload(ctx_, *q);
    kernels::PagedKv kv;
    kv.k = kc_.get();
    kv.v = vc_.get();
    kv.dtype = c_.cache;
    kv.block_size = c_.block_size;
    kv.n_kv_heads = c_.n_kv_heads;
    kv.head_dim = c_.head_dim;
    kernels::StepDev step;
    step.n_tokens = s_.n_tokens;
    step.n_seqs = static_cast<int32_t>(s_.block_tables.size() / s_.max_blocks);
    step.max_blocks = s_.max_blocks;
    step.positions = pos_.get();
    step.token_seq = seq_.get();
    step.block_tables = tables_.get();
    step.max_context = s_.max_context;
    kernels::AttentionArgs args;
    args.n_heads = c_.n_heads;
    args.scale = scale;
    args.softcap = softcap;
    args.window = window;
    args.plan = plan;
    Dev<uint8_t> scratch(kernels::attention_scratch_bytes(step, c_.n_heads, c_.head_dim));
    out_.poison(ctx_);
    kernels::attention(kv, step, q_.get(), s_.ldq, args, out_.get(), scratch.get(), ctx_.stream());
    ctx_.sync();
    if (pos) pos_.upload(ctx_, s_.positions);
    if (q) q_.upload(ctx_, s_.q);
    return out_.download(ctx_);
  }

 private:
  size_t cache_bytes() const { return s_.k.size() * (c_.cache == DType::f32 ? 4 : 2); }
  void upload_cache(Dev<uint8_t>& dst, const std::vector<float>& values) {
    std::vector<uint8_t> bytes(cache_bytes());
    if (c_.cache != DType::f32) {
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = c_.cache == DType::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    } else {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    dst.upload(ctx_, bytes);
  }

  Context& ctx_;
  const Case& c_;
  const Step& s_;
  Dev<int32_t> pos_, seq_, tables_;
  Dev<float> q_;
  Dev<uint8_t> kc_, vc_;
  Dev<float> out_;
};

std::string case_shape(const Case& c, const Step& s) {
  std::string shape = std::to_string(s.n_tokens) + "tok h" + std::to_string(c.n_heads) + "/" +
                      std::to_string(c.n_kv_heads) + " d" + std::to_string(c.head_dim) + " ctx" +
                      std::to_string(s.max_context);
  if (c.window > 0) shape += " w" + std::to_string(c.window);
  if (c.softcap > 0) shape += " cap";
  return shape;
}

// The only query of a step made of token t of s: same sequence, same block table.
Step single_token_step(const Step& s, int32_t t) {
  Step one = s;
  const int32_t seq = s.token_seq[t];
  one.n_tokens = 1;
  one.positions = {s.positions[t]};
  one.token_seq = {0};
  one.block_tables.assign(s.block_tables.begin() + int64_t{seq} * s.max_blocks,
                          s.block_tables.begin() + int64_t{seq + 1} * s.max_blocks);
  one.max_context = s.positions[t] + 1;
  one.q.assign(s.q.begin() + t * s.ldq, s.q.begin() + (t + 1) * s.ldq);
  return one;
}

void check_case(Context& ctx, const Case& c) {
  const Step s = make_step(ctx, c);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::string shape = case_shape(c, s), dtype(dtype_name(c.cache));
  DevStep dev(ctx, c, s);
  const std::vector<double> ref = attention_ref(c, s, scale);
  using kernels::AttentionPlan;
  const bool teeth = ctx.teeth();
  // Accuracy of each plan against the reference; teeth: window - 1, softcap dropped, or every
  // query one position early (its last key missing).
  std::vector<int32_t> early = s.positions;
  for (int32_t& p : early) p = std::max(0, p - 1);
  const bool teeth_window = teeth && c.window > 0,
             teeth_cap = teeth && !teeth_window && c.softcap > 0;
  const bool teeth_pos = teeth && !teeth_window && !teeth_cap;
  const std::string broken = teeth_window ? "window one key short"
                             : teeth_cap  ? "softcap dropped"
                             : teeth_pos  ? "position off by one"
                                          : "";
  std::vector<float> by_plan[2];
  const AttentionPlan plans[2] = {AttentionPlan::split, AttentionPlan::one_pass};
  for (int i = 0; i < 2; ++i) {
    by_plan[i] =
        dev.run(plans[i], scale, teeth_pos ? &early : nullptr,
                teeth_window ? c.window - 1 : c.window, teeth_cap ? 0.0f : c.softcap, nullptr);
    ctx.add({i == 0 ? "attention split" : "attention one_pass", shape, dtype, "row-rel",
             row_rel_max_error(by_plan[i], ref, c.head_dim), kAttnTol, broken});
  }
  // The two plans agree bit for bit (teeth: one_pass sees one q element changed).
  std::vector<float> q_bent = s.q;
  q_bent[s.q.size() / 2] *= 1.01f;
  const std::vector<float> one_pass = dev.run(AttentionPlan::one_pass, scale, nullptr, c.window,
                                              c.softcap, teeth ? &q_bent : nullptr);
  const std::vector<float> split =
      dev.run(AttentionPlan::split, scale, nullptr, c.window, c.softcap, nullptr);
  ctx.add({"attention split==1pass", shape, dtype, "bits", bit_mismatches(split, one_pass), 0.0,
           teeth ? "one q element 1% off in one run" : ""});
  // The token with the longest context alone (automatic plan: split when it spans several)
  // equals its row in the mixed step.
  const int32_t t = static_cast<int32_t>(std::max_element(s.positions.begin(), s.positions.end()) -
                                         s.positions.begin());
  const Step one = single_token_step(s, t);
  DevStep dev_one(ctx, c, one);
  std::vector<float> one_q = one.q;
  one_q[0] *= 1.01f;
  const std::vector<float> alone = dev_one.run(AttentionPlan::automatic, scale, nullptr, c.window,
                                               c.softcap, teeth ? &one_q : nullptr);
  const int64_t width = int64_t{c.n_heads} * c.head_dim;
  const std::vector<float> in_step(split.begin() + t * width, split.begin() + (t + 1) * width);
  ctx.add({"attention alone==in step", shape, dtype, "bits", bit_mismatches(alone, in_step), 0.0,
           teeth ? "the lone query 1% off in one element" : ""});
}

}  // namespace

void check_attention(Context& ctx) {
  if (!ctx.wants("attention")) return;
  const DType bf16 = DType::bf16, f32 = DType::f32, f16 = DType::f16;
  // {heads, kv heads, head_dim, cache, window, softcap, block size, {n_past, n_new}...}
  const Case cases[] = {
      {8, 2, 128, bf16, 0, 0.0f, 16, {{0, 37}, {900, 100}, {300, 1}, {4999, 1}}},
      {4, 4, 64, f32, 300, 0.0f, 16, {{0, 50}, {1200, 3}, {1999, 1}}},
      {4, 2, 256, bf16, 0, 50.0f, 32, {{0, 20}, {700, 1}, {5000, 1}}},
      {8, 1, 128, f32, 1000, 30.0f, 16, {{2990, 5}, {10, 7}}},
      {16, 1, 64, bf16, 0, 0.0f, 64, {{600, 2}, {0, 1}}},   // GQA 16: two blocks per kv head
      {4, 1, 256, f32, 0, 0.0f, 16, {{255, 2}, {511, 1}}},  // split edges
      {3, 1, 32, bf16, 8, 10.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},     // the gate fixtures' shape
      {8, 2, 128, f16, 0, 0.0f, 16, {{0, 37}, {900, 100}, {4999, 1}}},  // the default cache
      {3, 1, 32, f16, 8, 10.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},
  };
  for (const Case& c : cases) check_case(ctx, c);
}

}  // namespace memra::kernel_check
