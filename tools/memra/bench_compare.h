// `memra bench --compare BASELINES.json`: a peer engine's figures and the speed targets
// (bench/baselines/*.json) matched against memra bench figures, from the run just made or from
// receipts read back, as a table and as receipt JSON. Pure logic (no engine, no GPU), so it is
// tested without a model (tests/tools).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::cli::bench {

// A model shape as `memra synth` names it, recognised by architecture and parameter count: a
// receipt's model.id is only the file's name, which the user chose.
struct BaselineShape {
  std::string id;  // "qwen3-8b"
  std::string architecture;
  uint64_t parameters = 0;
};

// One figure of the peer and/or one target, keyed like a memra bench figure.
struct BaselineEntry {
  std::string model;      // a shape id
  std::string file_type;  // llama.cpp's mix name, as memra bench reports it ("q4_k_m")
  std::string figure;     // a memra bench figure name ("decode tg128", "c8 decode tg128")
  // Other memra figure names measuring the same thing ("decode tg128 @ d512": -p 512,2048
  // names the decode after each prompt by its depth).
  std::vector<std::string> also_matches;
  std::string unit = "tok/s";
  std::optional<double>
      baseline;  // the peer's figure; none for a target the peer has no figure for
  std::optional<double> target;
  bool higher_is_better = true;
};

struct Baselines {
  std::string path;
  std::string peer;  // "llama.cpp"
  std::string gpu, date, source_commit;
  std::vector<BaselineShape> shapes;
  std::vector<BaselineEntry> entries;
};

// Error(invalid_argument) naming the file and what is wrong: unreadable, not JSON, or a field
// missing or of the wrong type.
Baselines baselines_load(const std::string& path);
Baselines baselines_parse(const nlohmann::json& j, const std::string& path);

// What the matching needs to know about the measured model.
struct ComparedModel {
  std::string id;  // model.id (the file's name), shown when no shape matches
  std::string architecture;
  uint64_t parameters = 0;
  std::string file_type;
  // How it was measured: false for `--deterministic off` runs (their figures are not the
  // default's; the table says so beside them).
  bool deterministic = true;
  // The KV cache type a run asked for and ran (`--kv-dtype`; "" where it asked none). Another
  // type than the baselines' F16 matches no entry: its figures are listed, not compared.
  std::string kv_dtype;
  // The GPU the figures ran on (the receipt's gpu.name), "cpu" for a CPU run, "" where a receipt
  // does not say (the first receipts: compared as before). Another device than the baselines'
  // matches no entry either: a ratio or a target verdict across GPUs would not be a measurement.
  std::string gpu;
};

struct ComparedFigure {
  std::string name;
  std::string unit = "tok/s";
  double median = 0;
};

// One line of the table: a measured figure (with its entry when one matches), or an entry no
// figure matched (memra empty).
struct CompareRow {
  std::string model;  // the shape id, else the model's id
  std::string file_type;
  std::string figure;  // memra's name for it
  std::string unit = "tok/s";
  std::string source;         // the receipt it came from ("" for the run just made)
  bool deterministic = true;  // ComparedModel::deterministic of the measurement
  std::string kv_dtype;       // a KV cache type other than the baselines' (then no entry)
  std::string gpu;            // a device other than the baselines' GPU (then no entry)
  std::optional<double> memra;
  std::optional<BaselineEntry> entry;
};

// The shape with the model's architecture and parameter count, or nullptr.
const BaselineShape* baselines_shape(const Baselines& b, const ComparedModel& m);

// A row per figure, in order. A figure matches the entry of its shape, file type and name; an
// entry's also_matches count only where no entry has the name itself.
std::vector<CompareRow> compare_figures(const Baselines& b, const ComparedModel& m,
                                        const std::vector<ComparedFigure>& figures,
                                        const std::string& source = "");

// A row (memra empty) for each entry that none of `rows` matched, in the baselines' order.
std::vector<CompareRow> compare_unmeasured(const Baselines& b, const std::vector<CompareRow>& rows);

// The table(s), one per source in order of appearance; unmeasured rows last.
std::string compare_table(const Baselines& b, const std::vector<CompareRow>& rows);

// memra / peer and memra / target, where both exist.
std::optional<double> compare_ratio(const CompareRow& r);
std::optional<double> compare_target_ratio(const CompareRow& r);
// Whether the target is met (higher or lower is better, by the entry); empty without both.
std::optional<bool> compare_target_met(const CompareRow& r);

// {"path", "peer", "gpu", "date", "source_commit"}: what a receipt names the baselines by.
nlohmann::ordered_json baselines_json(const Baselines& b);
// An array: one object per row (model, file_type, figure, unit, memra, baseline_figure, baseline,
// ratio, target, better, target_ratio, target_met[, receipt]).
nlohmann::ordered_json compare_json(const std::vector<CompareRow>& rows);

// A `memra bench` receipt read back. Error(invalid_argument) naming the file when it cannot be
// read, is not JSON, is not a bench receipt ("what" is not "bench") or lacks a field used here.
struct BenchReceipt {
  std::string path;
  ComparedModel model;
  std::vector<ComparedFigure> figures;
};
BenchReceipt bench_receipt_load(const std::string& path);
BenchReceipt bench_receipt_parse(const nlohmann::json& j, const std::string& path);

}  // namespace memra::cli::bench
