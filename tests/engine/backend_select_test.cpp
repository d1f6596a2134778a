// Device selection (engine/backend_select): names are parsed strictly and refused by name, "auto"
// falls back to the CPU where no GPU is usable, and a build or machine without CUDA refuses
// "cuda" naming why. Runs in every build: in the cuda preset on a machine with no GPU it checks
// the "no CUDA GPU is visible" path (scripts/test.sh runs it there too).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/backend_select.h"

namespace memra {
namespace {

void expect_refused(const std::string& device, ErrorCode code, const std::string& needle) {
  try {
    backend_select({device, 1, false});
    FAIL() << "device '" << device << "' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BackendSelect, CpuAndAuto) {
  const auto cpu = backend_select({"cpu", 1, false});
  ASSERT_TRUE(cpu);
  EXPECT_TRUE(cpu->host_memory());
  EXPECT_EQ(cpu->kv_dtype_default(), DType::f32);
  EXPECT_NE(cpu->name().find("cpu"), std::string::npos);
  // The reference ops are always the CPU's, whatever device "auto" would pick.
  EXPECT_TRUE(backend_select({"auto", 1, true})->host_memory());
}

TEST(BackendSelect, MalformedNamesAreRefusedByName) {
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda0", ""})
    expect_refused(bad, ErrorCode::invalid_argument, "is not one of auto, cpu, cuda, cuda:N");
}

TEST(BackendSelect, CudaWithoutAUsableGpuIsRefused) {
  uint64_t free_bytes = 1, total_bytes = 1;
  const auto cpu = backend_select({"cpu", 1, false});
  EXPECT_FALSE(backend_memory(*cpu, free_bytes, total_bytes));
#ifdef MEMRA_TEST_HAVE_CUDA
  if (backend_gpu_ordinal("auto") < 0) {
    expect_refused("cuda", ErrorCode::unsupported, "no CUDA GPU is visible");
    EXPECT_TRUE(backend_select({"auto", 1, false})->host_memory());
  }
#else
  expect_refused("cuda", ErrorCode::unsupported, "this memra build has no CUDA backend");
  expect_refused("cuda:3", ErrorCode::unsupported, "this memra build has no CUDA backend");
#endif
}

TEST(BackendSelect, CpuRefusesKvDtypesItCannotRead) {
  const auto cpu = backend_select({"cpu", 1, false});
  EXPECT_NO_THROW(cpu->kv_dtype_check(DType::f32));
  EXPECT_THROW(cpu->kv_dtype_check(DType::bf16), Error);
  EXPECT_THROW(cpu->kv_dtype_check(DType::q8_0), Error);
  EXPECT_NO_THROW(cpu->kv_dtype_check(DType::f8_e4m3));  // the CUDA FP8 cache's oracle
  try {
    cpu->kv_dtype_check(DType::f16);
    FAIL() << "the CPU took an F16 KV cache";
  } catch (const Error& e) {  // refused by name, with what it takes
    EXPECT_NE(std::string(e.what()).find("F16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("F8_E4M3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memra
