// `memra bench --compare`: baselines and receipts read with errors that name the file and the
// field, figures matched to entries, and the comparison as a table and as JSON (bench_compare.h).
#include "bench_compare.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace memra::cli::bench {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

json read_json(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::invalid_argument, "{} {}: cannot be read", what, path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(ErrorCode::invalid_argument, "{} {}: not JSON ({})", what, path, e.what());
  }
}

// The field `key` of object `j` at `where` (for the message), of the type `ok` accepts.
template <typename Ok>
const json& field(const json& j, const std::string& key, const std::string& where, const char* type,
                  Ok ok) {
  if (!j.is_object() || !j.contains(key))
    fail(ErrorCode::invalid_argument, "{} has no '{}'", where, key);
  const json& v = j.at(key);
  if (!ok(v)) fail(ErrorCode::invalid_argument, "{}.{} is not {}", where, key, type);
  return v;
}

std::string string_field(const json& j, const std::string& key, const std::string& where) {
  return field(j, key, where, "a string", [](const json& v) { return v.is_string(); })
      .get<std::string>();
}

// A number, or empty for null.
std::optional<double> number_or_null(const json& j, const std::string& key,
                                     const std::string& where) {
  const json& v = field(j, key, where, "a number or null",
                        [](const json& x) { return x.is_number() || x.is_null(); });
  if (v.is_null()) return std::nullopt;
  return v.get<double>();
}

// A string field that may be absent: `fallback` then.
std::string optional_string(const json& j, const std::string& key, const std::string& where,
                            const std::string& fallback) {
  return j.contains(key) ? string_field(j, key, where) : fallback;
}

BaselineEntry parse_entry(const json& j, const std::string& where) {
  BaselineEntry e;
  e.model = string_field(j, "model", where);
  e.file_type = string_field(j, "file_type", where);
  e.figure = string_field(j, "figure", where);
  if (j.contains("also_matches")) {
    const json& also = field(j, "also_matches", where, "an array of strings", [](const json& v) {
      return v.is_array() &&
             std::all_of(v.begin(), v.end(), [](const json& s) { return s.is_string(); });
    });
    e.also_matches = also.get<std::vector<std::string>>();
  }
  e.unit = optional_string(j, "unit", where, "tok/s");
  e.baseline = number_or_null(j, "baseline", where);
  e.target = number_or_null(j, "target", where);
  const std::string better = optional_string(j, "better", where, "higher");
  if (better != "higher" && better != "lower")
    fail(ErrorCode::invalid_argument, "{}.better is '{}', not higher or lower", where, better);
  e.higher_is_better = better == "higher";
  return e;
}

std::string fmt_value(std::optional<double> v) {
  return v ? fmt::format("{:.1f}", *v) : "-";
}

std::string metric_name(const CompareRow& r) {
  std::string name = fmt::format("{} {} {}", r.model, r.file_type, r.figure);
  if (r.unit != "tok/s") name += fmt::format(" ({})", r.unit);
  return name;
}

std::vector<std::string> row_cells(const CompareRow& r) {
  const std::optional<double> ratio = compare_ratio(r), to_target = compare_target_ratio(r);
  const std::optional<bool> met = compare_target_met(r);
  std::string target = "-", vs_target = "-";
  if (r.entry && r.entry->target)
    target = fmt::format("{} {:.6g}", r.entry->higher_is_better ? ">=" : "<=", *r.entry->target);
  if (to_target) vs_target = fmt::format("{:.3f} {}", *to_target, *met ? "met" : "not met");
  return {metric_name(r),
          fmt_value(r.memra),
          fmt_value(r.entry ? r.entry->baseline : std::nullopt),
          ratio ? fmt::format("{:.3f}", *ratio) : "-",
          target,
          vs_target};
}

// One Markdown table of `rows`, columns as wide as their widest cell.
std::string markdown_table(const std::string& peer, const std::vector<const CompareRow*>& rows) {
  std::vector<std::vector<std::string>> cells = {
      {"metric (tok/s unless named)", "memra", peer, "memra/" + peer, "target", "memra/target"}};
  for (const CompareRow* r : rows) cells.push_back(row_cells(*r));
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string out;
  for (size_t i = 0; i < cells.size(); ++i) {
    out += "|";
    for (size_t c = 0; c < cells[i].size(); ++c)
      out += c == 0 ? fmt::format(" {:<{}} |", cells[i][c], width[c])
                    : fmt::format(" {:>{}} |", cells[i][c], width[c]);
    out += "\n";
    if (i > 0) continue;
    out += "|";
    for (size_t w : width) out += std::string(w + 2, '-') + "|";
    out += "\n";
  }
  return out;
}

bool same_entry(const BaselineEntry& a, const BaselineEntry& b) {
  return a.model == b.model && a.file_type == b.file_type && a.figure == b.figure;
}

}  // namespace

Baselines baselines_parse(const json& j, const std::string& path) {
  Baselines b;
  b.path = path;
  if (!j.is_object() || j.value("what", "") != "bench-baselines")
    fail(ErrorCode::invalid_argument,
         "--compare {}: not a baselines file (\"what\" is not \"bench-baselines\")", path);
  const std::string where = "--compare " + path;
  b.peer = string_field(j, "peer", where);
  b.gpu = string_field(j, "gpu", where);
  b.date = string_field(j, "date", where);
  const json& source =
      field(j, "source", where, "an object", [](const json& v) { return v.is_object(); });
  b.source_commit = string_field(source, "commit", where + " source");
  const json& shapes =
      field(j, "shapes", where, "an object", [](const json& v) { return v.is_object(); });
  for (const auto& [id, s] : shapes.items()) {
    const std::string at = fmt::format("{} shapes.{}", where, id);
    const json& params = field(s, "parameters", at, "a positive integer", [](const json& v) {
      return v.is_number_unsigned() && v.get<uint64_t>() > 0;
    });
    b.shapes.push_back({id, string_field(s, "architecture", at), params.get<uint64_t>()});
  }
  const json& entries =
      field(j, "entries", where, "an array", [](const json& v) { return v.is_array(); });
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string at = fmt::format("{} entries[{}]", where, i);
    BaselineEntry e = parse_entry(entries[i], at);
    if (std::none_of(b.shapes.begin(), b.shapes.end(),
                     [&](const BaselineShape& s) { return s.id == e.model; }))
      fail(ErrorCode::invalid_argument, "{}.model '{}' is not one of the file's shapes", at,
           e.model);
    for (const BaselineEntry& other : b.entries)
      if (same_entry(other, e))
        fail(ErrorCode::invalid_argument, "{} repeats {} {} '{}'", at, e.model, e.file_type,
             e.figure);
    b.entries.push_back(std::move(e));
  }
  return b;
}

Baselines baselines_load(const std::string& path) {
  return baselines_parse(read_json(path, "--compare"), path);
}

const BaselineShape* baselines_shape(const Baselines& b, const ComparedModel& m) {
  for (const BaselineShape& s : b.shapes)
    if (s.architecture == m.architecture && s.parameters == m.parameters) return &s;
  return nullptr;
}

// The KV cache type the peer's baselines ran (llama.cpp's default), which memra's CUDA default is.
constexpr const char* kBaselineKvDtype = "F16";

std::vector<CompareRow> compare_figures(const Baselines& b, const ComparedModel& m,
                                        const std::vector<ComparedFigure>& figures,
                                        const std::string& source) {
  const BaselineShape* shape = baselines_shape(b, m);
  const bool other_kv = !m.kv_dtype.empty() && m.kv_dtype != kBaselineKvDtype;
  const bool other_gpu = !m.gpu.empty() && m.gpu != b.gpu;
  std::vector<CompareRow> rows;
  for (const ComparedFigure& f : figures) {
    CompareRow r;
    r.model = shape ? shape->id : m.id;
    r.file_type = m.file_type;
    r.figure = f.name;
    r.unit = f.unit;
    r.source = source;
    r.deterministic = m.deterministic;
    if (other_kv) r.kv_dtype = m.kv_dtype;
    if (other_gpu) r.gpu = m.gpu;
    r.memra = f.median;
    if (shape && !other_kv && !other_gpu) {
      const BaselineEntry* exact = nullptr;
      const BaselineEntry* alias = nullptr;
      for (const BaselineEntry& e : b.entries) {
        if (e.model != shape->id || e.file_type != m.file_type || e.unit != f.unit) continue;
        if (e.figure == f.name) exact = &e;
        const auto& also = e.also_matches;
        if (alias == nullptr && std::find(also.begin(), also.end(), f.name) != also.end())
          alias = &e;
      }
      if (const BaselineEntry* e = exact ? exact : alias) r.entry = *e;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<CompareRow> compare_unmeasured(const Baselines& b,
                                           const std::vector<CompareRow>& rows) {
  std::vector<CompareRow> out;
  for (const BaselineEntry& e : b.entries) {
    if (std::any_of(rows.begin(), rows.end(),
                    [&](const CompareRow& r) { return r.entry && same_entry(*r.entry, e); }))
      continue;
    CompareRow r;
    r.model = e.model;
    r.file_type = e.file_type;
    r.figure = e.figure;
    r.unit = e.unit;
    r.entry = e;
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<double> compare_ratio(const CompareRow& r) {
  if (!r.memra || !r.entry || !r.entry->baseline || *r.entry->baseline <= 0) return std::nullopt;
  return *r.memra / *r.entry->baseline;
}

std::optional<double> compare_target_ratio(const CompareRow& r) {
  if (!r.memra || !r.entry || !r.entry->target || *r.entry->target <= 0) return std::nullopt;
  return *r.memra / *r.entry->target;
}

std::optional<bool> compare_target_met(const CompareRow& r) {
  if (!r.memra || !r.entry || !r.entry->target) return std::nullopt;
  return r.entry->higher_is_better ? *r.memra >= *r.entry->target : *r.memra <= *r.entry->target;
}

std::string compare_table(const Baselines& b, const std::vector<CompareRow>& rows) {
  std::string out = fmt::format("\ncompared with {} ({}, {}, {}): {}\n", b.peer, b.source_commit,
                                b.gpu, b.date, b.path);
  // Groups in order of first appearance; rows with no memra figure form the last group.
  std::vector<std::string> sources;
  for (const CompareRow& r : rows)
    if (r.memra && std::find(sources.begin(), sources.end(), r.source) == sources.end())
      sources.push_back(r.source);
  for (const std::string& source : sources) {
    std::vector<const CompareRow*> group;
    for (const CompareRow& r : rows)
      if (r.memra && r.source == source) group.push_back(&r);
    std::string mode =
        group.front()->deterministic ? "" : " (--deterministic off: not batch-invariant)";
    if (!group.front()->kv_dtype.empty())
      mode += fmt::format(" (KV cache {}: listed, not compared; the baselines ran {})",
                          group.front()->kv_dtype, kBaselineKvDtype);
    if (!group.front()->gpu.empty())
      mode += fmt::format(" (ran on {}: listed, not compared; the baselines ran on {})",
                          group.front()->gpu, b.gpu);
    if (!source.empty())
      out += fmt::format("\n{}{}:\n", source, mode);
    else if (!mode.empty())
      out += fmt::format("\nthis run{}:\n", mode);
    out += markdown_table(b.peer, group);
  }
  std::vector<const CompareRow*> unmeasured;
  for (const CompareRow& r : rows)
    if (!r.memra) unmeasured.push_back(&r);
  if (!unmeasured.empty()) {
    out += "\nnot measured by these receipts:\n";
    out += markdown_table(b.peer, unmeasured);
  }
  return out;
}

ordered_json baselines_json(const Baselines& b) {
  return {{"path", b.path},
          {"peer", b.peer},
          {"gpu", b.gpu},
          {"date", b.date},
          {"source_commit", b.source_commit}};
}

ordered_json compare_json(const std::vector<CompareRow>& rows) {
  auto opt = [](const auto& v) { return v ? ordered_json(*v) : ordered_json(); };
  ordered_json out = ordered_json::array();
  for (const CompareRow& r : rows) {
    const BaselineEntry* e = r.entry ? &*r.entry : nullptr;
    ordered_json j = {{"model", r.model},
                      {"file_type", r.file_type},
                      {"figure", r.figure},
                      {"unit", r.unit},
                      {"memra", opt(r.memra)}};
    if (r.memra) j["deterministic"] = r.deterministic;
    if (!r.kv_dtype.empty()) j["kv_dtype"] = r.kv_dtype;
    if (!r.gpu.empty()) j["gpu"] = r.gpu;
    j["baseline_figure"] = e ? ordered_json(e->figure) : ordered_json();
    j["baseline"] = e ? opt(e->baseline) : ordered_json();
    j["ratio"] = opt(compare_ratio(r));
    j["target"] = e ? opt(e->target) : ordered_json();
    j["better"] = e ? ordered_json(e->higher_is_better ? "higher" : "lower") : ordered_json();
    j["target_ratio"] = opt(compare_target_ratio(r));
    j["target_met"] = opt(compare_target_met(r));
    if (!r.source.empty()) j["receipt"] = r.source;
    out.push_back(std::move(j));
  }
  return out;
}

BenchReceipt bench_receipt_parse(const json& j, const std::string& path) {
  const std::string where = "--receipts " + path;
  if (!j.is_object() || !j.contains("what"))
    fail(ErrorCode::invalid_argument, "{}: not a bench receipt (no \"what\")", where);
  if (j.at("what") != "bench")
    fail(ErrorCode::invalid_argument, "{}: not a bench receipt (\"what\" is {}, not \"bench\")",
         where, j.at("what").dump());
  BenchReceipt r;
  r.path = path;
  const json& model =
      field(j, "model", where, "an object", [](const json& v) { return v.is_object(); });
  r.model.id = string_field(model, "id", where + " model");
  r.model.architecture = string_field(model, "architecture", where + " model");
  r.model.file_type = string_field(model, "file_type", where + " model");
  r.model.parameters =
      field(model, "parameters", where + " model", "an integer", [](const json& v) {
        return v.is_number_unsigned();
      }).get<uint64_t>();
  // Receipts before the flag have no options.deterministic: they ran the default.
  if (j.contains("options") && j["options"].is_object() && j["options"].contains("deterministic")) {
    const json& d = j["options"]["deterministic"];
    if (!d.is_boolean())
      fail(ErrorCode::invalid_argument, "{} options.deterministic is not a boolean", where);
    r.model.deterministic = d.get<bool>();
  }
  // Receipts before --kv-dtype have no options.kv_dtype; null: none asked (the default).
  if (j.contains("options") && j["options"].is_object() && j["options"].contains("kv_dtype") &&
      !j["options"]["kv_dtype"].is_null()) {
    if (!j["options"]["kv_dtype"].is_string())
      fail(ErrorCode::invalid_argument, "{} options.kv_dtype is not a string", where);
    r.model.kv_dtype = string_field(j, "kv_dtype", where);  // the type as run
  }
  // The device: gpu.name, or "cpu" where gpu is null on a CPU run; receipts before the field have
  // neither (compared as before).
  if (j.contains("gpu") && j["gpu"].is_object())
    r.model.gpu = string_field(j["gpu"], "name", where + " gpu");
  else if (j.contains("gpu") && j["gpu"].is_null() && j.contains("device") && j["device"] == "cpu")
    r.model.gpu = "cpu";
  else if (j.contains("gpu") && !j["gpu"].is_null())
    fail(ErrorCode::invalid_argument, "{} gpu is not an object", where);
  const json& figures =
      field(j, "figures", where, "an array", [](const json& v) { return v.is_array(); });
  for (size_t i = 0; i < figures.size(); ++i) {
    const std::string at = fmt::format("{} figures[{}]", where, i);
    ComparedFigure f;
    f.name = string_field(figures[i], "name", at);
    f.unit = optional_string(figures[i], "unit", at, "tok/s");
    f.median = field(figures[i], "median", at, "a number", [](const json& v) {
                 return v.is_number();
               }).get<double>();
    r.figures.push_back(std::move(f));
  }
  return r;
}

BenchReceipt bench_receipt_load(const std::string& path) {
  return bench_receipt_parse(read_json(path, "--receipts"), path);
}

}  // namespace memra::cli::bench
