// Writes the generated GGUF test files to disk: `sample OUT.gguf` (the writer sample with every
// value type, for the gguf-package oracle test) and `corpus DIR` (the malformed corpus plus the
// valid base file, used by the Python inspect tests and as the fuzzer's seed corpus).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gguf_test_files.h"

namespace {

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace memra::gguf::testing;
  const std::string mode = argc == 3 ? argv[1] : "";
  try {
    if (mode == "sample") {
      sample_writer().write(argv[2]);
      return 0;
    }
    if (mode == "corpus") {
      const std::filesystem::path dir = argv[2];
      std::filesystem::create_directories(dir);
      write_bytes(dir / "valid_base.gguf", build(valid_raw_file()));
      for (const MalformedCase& c : malformed_corpus())
        write_bytes(dir / (c.name + ".gguf"), c.bytes);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_corpus_tool: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: gguf_corpus_tool sample OUT.gguf | corpus DIR\n");
  return 2;
}
