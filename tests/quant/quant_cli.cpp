// quant_cli: the C++ side of the quant codecs gate (tests/python/test_quant_codecs.py).
//   quant_cli dequant TYPE IN OUT   raw blocks of TYPE in IN -> float32 values in OUT
//   quant_cli quant TYPE IN OUT     float32 values in IN -> raw blocks of TYPE in OUT
// TYPE is a ggml type name (q4_k, bf16, ...). Errors print one line and exit with the error's
// exit code (2 for invalid or unsupported input).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/quant.h"

namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) memra::fail(memra::ErrorCode::not_found, "cannot open {}", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) memra::fail(memra::ErrorCode::io, "cannot write {}", path);
}

int run(const std::string& mode, const std::string& type_name, const std::string& in_path,
        const std::string& out_path) {
  const auto dtype = memra::dtype_from_name(type_name);
  if (!dtype) memra::fail(memra::ErrorCode::invalid_argument, "unknown type {}", type_name);
  const memra::DTypeTraits& traits = memra::dtype_traits(*dtype);
  const std::vector<char> in = read_all(in_path);
  if (mode == "dequant") {
    if (in.size() % traits.type_size != 0) {
      memra::fail(memra::ErrorCode::invalid_argument, "{} bytes is not a whole number of {} blocks",
                  in.size(), traits.name);
    }
    const int64_t n = static_cast<int64_t>(in.size() / traits.type_size * traits.block_size);
    std::vector<float> out(static_cast<size_t>(n));
    memra::quant::dequantize_row(*dtype, in.data(), out.data(), n);
    write_all(out_path, out.data(), out.size() * sizeof(float));
  } else if (mode == "quant") {
    if (in.size() % sizeof(float) != 0) {
      memra::fail(memra::ErrorCode::invalid_argument, "input is not float32 values");
    }
    const int64_t n = static_cast<int64_t>(in.size() / sizeof(float));
    std::vector<float> values(static_cast<size_t>(n));
    std::memcpy(values.data(), in.data(), in.size());
    const size_t out_bytes = static_cast<size_t>(n) / traits.block_size * traits.type_size;
    std::vector<uint8_t> out(out_bytes + traits.type_size);  // + a block: n may be partial
    memra::quant::quantize_row(*dtype, values.data(), out.data(), n);
    write_all(out_path, out.data(), out_bytes);
  } else {
    memra::fail(memra::ErrorCode::invalid_argument, "mode must be quant or dequant, not {}", mode);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: quant_cli {quant|dequant} TYPE IN OUT\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3], argv[4]);
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "quant_cli: error: %s\n", e.what());
    return memra::error_exit_code(e.code());
  }
}
