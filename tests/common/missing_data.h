// Test data that lives outside the build (the packaged model, generated fixtures, the pinned
// vocabularies and chat templates) is required: a test that cannot find it fails, so a machine
// without it cannot report green by skipping. MEMRA_ALLOW_MISSING_TEST_DATA=1 turns those
// failures into skips, for a deliberate partial run; CI never sets it (docs/TESTING.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>

namespace memra::test {

inline bool missing_test_data_allowed() {
  const char* v = std::getenv("MEMRA_ALLOW_MISSING_TEST_DATA");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace memra::test

// Use in a TEST body or SetUp (it returns from the function): fails, or skips under the opt-out,
// when `present` is false. The streamed message says what is missing.
#define MEMRA_REQUIRE_TEST_DATA(present)                                    \
  if (present) {                                                            \
  } else if (::memra::test::missing_test_data_allowed())                    \
    GTEST_SKIP() << "MEMRA_ALLOW_MISSING_TEST_DATA=1, test data missing: "; \
  else                                                                      \
    GTEST_FAIL() << "test data missing (MEMRA_ALLOW_MISSING_TEST_DATA=1 skips instead): "

// The pinned test data's folder (test_data_dir() of common/test_data.h, which throws when the
// data is missing or stale) into a new variable `var`, under the same fail-or-skip rule.
#define MEMRA_REQUIRE_PINNED_TEST_DATA(var)                       \
  std::filesystem::path var;                                      \
  try {                                                           \
    var = ::memra::test::test_data_dir();                         \
  } catch (const std::exception& missing_pinned_data) {           \
    MEMRA_REQUIRE_TEST_DATA(false) << missing_pinned_data.what(); \
  }
