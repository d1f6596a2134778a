// Unit tests of the quant codecs: dequant(quant(x)) stays within each type's error bound, the
// encoders are deterministic and exact where the format allows, and bad rows are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/quant.h"

namespace memra {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_trip(DType dtype, const std::vector<float>& x) {
  const DTypeTraits& t = dtype_traits(dtype);
  std::vector<uint8_t> bytes(x.size() / t.block_size * t.type_size);
  quant::quantize_row(dtype, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  quant::dequantize_row(dtype, bytes.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// Root-mean-square error relative to the RMS of x.
double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

struct Bound {
  DType dtype;
  double max_rel_rmse;  // Gaussian data; roughly 2x what each type measures
};

TEST(QuantRoundTrip, ErrorWithinTypeBound) {
  const Bound bounds[] = {{DType::f32, 0.0},     {DType::f16, 1e-3},   {DType::bf16, 6e-3},
                          {DType::q8_0, 8e-3},   {DType::q6_k, 2e-2},  {DType::q5_k, 4e-2},
                          {DType::q5_0, 5e-2},   {DType::q5_1, 5e-2},  {DType::q4_k, 8e-2},
                          {DType::q4_0, 1.2e-1}, {DType::q4_1, 1.2e-1}};
  const std::vector<float> x = random_values(4096, 7, 0.02f);
  for (const Bound& b : bounds) {
    const double e = relative_rmse(x, round_trip(b.dtype, x));
    EXPECT_LE(e, b.max_rel_rmse) << dtype_name(b.dtype);
    if (b.dtype != DType::f32) {
      EXPECT_GT(e, 0.0) << dtype_name(b.dtype);
    }
  }
}

TEST(QuantRoundTrip, KQuantsBeatLegacyAtSameBits) {
  // The K-quant search should do better than the plain absmax legacy encoders.
  const std::vector<float> x = random_values(8192, 11);
  EXPECT_LT(relative_rmse(x, round_trip(DType::q4_k, x)),
            relative_rmse(x, round_trip(DType::q4_0, x)));
  EXPECT_LT(relative_rmse(x, round_trip(DType::q5_k, x)),
            relative_rmse(x, round_trip(DType::q5_0, x)));
}

TEST(QuantRoundTrip, ZerosStayZero) {
  const std::vector<float> x(512, 0.0f);
  for (DType t : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0, DType::q4_k,
                  DType::q5_k, DType::q6_k}) {
    for (float y : round_trip(t, x)) ASSERT_EQ(y, 0.0f) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, SmallIntegersExactInQ8) {
  // A block whose absmax is 127 has d = 1, so integers survive exactly.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i * 4 - 64);
  x[0] = 127;
  EXPECT_EQ(round_trip(DType::q8_0, x), x);
}

TEST(QuantRoundTrip, Deterministic) {
  const std::vector<float> x = random_values(1024, 3);
  for (DType t : {DType::q4_k, DType::q5_k, DType::q6_k}) {
    EXPECT_EQ(round_trip(t, x), round_trip(t, x)) << dtype_name(t);
  }
}

TEST(QuantErrors, PartialBlockRefused) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> out(4096);
  for (DType t : {DType::q8_0, DType::q4_k, DType::q6_k}) {
    try {
      quant::quantize_row(t, x.data(), out.data(), 300);
      FAIL() << "accepted a partial block of " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("300"), std::string::npos) << e.what();
    }
    EXPECT_THROW(quant::dequantize_row(t, out.data(), x.data(), 300), Error);
  }
  EXPECT_THROW(quant::dequantize_row(DType::q4_0, out.data(), x.data(), -32), Error);
}

TEST(QuantErrors, NonFiniteRefusedForBlockTypes) {
  std::vector<float> x(256, 0.5f);
  std::vector<uint8_t> out(4096);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    x[77] = bad;
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
      try {
        quant::quantize_row(t, x.data(), out.data(), 256);
        FAIL() << "accepted a non-finite value for " << dtype_name(t);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("element 77"), std::string::npos) << e.what();
      }
    }
    // Float targets convert them like the reference does.
    EXPECT_NO_THROW(quant::quantize_row(DType::f16, x.data(), out.data(), 256));
  }
}

TEST(QuantErrors, UnsupportedTypesRefusedByName) {
  EXPECT_TRUE(quant::can_dequantize(DType::iq4_xs));
  EXPECT_FALSE(quant::can_dequantize(DType::iq2_xxs));
  EXPECT_FALSE(quant::can_quantize(DType::q3_k));
  float x[256] = {};
  uint8_t out[1024] = {};
  try {
    quant::quantize_row(DType::q3_k, x, out, 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("Q3_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quant::dequantize_row(DType::iq2_xxs, out, x, 256), Error);
}

}  // namespace
}  // namespace memra
