// Paged attention against a double reference: head dims 16/32/64/128/256/512, GQA 1..16, window,
// softcap, f32, f16, bf16 and fp8 e4m3 caches, block sizes 16/24/32/64, steps that mix fresh
// prefills, prefill chunks with n_past > 0 and decode tokens at contexts crossing chunk (64),
// split (256) and cache-block boundaries, random non-contiguous block tables. The cache is
// written from the host (independent of kv_store); unused slots hold NaN, so a read outside a
// query's range shows. Bitwise invariances: both plans x both block shapes (one query / a tile of
// queries per block) agree; a grid sized for a larger max_context (a CUDA graph's capacity)
// changes nothing; a query alone in its own step, and a prefill chunk alone, equal the same rows
// in the mixed step. 16-bit caches at head_dim 64/128/256 run all of it twice: the tensor-core
// kernel ("mma" in the shape, the default) and the CUDA-core one ("fma",
// AttentionArgs::tensor_cores = false). FP8 caches have the CUDA-core kernel only (tensor_cores
// is ignored for them); two fp8 cases' V spans E4M3's whole range (subnormals to 256), so every
// exponent goes through the kernel's conversion.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "check.h"
#include "core/fp8.h"
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
  bool wide_v = false;  // V elements u x 2^e, e in [-10, 8] (fp8: every exponent, subnormals)
};

// Host image of one step: metadata, q, and the cache contents (as the f32 values the kernel
// reads, i.e. already rounded to bf16 / f16 / e4m3 for such a cache).
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
        if (c.wide_v) vr[e] = std::ldexp(vr[e], ctx.randint(-10, 8));
        if (c.cache == DType::f8_e4m3) {
          kr[e] = e4m3_to_f32(f32_to_e4m3(kr[e]));
          vr[e] = e4m3_to_f32(f32_to_e4m3(vr[e]));
        } else if (c.cache == DType::bf16) {
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
  // One (token, head) an index: each writes only its own output row.
  parallel_for(int64_t{s.n_tokens} * c.n_heads, [&](int64_t th) {
    const auto t = static_cast<int32_t>(th / c.n_heads);
    const int h = static_cast<int>(th % c.n_heads);
    const int32_t p = s.positions[t];
    const int32_t lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
    const int32_t* table = s.block_tables.data() + int64_t{s.token_seq[t]} * s.max_blocks;
    const float* q = s.q.data() + t * s.ldq + int64_t{h} * d;
    const int64_t head_off = int64_t{h / group} * d;
    std::vector<double> w(p - lo + 1, 0.0), acc(d, 0.0);
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
    for (int32_t j = lo; j <= p; ++j) {
      const int64_t slot = int64_t{table[j / c.block_size]} * c.block_size + j % c.block_size;
      const float* v = s.v.data() + slot * row + head_off;
      const double e = std::exp(w[j - lo] - mx);
      sum += e;
      for (int x = 0; x < d; ++x) acc[x] += e * v[x];
    }
    double* o = out.data() + (int64_t{t} * c.n_heads + h) * d;
    for (int x = 0; x < d; ++x) o[x] = acc[x] / sum;
  });
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

  // One launch. The overrides serve --teeth (positions / window / softcap / q as the GPU sees
  // them) and the capacity check (extra_context: the grid and scratch sized for a larger step).
  struct Opts {
    kernels::AttentionPlan plan = kernels::AttentionPlan::automatic;
    kernels::AttentionTile tile = kernels::AttentionTile::automatic;
    const std::vector<int32_t>* pos = nullptr;
    int32_t window = 0;
    float softcap = 0.0f;
    const std::vector<float>* q = nullptr;
    int32_t extra_context = 0;
    bool tensor_cores = true;
  };
  std::vector<float> run(float scale, const Opts& o) {
    const std::vector<int32_t>* pos = o.pos;
    const std::vector<float>* q = o.q;
    if (pos) pos_.upload(ctx_, *pos);
    if (q) q_.upload(ctx_, *q);
    kernels::PagedKv kv;
    kv.k = kc_.get();
    kv.v = vc_.get();
    kv.dtype = c_.cache;
    kv.block_size = c_.block_size;
    kv.n_kv_heads = c_.n_kv_heads;
    kv.head_dim = c_.head_dim;
    kv.n_blocks = s_.n_blocks;
    kernels::StepDev step;
    step.n_tokens = s_.n_tokens;
    step.n_seqs = static_cast<int32_t>(s_.block_tables.size() / s_.max_blocks);
    step.max_blocks = s_.max_blocks;
    step.positions = pos_.get();
    step.token_seq = seq_.get();
    step.block_tables = tables_.get();
    step.max_context = s_.max_context + o.extra_context;
    kernels::AttentionArgs args;
    args.n_heads = c_.n_heads;
    args.scale = scale;
    args.softcap = o.softcap;
    args.window = o.window;
    args.plan = o.plan;
    args.tile = o.tile;
    args.tensor_cores = o.tensor_cores;
    Dev<uint8_t> scratch(kernels::attention_scratch_bytes(step, c_.n_heads, c_.head_dim));
    kernels::attention_scratch_clear(scratch.get(), ctx_.stream());
    out_.poison(ctx_);
    kernels::attention(kv, step, q_.get(), s_.ldq, args, out_.get(), scratch.get(), ctx_.stream());
    ctx_.sync();
    if (pos) pos_.upload(ctx_, s_.positions);
    if (q) q_.upload(ctx_, s_.q);
    return out_.download(ctx_);
  }

 private:
  size_t cache_bytes() const { return s_.k.size() * dtype_traits(c_.cache).type_size; }
  void upload_cache(Dev<uint8_t>& dst, const std::vector<float>& values) {
    std::vector<uint8_t> bytes(cache_bytes());
    if (c_.cache == DType::f8_e4m3) {  // NaN (unused slots) stays NaN: 0x7f
      for (size_t i = 0; i < values.size(); ++i) bytes[i] = f32_to_e4m3(values[i]);
    } else if (c_.cache != DType::f32) {
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

// A step made of tokens [t0, t1) of s, all of one sequence (a decode token alone, or a prefill
// chunk alone): same sequence, same block table.
Step sub_step(const Step& s, int32_t t0, int32_t t1) {
  Step sub = s;
  const int32_t seq = s.token_seq[t0];
  sub.n_tokens = t1 - t0;
  sub.positions.assign(s.positions.begin() + t0, s.positions.begin() + t1);
  sub.token_seq.assign(sub.n_tokens, 0);
  sub.block_tables.assign(s.block_tables.begin() + int64_t{seq} * s.max_blocks,
                          s.block_tables.begin() + int64_t{seq + 1} * s.max_blocks);
  sub.max_context = *std::max_element(sub.positions.begin(), sub.positions.end()) + 1;
  sub.q.assign(s.q.begin() + t0 * s.ldq, s.q.begin() + t1 * s.ldq);
  return sub;
}

// Rows [t0, t1) of a step's output.
std::vector<float> rows_of(const std::vector<float>& out, int64_t width, int32_t t0, int32_t t1) {
  return std::vector<float>(out.begin() + t0 * width, out.begin() + t1 * width);
}

// Rows [t0, t1) of s alone in their own step (automatic plan and block shape) against the same
// rows of the mixed step's output `full` (teeth: the lone step sees one q element 1% off).
double alone_mismatches(Context& ctx, const Case& c, const Step& s, float scale, int32_t t0,
                        int32_t t1, const std::vector<float>& full, bool tensor_cores) {
  const Step sub = sub_step(s, t0, t1);
  DevStep dev(ctx, c, sub);
  std::vector<float> bent = sub.q;
  bent[0] *= 1.01f;
  DevStep::Opts o;
  o.window = c.window;
  o.softcap = c.softcap;
  o.tensor_cores = tensor_cores;
  if (ctx.teeth()) o.q = &bent;
  const int64_t width = int64_t{c.n_heads} * c.head_dim;
  return bit_mismatches(dev.run(scale, o), rows_of(full, width, t0, t1));
}

// Whether attention() has a tensor-core kernel for the case (16-bit caches at head_dim 64, 128,
// 256): those cases run under both arithmetics.
bool has_tensor_cores(const Case& c) {
  return (c.cache == DType::f16 || c.cache == DType::bf16) &&
         (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
}

void check_case(Context& ctx, const Case& c, bool tensor_cores) {
  const Step s = make_step(ctx, c);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::string shape =
      case_shape(c, s) + (has_tensor_cores(c) ? tensor_cores ? " mma" : " fma" : "");
  const std::string dtype(dtype_name(c.cache));
  DevStep dev(ctx, c, s);
  const std::vector<double> ref = attention_ref(c, s, scale);
  using kernels::AttentionPlan;
  using kernels::AttentionTile;
  const bool teeth = ctx.teeth();
  // Accuracy against the reference: split plan with one-query blocks, one_pass with query tiles.
  // Teeth: window - 1, softcap dropped, or every query one position early (its last key missing).
  std::vector<int32_t> early = s.positions;
  for (int32_t& p : early) p = std::max(0, p - 1);
  const bool teeth_window = teeth && c.window > 0,
             teeth_cap = teeth && !teeth_window && c.softcap > 0;
  const bool teeth_pos = teeth && !teeth_window && !teeth_cap;
  const std::string broken = teeth_window ? "window one key short"
                             : teeth_cap  ? "softcap dropped"
                             : teeth_pos  ? "position off by one"
                                          : "";
  const AttentionPlan plans[2] = {AttentionPlan::split, AttentionPlan::one_pass};
  const AttentionTile tiles[2] = {AttentionTile::one_query, AttentionTile::multi_query};
  for (int i = 0; i < 2; ++i) {
    DevStep::Opts o;
    o.plan = plans[i];
    o.tile = tiles[i];
    o.pos = teeth_pos ? &early : nullptr;
    o.window = teeth_window ? c.window - 1 : c.window;
    o.softcap = teeth_cap ? 0.0f : c.softcap;
    o.tensor_cores = tensor_cores;
    ctx.add({i == 0 ? "attention split" : "attention one_pass tiled", shape, dtype, "row-rel",
             row_rel_max_error(dev.run(scale, o), ref, c.head_dim), kAttnTol, broken});
  }
  // Every plan x block shape, and the split plan under a grid sized for 1000 more keys than the
  // step holds, agree bit for bit with the split plan's one-query blocks (teeth: one run sees one
  // q element changed).
  // Bent: the first q element of the token with the longest context (a token at position 0
  // attends to one key, whose V it returns whatever its q).
  std::vector<float> q_bent = s.q;
  {
    const auto longest = std::max_element(s.positions.begin(), s.positions.end());
    const size_t at = static_cast<size_t>(longest - s.positions.begin()) * s.ldq;
    q_bent[at] = q_bent[at] * 1.01f + 0.01f;
  }
  DevStep::Opts base;
  base.window = c.window;
  base.softcap = c.softcap;
  base.tensor_cores = tensor_cores;
  DevStep::Opts o = base;
  o.plan = AttentionPlan::split;
  o.tile = AttentionTile::one_query;
  const std::vector<float> split = dev.run(scale, o);
  // automatic x automatic is what the backend runs: with several sequences and query tiles it
  // splits the step into a launch for the single (decode) tokens and one for the tiles.
  const AttentionPlan all_plans[3] = {AttentionPlan::split, AttentionPlan::one_pass,
                                      AttentionPlan::automatic};
  const AttentionTile all_tiles[3] = {AttentionTile::one_query, AttentionTile::multi_query,
                                      AttentionTile::automatic};
  double mismatches = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i == 0 && j == 0) continue;
      o.plan = all_plans[i];
      o.tile = all_tiles[j];
      o.q = teeth && i == 1 && j == 1 ? &q_bent : nullptr;
      mismatches += bit_mismatches(split, dev.run(scale, o));
    }
  }
  ctx.add({"attention plans x tiles", shape, dtype, "bits", mismatches, 0.0,
           teeth ? "one q element 1% off in one run" : ""});
  mismatches = 0;
  for (int j = 0; j < 2; ++j) {
    o = base;
    o.plan = AttentionPlan::split;
    o.tile = tiles[j];
    o.extra_context = 1000;
    o.q = teeth && j == 1 ? &q_bent : nullptr;
    mismatches += bit_mismatches(split, dev.run(scale, o));
  }
  ctx.add({"attention capacity grid", shape, dtype, "bits", mismatches, 0.0,
           teeth ? "one q element 1% off in one run" : ""});
  // The token with the longest context alone, and each sequence's new tokens alone (a prefill
  // chunk of its own length) and their first half (a shorter chunk), equal their rows in the
  // mixed step.
  const int32_t t = static_cast<int32_t>(std::max_element(s.positions.begin(), s.positions.end()) -
                                         s.positions.begin());
  mismatches = alone_mismatches(ctx, c, s, scale, t, t + 1, split, tensor_cores);
  int32_t t0 = 0;
  for (const Seq& q : c.seqs) {
    if (q.n_new > 1) {
      mismatches += alone_mismatches(ctx, c, s, scale, t0, t0 + q.n_new, split, tensor_cores);
      mismatches +=
          alone_mismatches(ctx, c, s, scale, t0, t0 + (q.n_new + 1) / 2, split, tensor_cores);
    }
    t0 += q.n_new;
  }
  ctx.add({"attention alone==in step", shape, dtype, "bits", mismatches, 0.0,
           teeth ? "the lone queries 1% off in one element" : ""});
}

}  // namespace

void check_attention(Context& ctx) {
  if (!ctx.wants("attention")) return;
  const DType bf16 = DType::bf16, f32 = DType::f32, f16 = DType::f16, f8 = DType::f8_e4m3;
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
      // Qwen3-8B's shape: a prefill across two splits and a chunk across a split edge; decode
      // tokens at 16k and at split / chunk edges.
      {32, 8, 128, f16, 0, 0.0f, 16, {{0, 300}, {250, 80}, {63, 1}, {64, 1}}},
      {32, 8, 128, f16, 0, 0.0f, 16, {{16000, 3}, {700, 1}, {0, 1}, {255, 1}, {256, 2}}},
      // The same shape in BF16 with prompts long enough for the automatic plan's one_pass query
      // tiles (the row-owning form, attention_flash.cuh), beside a chunk and a decode token.
      {32, 8, 128, bf16, 0, 0.0f, 16, {{0, 520}, {700, 64}, {5, 1}}},
      // GQA 1 (64-query tiles), a GQA 5 tile of 12 queries, GQA 2 at head_dim 256 and f32.
      {4, 4, 128, bf16, 0, 0.0f, 16, {{0, 130}, {70, 65}, {5, 1}}},
      {10, 2, 64, f16, 0, 0.0f, 16, {{0, 40}, {300, 30}, {1000, 1}}},
      {4, 1, 256, f32, 0, 0.0f, 16, {{0, 70}, {200, 100}}},
      {4, 2, 256, f16, 0, 0.0f, 16, {{0, 90}, {511, 1}, {1500, 17}}},
      // A window inside a prefill tile (rows whose first key differs), with softcap.
      {8, 2, 64, bf16, 100, 20.0f, 16, {{0, 200}, {500, 70}}},
      {4, 2, 32, f16, 77, 0.0f, 16, {{0, 130}, {300, 9}, {5, 1}}},
      // Decode tokens under a window on the decode kernel's head sizes: a first split whose
      // first chunk holds no key of the window (1,200: keys 901-1,200), or whose second does not.
      {8, 2, 128, f16, 300, 0.0f, 16, {{0, 40}, {1200, 1}, {2000, 1}, {333, 1}, {1100, 1}}},
      {4, 2, 256, bf16, 200, 0.0f, 16, {{0, 30}, {900, 1}, {1500, 1}, {700, 1}}},
      // Many sequences of different lengths in one launch (tiles cut across sequences), block
      // size 32, and a block size that is not a power of two.
      {8,
       2,
       128,
       f16,
       0,
       0.0f,
       32,
       {{0, 1},
        {1, 1},
        {63, 1},
        {64, 1},
        {65, 1},
        {255, 1},
        {256, 1},
        {257, 1},
        {700, 1},
        {33, 40}}},
      {4, 2, 64, f16, 0, 0.0f, 24, {{0, 50}, {100, 1}, {300, 3}, {47, 2}}},
      // Head_dim 16 (the tiny Gemma 4 fixture's sliding layers: 4 / 2 heads, window 8): its
      // shape in every cache type, decode at split edges and long contexts, GQA 1 (64-query
      // tiles), GQA 8 with softcap, a window inside a tile, a block size of 24.
      {4, 2, 16, f32, 8, 0.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},
      {4, 2, 16, bf16, 8, 0.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},
      {4, 2, 16, f16, 0, 0.0f, 16, {{0, 130}, {255, 1}, {256, 2}, {1000, 3}, {4999, 1}}},
      {4, 4, 16, f32, 0, 0.0f, 16, {{0, 130}, {70, 65}, {5, 1}}},
      {8, 1, 16, bf16, 77, 10.0f, 24, {{0, 90}, {511, 1}, {300, 9}}},
      // Head_dim 512 (Gemma 4's full-attention layers; F16 and BF16 caches only): GQA 8 (a query
      // tile holds 2 tokens) with decode across splits and at 5k, GQA 16 (two blocks per kv
      // head), GQA 1 (16-token tiles), softcap at split edges, and a window.
      {16, 2, 512, f16, 0, 0.0f, 16, {{0, 70}, {250, 20}, {700, 1}, {4999, 1}}},
      {16, 1, 512, bf16, 0, 0.0f, 16, {{0, 33}, {1500, 1}}},
      {2, 2, 512, bf16, 0, 0.0f, 16, {{0, 40}, {300, 17}, {2000, 1}}},
      {4, 1, 512, bf16, 0, 50.0f, 32, {{0, 20}, {255, 2}, {511, 1}, {2000, 1}}},
      {8, 2, 512, f16, 300, 0.0f, 16, {{0, 40}, {1200, 3}, {1999, 1}}},
      // F8_E4M3 caches (CUDA cores at every head size; 16-byte segments of 16 elements, V read
      // 1 to 16 bytes a thread): Qwen3-8B's shape (prefill across splits, decode at 16k and at
      // split / chunk edges), GQA 1 (64-query tiles), 5 and 16, a window inside a tile with
      // softcap, head_dim 256 with softcap, 32 and 16 (the fixtures' shapes, block size 24) and
      // 512 (GQA 8 / 1 / 4, softcap at split edges, a window), and V over E4M3's whole range.
      {8, 2, 128, f8, 0, 0.0f, 16, {{0, 37}, {900, 100}, {300, 1}, {4999, 1}}},
      {32, 8, 128, f8, 0, 0.0f, 16, {{0, 300}, {250, 80}, {63, 1}, {64, 1}}},
      {32, 8, 128, f8, 0, 0.0f, 16, {{16000, 3}, {700, 1}, {0, 1}, {255, 1}, {256, 2}}},
      {4, 4, 128, f8, 0, 0.0f, 16, {{0, 130}, {70, 65}, {5, 1}}},
      {10, 2, 64, f8, 0, 0.0f, 16, {{0, 40}, {300, 30}, {1000, 1}}},
      {16, 1, 64, f8, 0, 0.0f, 64, {{600, 2}, {0, 1}}},
      {8, 2, 64, f8, 100, 20.0f, 16, {{0, 200}, {500, 70}}},
      {4, 2, 256, f8, 0, 50.0f, 32, {{0, 20}, {700, 1}, {5000, 1}}},
      {4, 2, 256, f8, 0, 0.0f, 16, {{0, 90}, {511, 1}, {1500, 17}}},
      {3, 1, 32, f8, 8, 10.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},
      {4, 2, 16, f8, 8, 0.0f, 16, {{0, 48}, {60, 1}, {300, 2}}},
      {8, 1, 16, f8, 77, 10.0f, 24, {{0, 90}, {511, 1}, {300, 9}}},
      {16, 2, 512, f8, 0, 0.0f, 16, {{0, 70}, {250, 20}, {700, 1}, {4999, 1}}},
      {2, 2, 512, f8, 0, 0.0f, 16, {{0, 40}, {300, 17}, {2000, 1}}},
      {4, 1, 512, f8, 0, 50.0f, 32, {{0, 20}, {255, 2}, {511, 1}, {2000, 1}}},
      {8, 2, 512, f8, 300, 0.0f, 16, {{0, 40}, {1200, 3}, {1999, 1}}},
      {8, 2, 128, f8, 0, 0.0f, 16, {{0, 70}, {700, 1}, {1500, 9}}, /*wide_v=*/true},
      {8, 2, 64, f8, 0, 0.0f, 16, {{0, 70}, {700, 1}, {1500, 9}}, /*wide_v=*/true},
  };
  for (const Case& c : cases) {
    check_case(ctx, c, true);
    if (has_tensor_cores(c)) check_case(ctx, c, false);  // the CUDA-core kernel (A/B switch)
  }
}

}  // namespace memra::kernel_check
