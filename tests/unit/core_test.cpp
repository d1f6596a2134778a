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
#include "core/fp8.h"
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

TEST(DType, KvDtypeNamesTakeTheFp8Alias) {
  EXPECT_EQ(kv_dtype_from_name("fp8"), DType::f8_e4m3);
  EXPECT_EQ(kv_dtype_from_name("FP8"), DType::f8_e4m3);
  EXPECT_EQ(kv_dtype_from_name("f8_e4m3"), DType::f8_e4m3);
  EXPECT_EQ(kv_dtype_from_name("F16"), DType::f16);
  EXPECT_EQ(kv_dtype_from_name("bf16"), DType::bf16);
  EXPECT_FALSE(kv_dtype_from_name("fp9").has_value());
  EXPECT_FALSE(kv_dtype_from_name("").has_value());
  EXPECT_FALSE(dtype_from_name("fp8").has_value());  // the alias is the KV flag's only
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

TEST(Fp8, RoundTripsEveryFiniteE4m3) {
  for (uint32_t b = 0; b < 0x100; ++b) {
    const float f = e4m3_to_f32(static_cast<uint8_t>(b));
    if (f != f) continue;  // 0x7f and 0xff
    EXPECT_EQ(f32_to_e4m3(f), b) << "e4m3 bits " << b;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0.015625f);     // smallest normal, 2^-6
  EXPECT_EQ(e4m3_to_f32(0x01), 0.001953125f);  // smallest subnormal, 2^-9
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
}

TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(f32_to_e4m3(1.0f + 1.0f / 16.0f), 0x38u);  // halfway 1 / 1.125: even stays down
  EXPECT_EQ(f32_to_e4m3(1.0f + 3.0f / 16.0f), 0x3au);  // halfway 1.125 / 1.25: odd rounds up
  EXPECT_EQ(f32_to_e4m3(1.0f + 1.0f / 15.0f), 0x39u);  // past halfway
  EXPECT_EQ(f32_to_e4m3(15.5f), 0x58u);                // 15 / 16 halfway: carries to 2^4
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7eu);               // halfway to 480 (NaN's slot): 448
  EXPECT_EQ(f32_to_e4m3(465.0f), 0x7eu);               // saturates, never NaN
  EXPECT_EQ(f32_to_e4m3(-1e30f), 0xfeu);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7eu);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xfeu);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7fu);
  EXPECT_EQ(f32_to_e4m3(0.0009765625f), 0x00u);   // 2^-10, half the smallest subnormal: even 0
  EXPECT_EQ(f32_to_e4m3(0.0009766f), 0x01u);      // just above it
  EXPECT_EQ(f32_to_e4m3(-0.0029296875f), 0x82u);  // 1.5 x 2^-9: odd rounds up to 2 x 2^-9
  EXPECT_EQ(f32_to_e4m3(0.0146484375f), 0x08u);   // 7.5 x 2^-9: up into the smallest normal
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80u);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00u);
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

TEST(EnvInt, ReadsADecimalInRangeAndRefusesAnythingElseByName) {
  const char* name = "MEMRA_TEST_ENV_INT";
  unsetenv(name);
  EXPECT_EQ(env_int(name, 64, 1 << 20, 1024), 1024);
  setenv(name, "", 1);
  EXPECT_EQ(env_int(name, 64, 1 << 20, 1024), 1024);
  setenv(name, "64", 1);
  EXPECT_EQ(env_int(name, 64, 1 << 20, 1024), 64);
  setenv(name, "1048576", 1);
  EXPECT_EQ(env_int(name, 64, 1 << 20, 1024), 1 << 20);
  // Past the range, under it, signed, spaced, not decimal, and past int64 itself.
  for (const char* bad : {"1048577", "63", "-100", "+100", " 100", "100 ", "1e3", "0x40",
                          "99999999999999999999999"}) {
    setenv(name, bad, 1);
    try {
      (void)env_int(name, 64, 1 << 20, 1024);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("MEMRA_TEST_ENV_INT=") + bad +
                                           " is not an integer from 64 to 1048576"),
                std::string::npos)
          << e.what();
    }
  }
  unsetenv(name);
}

TEST(EnvChoice, ReadsANamedValueAndRefusesAnythingElseByName) {
  const char* name = "MEMRA_TEST_ENV_CHOICE";
  unsetenv(name);
  EXPECT_EQ(env_choice(name, {"0", "small", "all"}, 2), 2);
  setenv(name, "", 1);
  EXPECT_EQ(env_choice(name, {"0", "small", "all"}, 2), 2);
  setenv(name, "0", 1);
  EXPECT_EQ(env_choice(name, {"0", "small", "all"}, 2), 0);
  setenv(name, "small", 1);
  EXPECT_EQ(env_choice(name, {"0", "small", "all"}, 2), 1);
  setenv(name, "smal", 1);
  try {
    (void)env_choice(name, {"0", "small", "all"}, 2);
    ADD_FAILURE() << "a value outside the choices was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MEMRA_TEST_ENV_CHOICE=smal is not one of 0, small, all"),
              std::string::npos)
        << e.what();
  }
  unsetenv(name);
}

}  // namespace
}  // namespace memra
