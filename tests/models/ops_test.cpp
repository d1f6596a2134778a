// CPU ops: the fast path (8-bit activation blocks, SIMD dots, multi-token kernels) against the
// reference path (dequantize_row + double accumulation) for every weight dtype the models use;
// SIMD dots against their scalar form; paged attention against contiguous attention in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp8.h"
#include "formats/quant.h"
#include "models/batch.h"

namespace memra {
namespace {

struct Weight {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Weight random_weight(DType dtype, int64_t n_in, int64_t n_out, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Weight w;
  const uint64_t row_bytes = dtype_row_bytes(dtype, n_in, "test");
  w.bytes.resize(row_bytes * n_out);
  std::vector<float> row(n_in);
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& v : row) v = normal(rng);
    quant::quantize_row(dtype, row.data(), w.bytes.data() + r * row_bytes, n_in);
  }
  // Built in one aggregate: assigning a literal to view.name trips a GCC 12 -Wrestrict false
  // positive at -O3.
  w.view = TensorView{std::string("weight"),
                      dtype,
                      2,
                      {static_cast<uint64_t>(n_in), static_cast<uint64_t>(n_out), 1, 1},
                      w.bytes.data(),
                      w.bytes.size()};
  return w;
}

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

double normalized_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_err = std::max(max_err, std::fabs(double{got[i]} - ref[i]));
    max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
  }
  return max_err / max_ref;
}

class MatmulFastVsReference : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulFastVsReference, OddSizesAndTokenCounts) {
  const DType dtype = GetParam();
  ASSERT_TRUE(quant::can_quantize(dtype)) << dtype_name(dtype);
  std::mt19937 rng(7);
  const int64_t n_in = 512, n_out = 37;
  const Weight w = random_weight(dtype, n_in, n_out, rng);
  auto fast = ops_cpu_create({2, false});
  auto ref = ops_cpu_create({2, true});
  // Both paths see the same dequantized weights and f32 activations; they differ only in
  // summation order and f32 vs double accumulation (measured 1.4-2.0e-7 of the largest output).
  // 1e-5 keeps 50x headroom; a weight moved by one quantization level is far above it.
  const double tol = 1e-5;
  for (int64_t n_tokens : {1, 2, 3, 4, 5, 9}) {
    const std::vector<float> x = random_vec(n_tokens * n_in, rng);
    std::vector<float> y_fast(n_tokens * n_out), y_ref(n_tokens * n_out);
    fast->matmul(w.view, x.data(), n_tokens, y_fast.data());
    ref->matmul(w.view, x.data(), n_tokens, y_ref.data());
    EXPECT_LE(normalized_error(y_fast, y_ref), tol) << dtype_name(dtype) << " n=" << n_tokens;
  }
}

// The determinism contract on the CPU: a token's outputs are the same bits whether it is alone in
// a step (a decode step's kernels, dequant_dot.h) or one of a batch (the multi-token kernels).
TEST_P(MatmulFastVsReference, ATokenAloneIsBitIdenticalToTheSameTokenInABatch) {
  const DType dtype = GetParam();
  std::mt19937 rng(11);
  const int64_t n_in = 512, n_out = 37;  // 37: row groups of 4 leave one row over
  const Weight w = random_weight(dtype, n_in, n_out, rng);
  auto fast = ops_cpu_create({2, false});
  for (int64_t n_tokens : {2, 5, 9}) {
    const std::vector<float> x = random_vec(n_tokens * n_in, rng);
    std::vector<float> batch(n_tokens * n_out), alone(n_out);
    fast->matmul(w.view, x.data(), n_tokens, batch.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      fast->matmul(w.view, x.data() + t * n_in, 1, alone.data());
      EXPECT_EQ(std::memcmp(alone.data(), batch.data() + t * n_out, n_out * sizeof(float)), 0)
          << dtype_name(dtype) << ": token " << t << " of " << n_tokens;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulFastVsReference,
                         ::testing::Values(DType::f32, DType::f16, DType::bf16, DType::q4_0,
                                           DType::q5_0, DType::q8_0, DType::q4_k, DType::q6_k,
                                           DType::q4_1, DType::q5_k),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(QuantDot, SimdMatchesScalar) {
  std::mt19937 rng(11);
  const int64_t n = 768;
  const std::vector<float> x = random_vec(n, rng);
  std::vector<cpu::BlockQ8> a8(n / 32);
  std::vector<cpu::BlockQ8K> ak(n / 256);
  cpu::quantize_q8(x.data(), a8.data(), n);
  cpu::quantize_q8k(x.data(), ak.data(), n);
  for (DType dtype : {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
    const Weight w = random_weight(dtype, n, 1, rng);
    const cpu::ActFormat format = cpu::act_format_for(dtype);
    const void* act = format == cpu::ActFormat::q8    ? static_cast<const void*>(a8.data())
                      : format == cpu::ActFormat::q8k ? static_cast<const void*>(ak.data())
                                                      : static_cast<const void*>(x.data());
    const float simd = cpu::dot_row(dtype, w.bytes.data(), act, n);
    const float scalar = cpu::dot_row_scalar(dtype, w.bytes.data(), act, n);
    EXPECT_NEAR(simd, scalar, 1e-4 * std::max(1.0f, std::fabs(scalar))) << dtype_name(dtype);
  }
}

// A step of one sequence: tokens [begin, begin + len) with the given block table.
StepLayout one_seq_step(int begin, int len, const std::vector<int32_t>& table, int bs) {
  StepLayout step;
  step.block_size = bs;
  step.max_blocks = static_cast<int32_t>(table.size());
  step.block_tables = table;
  for (int i = 0; i < len; ++i) {
    const int pos = begin + i;
    step.tokens.push_back(0);
    step.positions.push_back(pos);
    step.token_seq.push_back(0);
    const size_t b = static_cast<size_t>(pos / bs);
    step.slots.push_back(b < table.size() ? table[b] * bs + pos % bs : -1);
  }
  step.max_context = begin + len;
  return step;
}

// Contiguous causal attention in double for one sequence (the trusted simple path).
std::vector<float> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int n_tokens, int n_heads, int n_kv,
                                   int d, float scale, int window) {
  std::vector<float> out(static_cast<size_t>(n_tokens) * n_heads * d);
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / (n_heads / n_kv);
      const int first = window > 0 ? std::max(0, t - window + 1) : 0;
      std::vector<double> s;
      double mx = -INFINITY;
      for (int j = first; j <= t; ++j) {
        double dot = 0;
        for (int i = 0; i < d; ++i)
          dot += double{q[(t * n_heads + h) * d + i]} * k[(j * n_kv + kvh) * d + i];
        s.push_back(dot * scale);
        mx = std::max(mx, s.back());
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int i = 0; i < d; ++i) {
        double acc = 0;
        for (int j = first; j <= t; ++j) acc += s[j - first] * v[(j * n_kv + kvh) * d + i];
        out[(t * n_heads + h) * d + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

// A paged F32 cache (NaN until written) and one sequence's random q, k and v, drawn in that order.
struct PagedCase {
  std::vector<float> kstore, vstore;
  KvLayerView kv;
  std::vector<float> q, k, v;
  PagedCase(std::mt19937& rng, int n_heads, int n_kv, int d, int bs, int n_tokens, int n_blocks)
      : kstore(static_cast<size_t>(n_blocks) * bs * n_kv * d, NAN),
        vstore(kstore.size(), NAN),
        kv{kstore.data(), vstore.data(), DType::f32, n_blocks, bs, n_kv, d},
        q(random_vec(n_tokens * n_heads * d, rng)),
        k(random_vec(n_tokens * n_kv * d, rng)),
        v(random_vec(n_tokens * n_kv * d, rng)) {}
};

TEST(Attention, PagedChunkedMatchesContiguous) {
  std::mt19937 rng(3);
  const int n_heads = 6, n_kv = 2, d = 40, bs = 4, n_tokens = 23, window = 7;
  PagedCase c(rng, n_heads, n_kv, d, bs, n_tokens, 12);
  const KvLayerView& kv = c.kv;
  const std::vector<float>& q = c.q;
  const std::vector<float>& k = c.k;
  const std::vector<float>& v = c.v;
  const std::vector<int32_t> table = {9, 2, 7, 0, 11, 5};  // scattered blocks
  for (bool reference : {false, true}) {
    for (int win : {0, window}) {
      auto ops = ops_cpu_create({2, reference});
      const std::vector<float> want =
          naive_attention(q, k, v, n_tokens, n_heads, n_kv, d, 0.3f, win);
      std::vector<float> got(want.size());
      for (int begin = 0; begin < n_tokens; begin += 10) {  // prefill in chunks of 10
        const int len = std::min(10, n_tokens - begin);
        ops->step_begin(one_seq_step(begin, len, table, bs));
        ops->kv_store(kv, k.data() + begin * n_kv * d, v.data() + begin * n_kv * d);
        ops->attention(kv, q.data() + begin * n_heads * d, {n_heads, 0.3f, 0.0f, win},
                       got.data() + begin * n_heads * d);
      }
      EXPECT_LE(normalized_error(got, want), 1e-5) << "reference=" << reference << " win=" << win;
    }
  }
}

// A prompt step takes attention a (token, kv head) group of query heads a task, a decode step a
// (token, head) a task: a token's outputs are the same bits either way, its keys cached by a
// whole-prompt step or one token a step, in both arithmetics, with and without a window and a
// softcap.
TEST(Attention, GroupedHeadsAreEachHeadsBits) {
  std::mt19937 rng(5);
  const int n_heads = 8, n_kv = 2, d = 72, bs = 4, n_tokens = 21;
  PagedCase c(rng, n_heads, n_kv, d, bs, n_tokens, 8);
  const KvLayerView& kv = c.kv;
  const std::vector<float>& q = c.q;
  const std::vector<float>& k = c.k;
  const std::vector<float>& v = c.v;
  const std::vector<int32_t> table = {6, 1, 4, 0, 7, 3};
  for (bool reference : {false, true}) {
    for (const AttentionParams params :
         {AttentionParams{n_heads, 0.3f, 0.0f, 0}, AttentionParams{n_heads, 0.3f, 5.0f, 6}}) {
      auto ops = ops_cpu_create({2, reference});
      std::vector<float> whole(q.size()), alone(q.size());
      ops->step_begin(one_seq_step(0, n_tokens, table, bs));  // 42 (token, kv head) tasks
      ops->kv_store(kv, k.data(), v.data());
      ops->attention(kv, q.data(), params, whole.data());
      for (int t = 0; t < n_tokens; ++t) {  // 2 (token, kv head) pairs: a task a head
        ops->step_begin(one_seq_step(t, 1, table, bs));
        ops->kv_store(kv, k.data() + t * n_kv * d, v.data() + t * n_kv * d);
        ops->attention(kv, q.data() + t * n_heads * d, params, alone.data() + t * n_heads * d);
      }
      EXPECT_EQ(std::memcmp(whole.data(), alone.data(), whole.size() * sizeof(float)), 0)
          << "reference=" << reference << " window=" << params.window;
    }
  }
}

// An F8_E4M3 cache stores each element as core/fp8.h rounds it and attends over the decoded
// values with the F32 cache's arithmetic: the same bits as an F32 cache fed the rounded K/V, in
// both arithmetics, for magnitudes from subnormal to saturated.
TEST(Attention, Fp8CacheIsTheF32CacheOfRoundedValues) {
  std::mt19937 rng(5);
  const int n_heads = 4, n_kv = 2, d = 24, bs = 4, n_tokens = 19, n_blocks = 8;
  const size_t n_cache = static_cast<size_t>(n_blocks) * bs * n_kv * d;
  std::vector<uint8_t> k8(n_cache, 0xff), v8(n_cache, 0xff);  // 0xff: NaN where nothing stored
  std::vector<float> k32(n_cache, NAN), v32(n_cache, NAN);
  const KvLayerView kv8{k8.data(), v8.data(), DType::f8_e4m3, n_blocks, bs, n_kv, d};
  const KvLayerView kv32{k32.data(), v32.data(), DType::f32, n_blocks, bs, n_kv, d};
  const std::vector<float> q = random_vec(n_tokens * n_heads * d, rng);
  std::vector<float> k = random_vec(n_tokens * n_kv * d, rng);
  std::vector<float> v = random_vec(n_tokens * n_kv * d, rng);
  for (size_t i = 0; i < k.size(); ++i) {  // spread over E4M3's range, past it at the ends
    k[i] *= std::ldexp(1.0f, static_cast<int>(i % 19) - 10);
    v[i] *= std::ldexp(1.0f, static_cast<int>(i % 17) - 9);
  }
  std::vector<float> k_round(k.size()), v_round(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k_round[i] = e4m3_to_f32(f32_to_e4m3(k[i]));
    v_round[i] = e4m3_to_f32(f32_to_e4m3(v[i]));
  }
  const std::vector<int32_t> table = {6, 1, 3, 0, 7};
  for (bool reference : {false, true}) {
    auto ops = ops_cpu_create({2, reference});
    std::vector<float> got(static_cast<size_t>(n_tokens) * n_heads * d);
    std::vector<float> want(got.size());
    for (int begin = 0; begin < n_tokens; begin += 8) {
      const int len = std::min(8, n_tokens - begin);
      ops->step_begin(one_seq_step(begin, len, table, bs));
      ops->kv_store(kv8, k.data() + begin * n_kv * d, v.data() + begin * n_kv * d);
      ops->attention(kv8, q.data() + begin * n_heads * d, {n_heads, 0.3f, 0.0f, 0},
                     got.data() + begin * n_heads * d);
      ops->kv_store(kv32, k_round.data() + begin * n_kv * d, v_round.data() + begin * n_kv * d);
      ops->attention(kv32, q.data() + begin * n_heads * d, {n_heads, 0.3f, 0.0f, 0},
                     want.data() + begin * n_heads * d);
    }
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "reference=" << reference;
    // The bytes stored are core/fp8.h's, so a slot's decoded values are the rounded ones.
    EXPECT_EQ(e4m3_to_f32(k8[static_cast<size_t>(table[0]) * bs * n_kv * d]), k_round[0]);
    // and rounding matters here: the unrounded values give other outputs
    std::vector<float> unrounded(got.size());
    ops->step_begin(one_seq_step(0, n_tokens, table, bs));
    ops->kv_store(kv32, k.data(), v.data());
    ops->attention(kv32, q.data(), {n_heads, 0.3f, 0.0f, 0}, unrounded.data());
    EXPECT_NE(0, std::memcmp(got.data(), unrounded.data(), got.size() * sizeof(float)));
  }
}

// The greedy argmax op is std::max_element's pick (the sampler's): the first maximum, NaN never
// winning unless it comes first, only the first n_cols of each row of stride ld.
TEST(ArgmaxRows, FirstMaximumOfTheLeadingColumns) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const int64_t ld = 6, n_cols = 5;
  const std::vector<float> x = {
      1,     3,    2,    3,    0,    9,  // tie: the first 3; column 5 is past n_cols
      nan,   1,    2,    3,    4,    0,  // a NaN first value wins, as max_element keeps it
      0,     nan,  2,    nan,  1,    0,  // later NaNs are skipped
      -inf,  -inf, -inf, -inf, -inf, 0,  // all -inf: index 0
      -0.0f, 0.0f, -1,   -2,   -3,   0,  // -0 == +0: the first
      nan,   nan,  nan,  nan,  nan,  0,  // all NaN: index 0
  };
  const int64_t n_rows = static_cast<int64_t>(x.size()) / ld;
  std::vector<int32_t> ids(static_cast<size_t>(n_rows), -1);
  auto ops = ops_cpu_create({1, false});
  ops->argmax_rows(x.data(), n_rows, n_cols, ld, ids.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 2, 0, 0, 0}));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = x.data() + r * ld;
    EXPECT_EQ(ids[r], std::max_element(row, row + n_cols) - row) << "row " << r;
  }
}

// The gated activations and the softcap split many elements over the pool: every element, those
// of the partial last task included, is still its own expression's bits, on 1 thread or 3.
TEST(ElementwiseOps, SplitOverThreadsAreEachElementsExpression) {
  const int64_t n_rows = 37, n_cols = 2049;  // 75,813 elements: 4 whole tasks and a partial one
  const int64_t n = n_rows * n_cols;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
  for (auto& v : gate) v = dist(rng);
  for (auto& v : up) v = dist(rng);
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int threads : {1, 3}) {
    auto ops = ops_cpu_create({threads, false});
    std::vector<float> silu(static_cast<size_t>(n), -1.0f), gelu(static_cast<size_t>(n), -1.0f);
    ops->silu_mul(gate.data(), up.data(), n_rows, n_cols, silu.data());
    ops->gelu_tanh_mul(gate.data(), up.data(), n_rows, n_cols, gelu.data());
    std::vector<float> capped = up;
    ops->softcap(capped.data(), 30.0f, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      const float s = g / (1.0f + std::exp(-g)) * up[i];
      const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
      const float t = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
      bad += std::memcmp(&s, &silu[i], 4) != 0;
      bad += std::memcmp(&t, &gelu[i], 4) != 0;
      const float c = 30.0f * std::tanh(up[i] / 30.0f);
      bad += std::memcmp(&c, &capped[i], 4) != 0;
    }
    EXPECT_EQ(bad, 0) << threads << " threads";
  }
}

TEST(Attention, BadBlockIdsAreRefused) {
  std::vector<float> store(4 * 2 * 8);
  const KvLayerView kv{store.data(), store.data(), DType::f32, 4, 2, 1, 8};
  auto ops = ops_cpu_create({1, false});
  std::vector<float> k(8), q(8), out(8);
  ops->step_begin(one_seq_step(0, 1, {7}, 2));  // block 7 of 4
  EXPECT_THROW(ops->kv_store(kv, k.data(), k.data()), Error);
  EXPECT_THROW(ops->attention(kv, q.data(), {1, 1.0f, 0.0f, 0}, out.data()), Error);
  ops->step_begin(one_seq_step(4, 1, {0}, 2));  // position 4 needs a third block
  EXPECT_THROW(ops->kv_store(kv, k.data(), k.data()), Error);
  EXPECT_THROW(ops->attention(kv, q.data(), {1, 1.0f, 0.0f, 0}, out.data()), Error);
}

TEST(Rope, NormalLayoutIsNeoxOnPermutedDims) {
  // GGUF's llama layout rotates (2i, 2i+1); HF's rotates (i, i + d/2). With q permuted the way
  // the converter does, both give the same result up to the same permutation.
  const int d = 8;
  RopeParams neox{RopeLayout::neox, d, {}}, normal{RopeLayout::normal, d, {}};
  for (int i = 0; i < d / 2; ++i) neox.inv_freq.push_back(std::pow(10000.0, -2.0 * i / d));
  normal.inv_freq = neox.inv_freq;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y(d);
  for (int i = 0; i < d / 2; ++i) {  // permute: y[2i] = x[i], y[2i+1] = x[i + d/2]
    y[2 * i] = x[i];
    y[2 * i + 1] = x[i + d / 2];
  }
  auto ops = ops_cpu_create({1, true});
  ops->step_begin(one_seq_step(5, 1, {0, 1}, 4));  // one token at position 5
  ops->rope(x.data(), 1, d, neox);
  ops->rope(y.data(), 1, d, normal);
  for (int i = 0; i < d / 2; ++i) {
    EXPECT_NEAR(y[2 * i], x[i], 1e-6);
    EXPECT_NEAR(y[2 * i + 1], x[i + d / 2], 1e-6);
  }
}

}  // namespace
}  // namespace memra
