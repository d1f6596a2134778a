// The raw GGUF builder and the valid sample written through gguf::Writer. The malformed corpus
// (gguf_corpus.cpp) derives every case from valid_raw_file() by breaking one field.
#include "gguf_test_files.h"

#include <cstring>

namespace memra::gguf::testing {
namespace {

void append(std::vector<uint8_t>& out, const std::vector<uint8_t>& bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

}  // namespace

std::vector<uint8_t> le_u32(uint32_t v) {
  std::vector<uint8_t> out(4);
  std::memcpy(out.data(), &v, 4);
  return out;
}

std::vector<uint8_t> le_u64(uint64_t v) {
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), &v, 8);
  return out;
}

std::vector<uint8_t> gguf_string(const std::string& s) {
  std::vector<uint8_t> out(8 + s.size());
  const uint64_t n = s.size();
  std::memcpy(out.data(), &n, 8);
  if (!s.empty()) std::memcpy(out.data() + 8, s.data(), s.size());
  return out;
}

std::vector<uint8_t> build(const RawFile& f) {
  std::vector<uint8_t> out;
  append(out, le_u32(f.magic));
  append(out, le_u32(f.version));
  append(out, le_u64(f.tensor_count.value_or(f.tensors.size())));
  append(out, le_u64(f.kv_count.value_or(f.kvs.size())));
  for (const RawKv& kv : f.kvs) {
    append(out, gguf_string(kv.key));
    append(out, le_u32(kv.type));
    append(out, kv.payload);
  }
  for (const RawTensor& t : f.tensors) {
    append(out, gguf_string(t.name));
    append(out, le_u32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size()))));
    for (uint64_t ne : t.ne) append(out, le_u64(ne));
    append(out, le_u32(t.type));
    append(out, le_u64(t.offset));
  }
  if (f.pad_alignment > 0) {
    while (out.size() % f.pad_alignment != 0) out.push_back(0);
  }
  for (uint64_t i = 0; i < f.data_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}

RawFile valid_raw_file() {
  RawFile f;
  f.kvs.push_back({"general.architecture", 8, gguf_string("llama")});
  f.kvs.push_back({"llama.block_count", 4, le_u32(2)});
  std::vector<uint8_t> arr = le_u32(6);  // ARRAY of FLOAT32, 3 items
  append(arr, le_u64(3));
  for (float v : {0.5f, -1.0f, 2.0f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    append(arr, le_u32(bits));
  }
  f.kvs.push_back({"tokenizer.ggml.scores", 9, arr});
  f.tensors.push_back({"a.weight", {8, 2}, 0, 0, std::nullopt});  // F32: 64 bytes
  f.tensors.push_back({"b.weight", {32}, 8, 64, std::nullopt});   // Q8_0: 34 bytes
  f.data_bytes = 64 + 34;
  return f;
}

uint8_t sample_byte(size_t tensor_index, size_t i) {
  return static_cast<uint8_t>((i * 31 + tensor_index * 101 + 7) & 0xff);
}

Writer sample_writer() {
  Writer w;
  Metadata& md = w.metadata();
  md.set("general.architecture", Value::make_string("llama"));
  md.set("general.name", Value::make_string("memra sample \xe2\x9c\x93"));
  md.set("test.u8", {ValueType::u8, uint64_t{255}});
  md.set("test.i8", {ValueType::i8, int64_t{-128}});
  md.set("test.u16", {ValueType::u16, uint64_t{65535}});
  md.set("test.i16", {ValueType::i16, int64_t{-32768}});
  md.set("test.u32", Value::make_u32(4000000000u));
  md.set("test.i32", Value::make_i32(-2000000000));
  md.set("test.f32", Value::make_f32(1.5e-3f));
  md.set("test.bool", Value::make_bool(true));
  md.set("test.u64", Value::make_u64(18446744073709551615ull));
  md.set("test.i64", {ValueType::i64, int64_t{-9000000000000000000ll}});
  md.set("test.f64", {ValueType::f64, double{-2.718281828459045}});
  md.set("test.empty_string", Value::make_string(""));
  md.set("test.strings",
         Value::make_array(ValueType::string, {Value::make_string("a"), Value::make_string(""),
                                               Value::make_string("\xce\xbb")}));
  md.set("test.i32s", Value::make_array(ValueType::i32, {Value::make_i32(-1), Value::make_i32(7)}));
  md.set("test.f32s", Value::make_array(ValueType::f32, {Value::make_f32(0.25f)}));
  md.set("test.bools",
         Value::make_array(ValueType::boolean, {Value::make_bool(false), Value::make_bool(true)}));
  md.set("test.empty_array", Value::make_array(ValueType::u64, {}));
  md.set("test.nested",
         Value::make_array(
             ValueType::array,
             {Value::make_array(ValueType::u32, {Value::make_u32(1), Value::make_u32(2)}),
              Value::make_array(ValueType::u32, {Value::make_u32(3)})}));
  const std::vector<uint64_t> ne_f32{5, 3};
  const std::vector<uint64_t> ne_f16{7};
  const std::vector<uint64_t> ne_q8{64, 2, 1};
  const std::vector<uint64_t> ne_q4k{256, 1, 2, 1};
  struct Spec {
    const char* name;
    DType dtype;
    const std::vector<uint64_t>* ne;
  };
  const Spec specs[] = {{"token_embd.weight", DType::f32, &ne_f32},
                        {"blk.0.attn_norm.weight", DType::f16, &ne_f16},
                        {"blk.0.attn_q.weight", DType::q8_0, &ne_q8},
                        {"blk.0.ffn_up.weight", DType::q4_k, &ne_q4k}};
  for (size_t k = 0; k < std::size(specs); ++k) {
    w.add_tensor(specs[k].name, specs[k].dtype, *specs[k].ne, [k](std::span<uint8_t> out) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = sample_byte(k, i);
    });
  }
  return w;
}

}  // namespace memra::gguf::testing
