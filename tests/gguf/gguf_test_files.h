// Test GGUF files built in code (nothing binary is committed): a raw byte builder that can write
// deliberately broken files, the malformed-file corpus with the error each case must produce, and
// a valid sample written by gguf::Writer that uses every metadata value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"

namespace memra::gguf::testing {

// One metadata entry as raw bytes: key, on-disk type id, payload (already encoded).
struct RawKv {
  std::string key;
  uint32_t type = 0;
  std::vector<uint8_t> payload;
};

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
  std::optional<uint32_t> n_dims;  // overrides ne.size() in the header
};

// A GGUF file described field by field, each field settable to a wrong value.
struct RawFile {
  uint32_t magic = 0x46554747u;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // default: tensors.size()
  std::optional<uint64_t> kv_count;      // default: kvs.size()
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  uint64_t pad_alignment = 32;  // padding written before the data section
  uint64_t data_bytes = 0;      // bytes of tensor data appended (a byte pattern)
};

std::vector<uint8_t> build(const RawFile& f);

// Little-endian encoders for payloads.
std::vector<uint8_t> le_u32(uint32_t v);
std::vector<uint8_t> le_u64(uint64_t v);
std::vector<uint8_t> gguf_string(const std::string& s);

// A small valid file: three metadata entries, an F32 [8, 2] tensor at 0 and a Q8_0 [32] tensor
// at 64, data section ending exactly at the last tensor's end.
RawFile valid_raw_file();

struct MalformedCase {
  std::string name;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expect;  // substrings the error message must contain
  ErrorCode code = ErrorCode::malformed_file;
};

std::vector<MalformedCase> malformed_corpus();

// A Writer holding every metadata value type (scalars, strings, arrays of each, nested arrays,
// empty arrays) and tensors of several dtypes with deterministic contents.
Writer sample_writer();
// The byte at position i of the sample tensor `index`'s data.
uint8_t sample_byte(size_t tensor_index, size_t i);

}  // namespace memra::gguf::testing
