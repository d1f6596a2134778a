// The AVX2 row dequantizers the CPU matmul uses for Q5_0, Q4_K and Q6_K weights
// (cpu::dequant_row_fast) against the reference codec (quant::dequantize_row): every float must
// be bit-identical, on quantized Gaussian rows of several magnitudes and on random block bytes
// whose f16 scales are random finite values (every 4- / 5- / 6-bit field pattern).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/dequant_dot.h"
#include "backend/cpu/dot_tile.h"
#include "backend/cpu/quant_dot.h"
#include "core/dtype.h"
#include "formats/quant.h"

namespace memra {
namespace {

constexpr int64_t kRowElements = 4096;  // 16 K-blocks, 128 Q5_0 blocks

// Byte offsets of the f16 scale fields in one block (ggml layouts, formats/quant_blocks.h).
struct BlockLayout {
  DType dtype;
  int64_t block_elements;
  int64_t block_bytes;
  std::vector<int> f16_fields;
};

const BlockLayout kLayouts[] = {
    {DType::q5_0, 32, 22, {0}},       // d, qh[4], qs[16]
    {DType::q4_k, 256, 144, {0, 2}},  // d, dmin, scales[12], qs[128]
    {DType::q6_k, 256, 210, {208}},   // ql[128], qh[64], scales[16], d
};

// A random finite f16 (no Inf/NaN: those are the reference codec's own test; here the question
// is whether the SIMD unpacking and scaling match it).
uint16_t random_finite_f16(std::mt19937& rng) {
  for (;;) {
    const uint16_t h = static_cast<uint16_t>(rng());
    if ((h & 0x7c00) != 0x7c00) return h;
  }
}

void expect_bit_identical(const BlockLayout& layout, const std::vector<uint8_t>& row,
                          const std::string& what) {
  std::vector<float> ref(kRowElements), fast(kRowElements, -1.0f);
  quant::dequantize_row(layout.dtype, row.data(), ref.data(), kRowElements);
  const bool has_fast = cpu::dequant_row_fast(layout.dtype, row.data(), fast.data(), kRowElements);
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  ASSERT_TRUE(has_fast) << dtype_name(layout.dtype) << ": this build targets AVX2";
#else
  // No AVX2 kernel in this build: the matmul uses the reference codec itself.
  ASSERT_FALSE(has_fast);
  return;
#endif
  int mismatches = 0;
  for (int64_t i = 0; i < kRowElements; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &ref[i], 4);
    std::memcpy(&b, &fast[i], 4);
    if (a != b && ++mismatches <= 5)
      ADD_FAILURE() << dtype_name(layout.dtype) << " " << what << " element " << i << ": reference "
                    << ref[i] << " (0x" << std::hex << a << "), fast " << fast[i] << " (0x" << b
                    << ")" << std::dec;
  }
  EXPECT_EQ(mismatches, 0) << dtype_name(layout.dtype) << " " << what;
}

TEST(DequantRowFast, QuantizedRowsAreBitIdenticalToTheCodec) {
  std::mt19937 rng(2024);
  for (const BlockLayout& layout : kLayouts) {
    for (float scale : {1e-4f, 0.02f, 1.0f, 300.0f}) {
      std::normal_distribution<float> normal(0.0f, scale);
      std::vector<float> x(kRowElements);
      for (float& v : x) v = normal(rng);
      std::vector<uint8_t> row(kRowElements / layout.block_elements * layout.block_bytes);
      quant::quantize_row(layout.dtype, x.data(), row.data(), kRowElements);
      expect_bit_identical(layout, row, "gaussian sigma " + std::to_string(scale));
    }
  }
}

TEST(DequantRowFast, RandomBlocksAreBitIdenticalToTheCodec) {
  std::mt19937 rng(77);
  for (const BlockLayout& layout : kLayouts) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<uint8_t> row(kRowElements / layout.block_elements * layout.block_bytes);
      for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
      for (int64_t blk = 0; blk < kRowElements / layout.block_elements; ++blk)
        for (int field : layout.f16_fields) {
          const uint16_t h = random_finite_f16(rng);
          std::memcpy(row.data() + blk * layout.block_bytes + field, &h, 2);
        }
      expect_bit_identical(layout, row, "random blocks, trial " + std::to_string(trial));
    }
  }
}

// A decode step's kernels (cpu::dot_token_rows) dequantize in registers what dequant_row_fast
// writes, and sum in dot_tile.h's order: the same bits, on every bit pattern of the blocks.
TEST(DotTokenRows, BitIdenticalToTheRowDequantizedThenDotted) {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kRowElements);
  for (float& v : x) v = normal(rng);
  x[7] = 30.0f;  // an outlier dimension, as Gemma's residual stream has
  EXPECT_TRUE(cpu::has_token_rows_dot(DType::q4_k));
  EXPECT_TRUE(cpu::has_token_rows_dot(DType::q5_0));
  for (const BlockLayout& layout : kLayouts) {
    if (!cpu::has_token_rows_dot(layout.dtype)) continue;  // Q6_K: the row dequantizer's path
    const int64_t row_bytes = kRowElements / layout.block_elements * layout.block_bytes;
    std::vector<uint8_t> rows(cpu::kMaxTokenRows * row_bytes);
    for (uint8_t& b : rows) b = static_cast<uint8_t>(rng());
    for (int r = 0; r < cpu::kMaxTokenRows; ++r)
      for (int64_t b = 0; b < kRowElements / layout.block_elements; ++b)
        for (int field : layout.f16_fields) {
          const uint16_t h = random_finite_f16(rng);
          std::memcpy(rows.data() + r * row_bytes + b * layout.block_bytes + field, &h, 2);
        }
    std::vector<float> row(kRowElements);
    for (int n_rows = 1; n_rows <= cpu::kMaxTokenRows; ++n_rows) {
      float got[cpu::kMaxTokenRows];
      cpu::dot_token_rows(layout.dtype, rows.data(), row_bytes, n_rows, x.data(), kRowElements,
                          got);
      for (int r = 0; r < n_rows; ++r) {
        ASSERT_TRUE(cpu::dequant_row_fast(layout.dtype, rows.data() + r * row_bytes, row.data(),
                                          kRowElements));
        float want = 0;
        cpu::dot_f32_tile(row.data(), kRowElements, 1, x.data(), kRowElements, 1, kRowElements,
                          &want, 1);
        uint32_t a, b;
        std::memcpy(&a, &want, 4);
        std::memcpy(&b, &got[r], 4);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[r])) << dtype_name(layout.dtype) << " row " << r;
        } else {
          EXPECT_EQ(a, b) << dtype_name(layout.dtype) << " row " << r << " of " << n_rows << ": "
                          << want << " vs " << got[r];
        }
      }
    }
  }
#else
  GTEST_SKIP() << "no AVX2 in this build: decode steps take the row dequantizer";
#endif
}

}  // namespace
}  // namespace memra
