// The malformed GGUF corpus: each case breaks one structural field of valid_raw_file() and names
// the error text the reader must produce. Categories follow reliability-and-conventions.md A1.1
// (published CVEs), A1.2 (2026 reports) and A1.3 (llama.cpp's test-gguf checklist).
#include <cstring>
#include <limits>

#include "gguf_test_files.h"

namespace memra::gguf::testing {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

struct Corpus {
  std::vector<MalformedCase> cases;

  void add(std::string name, std::vector<uint8_t> bytes, std::vector<std::string> expect,
           ErrorCode code = ErrorCode::malformed_file) {
    cases.push_back({std::move(name), std::move(bytes), std::move(expect), code});
  }
  void add(std::string name, const RawFile& f, std::vector<std::string> expect,
           ErrorCode code = ErrorCode::malformed_file) {
    add(std::move(name), build(f), std::move(expect), code);
  }
};

std::vector<uint8_t> cat(std::vector<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A file with one extra metadata entry (type, payload) in front of the valid ones.
RawFile with_kv(const std::string& key, uint32_t type, std::vector<uint8_t> payload) {
  RawFile f = valid_raw_file();
  f.kvs.insert(f.kvs.begin(), RawKv{key, type, std::move(payload)});
  return f;
}

// A file whose first tensor is replaced.
RawFile with_tensor0(RawTensor t) {
  RawFile f = valid_raw_file();
  f.tensors[0] = std::move(t);
  return f;
}

// The valid file cut right after `n` bytes.
std::vector<uint8_t> prefix(size_t n) {
  std::vector<uint8_t> b = build(valid_raw_file());
  b.resize(std::min(n, b.size()));
  return b;
}

void header_cases(Corpus& c) {
  c.add("empty_file", std::vector<uint8_t>{}, {"magic at offset 0", "empty"});
  c.add("short_magic", std::vector<uint8_t>{'G', 'G'}, {"magic at offset 0"});
  RawFile f = valid_raw_file();
  f.magic = 0x58554747u;  // "GGUX"
  c.add("bad_magic", f, {"magic at offset 0", "GGUX"});
  f = valid_raw_file();
  f.version = 1;
  c.add("version_1", f, {"version at offset 4", "version 1"}, ErrorCode::unsupported);
  f.version = 4;
  c.add("version_future", f, {"version at offset 4", "version 4"}, ErrorCode::unsupported);
  f.version = 0;
  c.add("version_0", f, {"version at offset 4", "version 0"}, ErrorCode::unsupported);
  f.version = 0x03000000u;
  c.add("big_endian", f, {"version at offset 4", "big-endian"}, ErrorCode::unsupported);
  c.add("truncated_version", prefix(6), {"version at offset 4", "truncated"});
  c.add("truncated_tensor_count", prefix(12), {"tensor_count at offset 8", "truncated"});
  c.add("truncated_kv_count", prefix(20), {"kv_count at offset 16", "truncated"});
  f = valid_raw_file();
  f.tensor_count = uint64_t{1} << 63;  // CVE-2024-21836
  c.add("huge_tensor_count", f, {"tensor_count at offset 8", "exceeds the limit"});
  f = valid_raw_file();
  f.tensor_count = 1000;
  c.add("tensor_count_beyond_file", f, {"tensor_count at offset 8", "cannot fit"});
  f = valid_raw_file();
  f.kv_count = kU64Max;  // CVE-2024-23605
  c.add("huge_kv_count", f, {"kv_count at offset 16", "exceeds the limit"});
  f = valid_raw_file();
  f.kv_count = 5000;
  c.add("kv_count_beyond_file", f, {"kv_count at offset 16", "cannot fit"});
  f = valid_raw_file();
  f.kv_count = 4;  // one more than present: the tensor infos are read as a key
  c.add("kv_count_off_by_one", f, {"tensor #0 name length at offset 181", "exceeds the limit"});
}

void key_cases(Corpus& c) {
  // The first key length sits at offset 24.
  std::vector<uint8_t> b = build(valid_raw_file());
  std::memcpy(b.data() + 24, le_u64(uint64_t{1} << 62).data(), 8);  // CVE-2024-23496
  c.add("huge_key_length", b, {"metadata entry #0 key length at offset 24", "exceeds the limit"});
  b = build(valid_raw_file());
  std::memcpy(b.data() + 24, le_u64(60000).data(), 8);
  c.add("key_length_beyond_file", b, {"metadata entry #0 key length", "truncated"});
  c.add("empty_key", with_kv("", 4, le_u32(1)), {"metadata entry #0 key", "empty"});
  c.add("bad_value_type", with_kv("x.bad", 13, le_u32(1)),
        {"metadata key 'x.bad' type at offset", "unknown value type 13"});
  c.add("value_type_max", with_kv("x.bad", 0xffffffffu, {}),
        {"metadata key 'x.bad' type", "unknown value type 4294967295"});
  c.add("huge_string_length", with_kv("general.name", 8, le_u64(kU64Max)),
        {"metadata key 'general.name' value length", "exceeds the limit"});
  c.add("string_beyond_file", with_kv("general.name", 8, le_u64(1u << 20)),
        {"metadata key 'general.name' value length", "truncated"});
  RawFile f = valid_raw_file();
  f.kvs.push_back(f.kvs[1]);
  c.add("duplicate_key", f, {"metadata key 'llama.block_count'", "duplicate key"});
  c.add("bool_not_0_or_1", with_kv("x.flag", 7, {2}), {"metadata key 'x.flag' value", "BOOL"});
  c.add("key_binary_text", with_kv(std::string("k\x01\xff", 3), 13, {}),
        {"metadata key 'k\\x01\\xff' type", "unknown value type"});
  c.add("truncated_in_value", prefix(24 + 8 + 20 + 4 + 8 + 2),
        {"metadata key 'general.architecture' value", "truncated"});
}

void array_cases(Corpus& c) {
  // CVE-2024-21825: array count * element size overflow.
  c.add("huge_array_count", with_kv("x.arr", 9, cat({le_u32(4), le_u64(kU64Max / 2)})),
        {"metadata key 'x.arr' array count", "exceeds the limit"});
  c.add("array_beyond_file", with_kv("x.arr", 9, cat({le_u32(4), le_u64(1000000)})),
        {"metadata key 'x.arr' array count", "cannot fit"});
  c.add("array_bad_element_type", with_kv("x.arr", 9, cat({le_u32(99), le_u64(1)})),
        {"metadata key 'x.arr' array element type", "unknown value type 99"});
  std::vector<uint8_t> nested;
  for (int d = 0; d < 9; ++d) nested = cat({nested, le_u32(9), le_u64(1)});
  nested = cat({nested, le_u32(4), le_u64(0)});
  c.add("array_nesting_too_deep", with_kv("x.deep", 9, nested),
        {"metadata key 'x.deep'", "nested 9 deep exceed the limit of 8"});
  c.add("nested_array_huge_inner_count",
        with_kv("x.nest", 9, cat({le_u32(9), le_u64(1), le_u32(4), le_u64(kU64Max)})),
        {"metadata key 'x.nest' item 0 array count", "exceeds the limit"});
  c.add("string_array_huge_item_length",
        with_kv("tokenizer.ggml.tokens", 9,
                cat({le_u32(8), le_u64(2), gguf_string("ok"), le_u64(uint64_t{1} << 40)})),
        {"metadata key 'tokenizer.ggml.tokens' item 1 length", "exceeds the limit"});
  c.add("array_count_over_item_cap",
        with_kv("tokenizer.ggml.tokens", 9, cat({le_u32(8), le_u64((1u << 24) + 1)})),
        {"metadata key 'tokenizer.ggml.tokens' array count", "exceeds the limit of 16777216"});
  // valid_raw_file()'s FLOAT32 array count is at offset 139; cut inside its items.
  c.add("array_truncated_items", prefix(151),
        {"metadata key 'tokenizer.ggml.scores' array count at offset 139", "cannot fit"});
  c.add("string_array_truncated_item",
        with_kv("x.strs", 9, cat({le_u32(8), le_u64(2), gguf_string("ab"), le_u64(1000)})),
        {"metadata key 'x.strs' item 1 length", "truncated"});
}

void alignment_cases(Corpus& c) {
  // A1.2: general.alignment type confusion and huge values; A1.3 bad alignment.
  c.add("alignment_int32", with_kv("general.alignment", 5, le_u32(32)),
        {"metadata key 'general.alignment' at offset", "not UINT32"});
  c.add("alignment_zero", with_kv("general.alignment", 4, le_u32(0)),
        {"metadata key 'general.alignment'", "not a power of two"});
  c.add("alignment_not_power_of_two", with_kv("general.alignment", 4, le_u32(48)),
        {"metadata key 'general.alignment'", "not a power of two"});
  c.add("alignment_2_pow_31", with_kv("general.alignment", 4, le_u32(0x80000000u)),
        {"metadata key 'general.alignment'", "2147483648"});
  c.add("alignment_inconsistent_offset", with_kv("general.alignment", 4, le_u32(128)),
        {"tensor 'b.weight' offset at offset", "not a multiple of the alignment 128"});
  RawFile f = with_kv("general.alignment", 4, le_u32(64));
  f.tensors[1].offset = 0;
  f.tensors[0].offset = 64;
  f.pad_alignment = 32;  // data padded to 32, not the declared 64: the file comes up short
  c.add("alignment_inconsistent_data", f, {"tensor 'a.weight'", "past the end of the file"});
}

void tensor_info_cases(Corpus& c) {
  RawFile f = valid_raw_file();
  f.tensors[0].name = "";
  c.add("tensor_empty_name", f, {"tensor #0 name at offset", "empty"});
  f.tensors[0].name = std::string(300, 'n');
  c.add("tensor_name_too_long", f, {"tensor #0 name length at offset", "exceeds the limit of 256"});
  f = valid_raw_file();
  f.tensors[1].name = f.tensors[0].name;
  c.add("tensor_duplicate_name", f, {"tensor #1 name at offset", "duplicate tensor name"});
  c.add("tensor_n_dims_0", with_tensor0({"a.weight", {}, 0, 0, 0u}),
        {"tensor 'a.weight' n_dims at offset", "not in 1..4"});
  c.add("tensor_n_dims_5", with_tensor0({"a.weight", {1, 1, 1, 1, 16}, 0, 0, std::nullopt}),
        {"tensor 'a.weight' n_dims", "5 is not in 1..4"});
  c.add("tensor_dim_zero", with_tensor0({"a.weight", {16, 0}, 0, 0, std::nullopt}),
        {"tensor 'a.weight' dims[1] at offset", "0 is not in"});
  c.add("tensor_dim_2_pow_63", with_tensor0({"a.weight", {uint64_t{1} << 63}, 0, 0, std::nullopt}),
        {"tensor 'a.weight' dims[0]"});
  // CVE-2024-21802 / CVE-2026-33298: ne product overflows.
  c.add("tensor_dims_product_overflow",
        with_tensor0({"a.weight", {1ull << 32, 1ull << 32, 2}, 0, 0, std::nullopt}),
        {"tensor 'a.weight' size", "overflows"});
  // A1.2 GGML_PAD wrap: F32 with ne[0] = SIZE_MAX/4 gives nbytes near SIZE_MAX.
  c.add("tensor_f32_pad_wrap", with_tensor0({"a.weight", {kU64Max / 4}, 0, 0, std::nullopt}),
        {"tensor 'a.weight' offset", "overflows"});
  // A1.2 ggml_row_size: elements fit but naive ne*type_size would wrap; the exact size is used
  // and does not fit the file.
  c.add("tensor_q8_row_size", with_tensor0({"a.weight", {1ull << 62}, 8, 0, std::nullopt}),
        {"tensor 'a.weight' offset", "past the end of the file"});
  c.add("tensor_unknown_type_4", with_tensor0({"a.weight", {8, 2}, 4, 0, std::nullopt}),
        {"tensor 'a.weight' type at offset", "unknown GGML type id 4"}, ErrorCode::unsupported);
  c.add("tensor_internal_type_1000", with_tensor0({"a.weight", {8, 2}, 1000, 0, std::nullopt}),
        {"tensor 'a.weight' type", "unknown GGML type id 1000"}, ErrorCode::unsupported);
  c.add("tensor_partial_block", with_tensor0({"a.weight", {100}, 12, 0, std::nullopt}),
        {"tensor 'a.weight' dims[0]", "not a multiple of the Q4_K block size 256"});
  // Tensor b's info starts at offset 207 (name 207..223, n_dims 223..227, dims[0] 227..235).
  c.add("truncated_tensor_dims", prefix(230),
        {"tensor 'b.weight' dims[0] at offset 227", "truncated"});
}

void tensor_data_cases(Corpus& c) {
  RawFile f = valid_raw_file();
  f.tensors[1].offset = 65;
  c.add("tensor_misaligned_offset", f, {"tensor 'b.weight' offset at offset", "alignment 32"});
  f.tensors[1].offset = 4096;
  c.add("tensor_out_of_range", f, {"tensor 'b.weight' offset", "past the end of the file"});
  f.tensors[1].offset = kU64Max - 31;  // aligned, and offset + size wraps
  c.add("tensor_offset_wraps", f, {"tensor 'b.weight' offset", "overflows"});
  f = valid_raw_file();
  f.tensors[1].offset = 0;
  c.add("tensors_overlap_same_offset", f, {"overlaps tensor"});
  f = valid_raw_file();
  f.tensors[1].offset = 32;
  c.add("tensors_overlap_partially", f, {"tensor 'b.weight'", "overlaps tensor 'a.weight'"});
  f = valid_raw_file();
  f.data_bytes -= 1;
  c.add("data_one_byte_short", f, {"tensor 'b.weight'", "past the end of the file"});
  f.data_bytes = 0;
  c.add("data_missing", f, {"past the end of the file"});
  // CVE-2025-53630 / CVE-2026-27940: a running total of sizes overflows; each tensor is checked
  // on its own against the file, so no sum is needed.
  f = valid_raw_file();
  f.tensors[0].ne = {1ull << 61};
  f.tensors[1].offset = 1ull << 63;
  c.add("tensor_sizes_sum_overflow", f, {"past the end of the file"});
  // Ollama CVE-2026-7482: a tensor larger than the data that follows.
  f = valid_raw_file();
  f.tensors[0].ne = {8, 2000};
  c.add("tensor_larger_than_file", f, {"tensor 'a.weight'", "past the end of the file"});
}

}  // namespace

std::vector<MalformedCase> malformed_corpus() {
  Corpus c;
  header_cases(c);
  key_cases(c);
  array_cases(c);
  alignment_cases(c);
  tensor_info_cases(c);
  tensor_data_cases(c);
  return std::move(c.cases);
}

}  // namespace memra::gguf::testing
