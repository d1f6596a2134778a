// Unit tests for src/core: checked arithmetic, the dtype table, file mapping errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/checked_math.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"

namespace memra {
namespace {

TEST(CheckedMath, DetectsOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(checked_add(2, 3, "x"), 5u);
  EXPECT_THROW(checked_add(kMax, 1, "x"), Error);
  EXPECT_THROW(checked_mul(kMax / 2 + 1, 2, "x"), Error);
  EXPECT_EQ(checked_align_up(33, 32, "x"), 64u);
  EXPECT_EQ(checked_align_up(64, 32, "x"), 64u);
  EXPECT_THROW(checked_align_up(kMax, 32, "x"), Error);
  EXPECT_THROW(checked_align_up(1, 0, "x"), Error);
}

TEST(CheckedMath, ErrorNamesTheField) {
  try {
    checked_mul(std::numeric_limits<uint64_t>::max(), 3, "tensor 'blk.0' size");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.0' size"), std::string::npos);
    EXPECT_EQ(e.code(), ErrorCode::malformed_file);
  }
}

TEST(DType, GgmlIdsAndSizes) {
  EXPECT_EQ(dtype_from_ggml(12), DType::q4_k);
  EXPECT_EQ(dtype_from_ggml(30), DType::bf16);
  EXPECT_FALSE(dtype_from_ggml(4).has_value());     // removed Q4_2
  EXPECT_FALSE(dtype_from_ggml(1000).has_value());  // internal-only id
  EXPECT_EQ(dtype_row_bytes(DType::q4_k, 512, "row"), 288u);
  EXPECT_EQ(dtype_row_bytes(DType::q8_0, 64, "row"), 68u);
  EXPECT_THROW(dtype_row_bytes(DType::q4_k, 100, "row"), Error);
  EXPECT_EQ(dtype_from_name("q6_k"), DType::q6_k);
  EXPECT_EQ(dtype_name(DType::iq4_xs), "IQ4_XS");
}

TEST(MappedFile, MissingFileIsNotFound) {
  try {
    MappedFile f("/nonexistent/memra/file.gguf");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_found);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/memra/file.gguf"), std::string::npos);
  }
}

TEST(Half, RoundTripsEveryF16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (f != f) continue;  // NaN payloads are canonicalized
    EXPECT_EQ(f32_to_f16(f), h) << "f16 bits " << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00u);  // halfway, even stays down
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02u);  // halfway, odd rounds up
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);               // rounds up into Inf
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(bf16_to_f32(0x3f80u), 1.0f);
}

TEST(EnvSwitch, ReadsZeroOrOneAndRefusesAnythingElseByName) {
  const char* name = "MEMRA_TEST_ENV_SWITCH";
  unsetenv(name);
  EXPECT_TRUE(env_switch(name, true));
  EXPECT_FALSE(env_switch(name, false));
  setenv(name, "1", 1);
  EXPECT_TRUE(env_switch(name, false));
  setenv(name, "0", 1);
  EXPECT_FALSE(env_switch(name, true));
  setenv(name, "yes", 1);
  try {
    (void)env_switch(name, true);
    ADD_FAILURE() << "a value other than 0 or 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MEMRA_TEST_ENV_SWITCH=yes"), std::string::npos)
        << e.what();
  }
  unsetenv(name);
}

}  // namespace
}  // namespace memra
