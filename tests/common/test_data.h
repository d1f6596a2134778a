// Where C++ tests find the pinned test data (vocabularies, chat templates) that
// scripts/fetch_test_data.py unpacks: $MEMRA_TEST_DATA, else
// ~/.cache/memra/test-data/<package>-<version> from scripts/test-data.txt (CMake passes the name
// and the artifact's sha256 in as MEMRA_TEST_DATA_NAME / MEMRA_TEST_DATA_SHA256). Data that is
// missing or from another artifact is an error naming what to fetch, never a skip.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace memra::test {

inline std::filesystem::path test_data_dir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("MEMRA_TEST_DATA"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    dir =
        std::filesystem::path(home ? home : "/") / ".cache/memra/test-data" / MEMRA_TEST_DATA_NAME;
  }
  std::ifstream stamp(dir / ".stamp");
  std::string sha;
  std::getline(stamp, sha);
  if (sha != MEMRA_TEST_DATA_SHA256)
    throw std::runtime_error("test data not found (or from another artifact) at " + dir.string() +
                             ": run scripts/setup.sh (or .venv/bin/python "
                             "scripts/fetch_test_data.py), which fetches the PyPI sdist " +
                             MEMRA_TEST_DATA_NAME + " pinned in scripts/test-data.txt");
  return dir;
}

}  // namespace memra::test
