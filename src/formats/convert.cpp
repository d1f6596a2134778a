// The conversion driver: orders the archive's tensors as llama.cpp does (globals, blocks by
// layer, output last), picks each tensor's type (convert_policy.cpp), and hands gguf::Writer
// callbacks that convert one tensor at a time, its rows split over a few threads. Also reads the
// chat template that goes into tokenizer.chat_template.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "formats/convert.h"
#include "formats/hf_json.h"
#include "formats/quant.h"
#include "formats/row_workers.h"

namespace memra::convert {

namespace {

constexpr uint64_t kMaxTemplateBytes = 16u << 20;         // a chat template is a few KiB
constexpr uint64_t kMaxTokenizerConfigBytes = 64u << 20;  // added_tokens_decoder can be large

// Sort key: token_embd and other globals first, then blk.N in layer order, output* last.
std::pair<int64_t, std::string> order_key(const TensorView& t) {
  const std::string& name = t.name;
  if (name.starts_with("blk.")) {
    const size_t dot = name.find('.', 4);
    int64_t layer = 0;
    for (size_t i = 4; i < dot && i < name.size() && i < 12; ++i)
      layer = layer * 10 + (name[i] - '0');
    return {layer, name};
  }
  if (name.starts_with("output")) return {INT64_MAX, name};
  return {-1, name};
}

// Converts rows [first, last) of a tensor from its source type to `target` in `out`.
void convert_rows(const TensorView& src, DType target, std::span<uint8_t> out, uint64_t first,
                  uint64_t last) {
  const uint64_t n = src.ne[0];
  const uint64_t src_row = dtype_row_bytes(src.dtype, n, src.name);
  const uint64_t dst_row = dtype_row_bytes(target, n, src.name);
  const auto* in = static_cast<const uint8_t*>(src.data);
  std::vector<float> row(n);
  for (uint64_t r = first; r < last; ++r) {
    quant::dequantize_row(src.dtype, in + r * src_row, row.data(), static_cast<int64_t>(n));
    quant::quantize_row(target, row.data(), out.data() + r * dst_row, static_cast<int64_t>(n));
  }
}

// Fills out with the tensor at type target: a straight copy when the types agree, otherwise
// rows converted in parallel. Errors name the tensor.
void fill_tensor(const TensorView& src, DType target, std::span<uint8_t> out, int threads) {
  if (target == src.dtype) {
    if (out.size() != src.n_bytes)
      fail(ErrorCode::internal, "tensor '{}': {} bytes for a {}-byte slot", src.name, src.n_bytes,
           out.size());
    std::memcpy(out.data(), src.data, out.size());
    return;
  }
  row_workers_run(
      src.n_rows(), threads,
      [&](uint64_t first, uint64_t last) { convert_rows(src, target, out, first, last); },
      fmt::format("tensor '{}' to {}", src.name, dtype_name(target)));
}

std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::io, "cannot read '{}': {}", path.string(), ec.message());
  if (size > max_bytes)
    fail(ErrorCode::malformed_file, "'{}' is {} bytes, over the {}-byte limit", path.string(), size,
         max_bytes);
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    fail(ErrorCode::io, "cannot read '{}'", path.string());
  return text;
}

}  // namespace

bool tensor_order_less(const TensorView& a, const TensorView& b) {
  return order_key(a) < order_key(b);
}

bool read_chat_template(const std::string& folder, gguf::Metadata& out) {
  const std::filesystem::path dir(folder);
  // transformers prefers a standalone chat_template.jinja over the tokenizer_config.json entry.
  if (std::filesystem::is_regular_file(dir / "chat_template.jinja")) {
    out.set("tokenizer.chat_template", gguf::Value::make_string(read_text_file(
                                           dir / "chat_template.jinja", kMaxTemplateBytes)));
    return true;
  }
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (!std::filesystem::is_regular_file(config_path)) return false;
  const nlohmann::json config = json_read_file(config_path.string(), kMaxTokenizerConfigBytes, 64);
  if (!config.is_object() || !config.contains("chat_template")) return false;
  const nlohmann::json& tmpl = config["chat_template"];
  const std::string label = config_path.string() + ": chat_template";
  if (tmpl.is_string()) {
    out.set("tokenizer.chat_template", gguf::Value::make_string(tmpl.get<std::string>()));
    return true;
  }
  if (!tmpl.is_array())
    fail(ErrorCode::malformed_file, "{} is a {}, not a string or a list", label,
         json_type_name(tmpl));
  // Named templates: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}].
  bool found = false;
  for (const nlohmann::json& entry : tmpl) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string())
      fail(ErrorCode::malformed_file, "{}: each entry needs string 'name' and 'template'", label);
    const std::string name = entry["name"].get<std::string>();
    const std::string key =
        name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
    out.set(key, gguf::Value::make_string(entry["template"].get<std::string>()));
    found = true;
  }
  return found;
}

Summary write_gguf(const ModelArchive& archive, const gguf::Metadata& extra, const Options& options,
                   const gguf::Writer::ProgressFn& progress) {
  std::vector<const TensorView*> order;
  for (const TensorView& t : archive.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const TensorView* a, const TensorView* b) { return tensor_order_less(*a, *b); });
  const PolicyContext ctx = make_policy_context(options.mix, archive.tensors);

  gguf::Writer writer;
  for (const auto& [key, value] : archive.metadata.entries()) writer.metadata().set(key, value);
  writer.metadata().set("general.file_type", gguf::Value::make_u32(llama_file_type(options.mix)));
  writer.metadata().set("general.quantization_version", gguf::Value::make_u32(2));
  for (const auto& [key, value] : extra.entries()) writer.metadata().set(key, value);

  Summary summary;
  std::map<DType, size_t> per_type;
  const int threads = std::max(1, options.threads);
  for (const TensorView* t : order) {
    if (t->dtype != DType::f32 && t->dtype != DType::f16 && t->dtype != DType::bf16)
      fail(ErrorCode::unsupported, "tensor '{}' is {}; convert reads F32, F16 and BF16 weights",
           t->name, dtype_name(t->dtype));
    const DType target = choose_type(ctx, *t);
    ++per_type[target];
    writer.add_tensor(
        t->name, target, std::span<const uint64_t>(t->ne.data(), t->n_dims),
        [t, target, threads](std::span<uint8_t> out) { fill_tensor(*t, target, out, threads); });
  }
  uint64_t bytes = 0;
  writer.write(options.output_path, [&](size_t done, size_t total, uint64_t written, uint64_t all) {
    bytes = written;
    if (progress) progress(done, total, written, all);
  });
  summary.n_tensors = order.size();
  summary.n_bytes = bytes;
  summary.tensors_per_type.assign(per_type.begin(), per_type.end());
  return summary;
}

}  // namespace memra::convert
