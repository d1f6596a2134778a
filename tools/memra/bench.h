// `memra bench` internals shared between its option handling (cmd_bench.cpp), its timed runs
// through the Engine API (bench_runs.cpp) and its model accounting, tables and receipt
// (bench_report.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memra/engine.h"

namespace memra::cli::bench {

struct BenchOptions {
  std::string model;
  std::vector<int32_t> prompts{512};  // -p: prefill sizes; the first is also the -c prompt
  bool prefill = true;                // prefill figures: -p was given, or neither -d nor -c was
  int32_t n_gen = 128;                // -n
  std::vector<int32_t> depths;        // -d: decode context depths (empty: decode after each -p)
  std::vector<int32_t> concurrency;   // -c: concurrent sequences for aggregate figures
  int32_t runs = 3;                   // -r
  int threads = 0;
  std::string device = "auto";
  bool cuda_graphs = true;
  bool deterministic = true;
  std::string kv_dtype;               // --kv-dtype: KV cache type name; empty = the backend's
  std::string json_path;              // --json
  std::string command;                // the command line as typed, for the receipt
  std::string compare_path;           // --compare BASELINES.json
  std::vector<std::string> receipts;  // --receipts: compare these instead of running
};

// What the model costs per token, from its file (weights are read in their file dtype).
struct ModelCost {
  std::string file_type;  // llama.cpp's mix name ("q4_k_m"), else the dominant tensor dtype
  uint64_t parameters = 0;
  uint64_t weight_bytes = 0;  // every tensor in the file
  // Bytes a one-token decode step reads: every weight except the embedding table, plus one row
  // of it (with tied embeddings the table is read once as the output matrix); of a mixture of
  // experts' expert tensors (`*_exps`), only the share of the experts a token uses.
  uint64_t bytes_per_token = 0;
  // Parameters in matrix products per token: all but the embedding table (a lookup), which
  // counts once when tied (it is the output matrix); of the experts, the active share.
  uint64_t matmul_parameters = 0;
  // Mixtures of experts: the expert tensors' bytes, and experts used per token of n_expert
  // (0 and 0 for dense models).
  uint64_t expert_bytes = 0;
  int32_t n_expert = 0, n_expert_used = 0;
  // The share of the expert bytes a decode step of `tokens` tokens reads, assuming each token
  // picks its experts independently and uniformly: 1 - (1 - used / n)^tokens (1 for dense).
  double expert_share(double tokens) const;
  bool tied_embeddings = false;
  int32_t trained_context = 0;
  std::map<std::string, uint64_t> bytes_by_type;
};

ModelCost model_cost(const std::string& source);

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread(std::vector<double> values);

enum class FigureKind { prefill, decode, aggregate_prefill, aggregate_decode };
const char* figure_kind_name(FigureKind kind);

// One reported figure: tok/s of each timed run, and what bounds it on this GPU.
struct Figure {
  std::string name;  // "prefill pp512", "decode tg128 @ d4096", "c8 decode tg128"
  FigureKind kind = FigureKind::prefill;
  int32_t prompt = 0;       // tokens prefilled per sequence
  int32_t gen = 0;          // tokens generated per sequence
  int32_t depth = 0;        // context before the timed decode
  int32_t concurrency = 1;  // sequences at once
  std::vector<double> tok_s;
  std::vector<double> cpu_tok_s;  // tokens per (process CPU-second / threads); CPU only
  std::optional<double> ceiling_tok_s;
};

// The GPU's description and measured ceilings; absent on the CPU.
struct Ceilings {
  std::string gpu_name;
  int driver_version = 0;
  int runtime_version = 0;
  std::vector<double> copy_tb_s;
  std::vector<double> bf16_tflops;
};

// Every figure the options ask for, measured on `engine`; `threads` scales the CPU-second
// figures (0 = the CPU figures are not collected).
std::vector<Figure> run_figures(Engine& engine, const BenchOptions& o, int threads);

// Fills each figure's ceiling_tok_s from the model's cost and the GPU's ceilings.
void apply_ceilings(std::vector<Figure>& figures, const ModelCost& cost, const Ceilings& c,
                    uint64_t kv_bytes_per_token);

// The compact table (figure, median, min, max, ceiling, % of ceiling) to stdout.
void print_table(const std::vector<Figure>& figures);
// Tokens per CPU-second times the thread count, for the figures that have them.
void print_cpu_table(const std::vector<Figure>& figures, int threads);

struct ReceiptInputs {
  const BenchOptions& options;
  const EngineModelInfo& info;
  const ModelCost& cost;
  const std::optional<Ceilings>& ceilings;
  uint64_t kv_bytes_per_token;
  const std::vector<Figure>& figures;
  // {"compare_baselines": {...}, "compare": [...]} under --compare, merged into the receipt.
  const nlohmann::ordered_json* compare = nullptr;
};
void write_receipt(const std::string& path, const ReceiptInputs& in);

// Shared by every receipt (`memra bench`, `memra bench-serve`): the current UTC time as
// 2026-01-31T12:00:00Z, and {"commit", "commit_source"[, "commit_dirty"]} of the source tree.
std::string utc_now();
nlohmann::ordered_json commit_json();

}  // namespace memra::cli::bench
