// archive_dump PATH [--values]: opens a model (GGUF file or HF folder) with archive_open and
// prints its metadata and tensors as JSON, for the Python archive tests. Each tensor has name,
// dtype, ne (ggml order), n_bytes and fnv1a64 (hex, over its bytes); --values adds the elements
// of F32/F16/BF16 tensors as floats. Errors print "error: <code>: <message>" and exit with
// error_exit_code. Large arrays in metadata (vocabularies) are cut to their first 16 items.
#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "formats/model_archive.h"

namespace {

using memra::gguf::Value;
using nlohmann::ordered_json;

ordered_json value_to_json(const Value& v) {
  if (const auto* a = std::get_if<memra::gguf::Array>(&v.data)) {
    ordered_json items = ordered_json::array();
    for (size_t i = 0; i < a->items.size() && i < 16; ++i)
      items.push_back(value_to_json(a->items[i]));
    return items;
  }
  return std::visit(
      [](const auto& x) -> ordered_json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, memra::gguf::Array>) {
          return nullptr;
        } else {
          return x;
        }
      },
      v.data);
}

uint64_t fnv1a64(const uint8_t* p, uint64_t n) {
  uint64_t h = 14695981039346656037ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

ordered_json tensor_values(const memra::TensorView& t) {
  ordered_json out = ordered_json::array();
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (uint64_t i = 0; i < t.n_elements(); ++i) {
    if (t.dtype == memra::DType::f32) {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      out.push_back(v);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out.push_back(t.dtype == memra::DType::f16 ? memra::f16_to_f32(h) : memra::bf16_to_f32(h));
    }
  }
  return out;
}

ordered_json dump(const memra::ModelArchive& archive, bool values) {
  ordered_json out;
  out["kind"] = archive.kind == memra::ArchiveKind::gguf ? "gguf" : "hf_folder";
  ordered_json md = ordered_json::object();
  ordered_json types = ordered_json::object();
  for (const auto& [key, value] : archive.metadata.entries()) {
    md[key] = value_to_json(value);
    types[key] = std::string(memra::gguf::value_type_name(value.type));
  }
  out["metadata"] = md;
  out["metadata_types"] = types;
  ordered_json tensors = ordered_json::array();
  for (const memra::TensorView& t : archive.tensors) {
    ordered_json j;
    j["name"] = t.name;
    j["dtype"] = std::string(memra::dtype_name(t.dtype));
    j["ne"] = ordered_json::array();
    for (int i = 0; i < t.n_dims; ++i) j["ne"].push_back(t.ne[i]);
    j["n_bytes"] = t.n_bytes;
    j["fnv1a64"] = fmt::format("{:016x}", fnv1a64(static_cast<const uint8_t*>(t.data), t.n_bytes));
    const bool is_float = t.dtype == memra::DType::f32 || t.dtype == memra::DType::f16 ||
                          t.dtype == memra::DType::bf16;
    if (values && is_float) j["values"] = tensor_values(t);
    tensors.push_back(std::move(j));
  }
  out["tensors"] = tensors;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: archive_dump PATH [--values]\n");
    return 2;
  }
  const bool values = argc > 2 && std::strcmp(argv[2], "--values") == 0;
  try {
    const memra::ModelArchive archive = memra::archive_open(argv[1]);
    std::printf("%s\n", dump(archive, values).dump(1).c_str());
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", memra::error_code_name(e.code()), e.what());
    return memra::error_exit_code(e.code());
  }
  return 0;
}
