// `memra inspect FILE [--json] [--items N]`: shows a GGUF file's version, architecture, metadata
// (long arrays summarized by type, count and first items), tensors (name, type, shape in ggml
// order, bytes, offset) and the parameter and byte totals. The file is validated by the reader;
// a malformed file is an Error that main() reports with exit code 2.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "formats/gguf.h"

namespace memra::cli {
namespace {

using nlohmann::ordered_json;

struct InspectOptions {
  std::string path;
  bool json = false;
  size_t items = 8;  // array items shown before the summary cuts off
};

constexpr const char* kUsage =
    "usage: memra inspect FILE.gguf [--json] [--items N]\n"
    "  --json      machine-readable output\n"
    "  --items N   array items shown per metadata array (default 8)\n";

InspectOptions parse_options(const Args& args) {
  InspectOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--items" && i + 1 < args.size()) {
      try {
        o.items = std::stoul(args[++i]);
      } catch (const std::exception&) {
        fail(ErrorCode::invalid_argument, "--items expects a number, got '{}'", args[i]);
      }
    } else if (!a.empty() && a[0] == '-') {
      fail(ErrorCode::invalid_argument, "unknown option '{}'\n{}", a, kUsage);
    } else if (o.path.empty()) {
      o.path = a;
    } else {
      fail(ErrorCode::invalid_argument, "unexpected argument '{}'\n{}", a, kUsage);
    }
  }
  if (o.path.empty()) fail(ErrorCode::invalid_argument, "missing FILE\n{}", kUsage);
  return o;
}

// A metadata value as JSON; arrays keep their first `items` entries at every nesting level.
ordered_json value_json(const gguf::Value& v, size_t items) {
  return std::visit(
      [&](const auto& x) -> ordered_json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, gguf::Array>) {
          ordered_json out = ordered_json::array();
          for (size_t i = 0; i < x.items.size() && i < items; ++i)
            out.push_back(value_json(x.items[i], items));
          return out;
        } else {
          return x;
        }
      },
      v.data);
}

ordered_json entry_json(const gguf::KeyValue& kv, size_t items) {
  ordered_json e;
  e["key"] = kv.first;
  e["type"] = gguf::value_type_name(kv.second.type);
  if (const auto* a = std::get_if<gguf::Array>(&kv.second.data)) {
    e["element_type"] = gguf::value_type_name(a->element_type);
    e["count"] = a->items.size();
    e["items"] = value_json(kv.second, items);
    e["truncated"] = a->items.size() > items;
  } else {
    e["value"] = value_json(kv.second, items);
  }
  return e;
}

uint64_t n_elements(const gguf::TensorInfo& t) {
  return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];  // checked by the reader
}

ordered_json inspect_json(const gguf::File& f, const InspectOptions& o) {
  ordered_json out;
  out["path"] = o.path;
  out["version"] = f.version();
  out["architecture"] = f.metadata().get_string("general.architecture").value_or("");
  out["alignment"] = f.alignment();
  out["data_offset"] = f.data_offset();
  out["metadata"] = ordered_json::array();
  for (const gguf::KeyValue& kv : f.metadata().entries())
    out["metadata"].push_back(entry_json(kv, o.items));
  out["tensors"] = ordered_json::array();
  uint64_t params = 0;
  uint64_t bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    ordered_json j;
    j["name"] = t.name;
    j["type"] = dtype_name(t.dtype);
    j["shape"] = std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
    j["n_elements"] = n_elements(t);
    j["n_bytes"] = t.n_bytes;
    j["offset"] = t.offset;
    j["file_offset"] = f.data_offset() + t.offset;
    out["tensors"].push_back(std::move(j));
    params += n_elements(t);
    bytes += t.n_bytes;
  }
  out["n_tensors"] = f.tensors().size();
  out["n_parameters"] = params;
  out["tensor_bytes"] = bytes;
  return out;
}

// Scalars and strings on one line: control characters escaped, long text cut.
std::string short_text(const ordered_json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 100) s = s.substr(0, 100) + fmt::format("... ({} chars)", s.size());
  return s;
}

std::string human_count(uint64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", static_cast<double>(n) / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
  return fmt::format("{}", n);
}

void print_text(const ordered_json& j) {
  std::string out;
  out += fmt::format("file:         {}\n", j["path"].get<std::string>());
  out += fmt::format("format:       GGUF v{}, alignment {}, tensor data at offset {}\n",
                     j["version"].get<uint32_t>(), j["alignment"].get<uint64_t>(),
                     j["data_offset"].get<uint64_t>());
  out += fmt::format("architecture: {}\n", j["architecture"].get<std::string>());
  out += fmt::format("\nmetadata ({} entries):\n", j["metadata"].size());
  for (const ordered_json& e : j["metadata"]) {
    if (e.contains("count")) {
      const std::string more = e["truncated"].get<bool>() ? ", ..." : "";
      std::string items = short_text(e["items"]);
      if (!more.empty() && items.size() > 1) items.insert(items.size() - 1, more);
      out += fmt::format("  {:<44} ARRAY[{}] x{} {}\n", e["key"].get<std::string>(),
                         e["element_type"].get<std::string>(), e["count"].get<uint64_t>(), items);
    } else {
      out += fmt::format("  {:<44} {:<8} {}\n", e["key"].get<std::string>(),
                         e["type"].get<std::string>(), short_text(e["value"]));
    }
  }
  out += fmt::format("\ntensors ({}):\n", j["n_tensors"].get<uint64_t>());
  out += fmt::format("  {:<40} {:<8} {:<22} {:>12} {:>12}\n", "name", "type", "shape", "bytes",
                     "offset");
  for (const ordered_json& t : j["tensors"]) {
    out += fmt::format("  {:<40} {:<8} {:<22} {:>12} {:>12}\n", t["name"].get<std::string>(),
                       t["type"].get<std::string>(), t["shape"].dump(),
                       t["n_bytes"].get<uint64_t>(), t["offset"].get<uint64_t>());
  }
  const uint64_t bytes = j["tensor_bytes"].get<uint64_t>();
  out += fmt::format("\nparameters:   {} ({})\n", j["n_parameters"].get<uint64_t>(),
                     human_count(j["n_parameters"].get<uint64_t>()));
  out += fmt::format("tensor bytes: {} ({:.1f} MiB)\n", bytes,
                     static_cast<double>(bytes) / (1024.0 * 1024.0));
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int run_inspect(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const InspectOptions o = parse_options(args);
  const gguf::File f = gguf::File::open(o.path);
  const ordered_json j = inspect_json(f, o);
  if (o.json) {
    const std::string s = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  } else {
    print_text(j);
  }
  return 0;
}

const Registration kReg{{"inspect", "show a GGUF file's metadata and tensors", &run_inspect}};

}  // namespace
}  // namespace memra::cli
