// `memra synth`'s engine: writes a GGUF of a named public model shape (qwen3-8b, llama3-8b, ...)
// with seeded random weights and a synthetic tokenizer of the shape's vocab size, so benchmarks on
// machines that cannot receive real weights, and peer engines, run the very same file. Metadata
// comes from the shape's config.json through hf_config (the keys `memra convert` writes), tensor
// types from convert's mix policy. Same seed + shape + mix + layers -> byte-identical file,
// whatever the thread count. Documented in docs/MODELS.md, "memra synth".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/convert.h"
#include "formats/gguf.h"

namespace memra::synth {

struct ShapeInfo {
  std::string_view name;         // "qwen3-8b"
  std::string_view description;  // one line for --help
};
const std::vector<ShapeInfo>& shapes();
std::string shape_names();  // "qwen3-0.6b, qwen3-8b, ..." for messages

struct Options {
  std::string shape;
  convert::Mix mix = convert::Mix::bf16;
  uint64_t seed = 0;
  int layers = 0;           // 0: the shape's own block count
  int threads = 1;          // workers generating and quantizing the rows of one tensor
  bool fast_quant = false;  // Q4_K/Q5_K/Q6_K tensors as random valid blocks (no encoder)
  std::string output_path;
  // A JSON object merged over the shape's config.json (RFC 7386 merge patch) before anything is
  // derived from it: scaled-down variants of a shape (tests load a 64-wide qwen3.5-9b on the CPU)
  // keep every tensor and key of the architecture. Empty: the shape as published.
  std::string config_patch;
  // A GGUF whose tokenizer.* keys replace the synthetic vocabulary (synth_vocab.h vocab_copy):
  // a real tokenizer and chat template over random weights, for tests of what a served model's
  // text looks like on machines that cannot receive its weights. Empty: the synthetic one.
  std::string vocab_from;
};

// How a tensor's values are drawn.
enum class Init {
  matrix,   // ~N(0, std^2): sum of four uniforms (Irwin-Hall), bounded at +-3.46 std
  norm,     // 1 + 0.1 * N(0, 1): RMSNorm weights as GGUF stores them (gemma3's 1 + w too)
  shifted,  // mean + std * N(0, 1): parameters that must keep a sign (qwen35's ssm_a < 0)
  values,   // fixed contents (llama3's rope_freqs)
};

struct TensorPlan {
  TensorView view;  // name, n_dims, ne (no data)
  DType type = DType::f32;
  Init init = Init::matrix;
  float std = 0.0f;           // Init::matrix, Init::shifted
  float mean = 0.0f;          // Init::shifted
  std::vector<float> values;  // Init::values
  uint64_t stream = 0;        // RNG stream: a hash of the name, so --layers keeps layer 0's bytes
};

struct Plan {
  gguf::Metadata metadata;          // architecture keys, general.*, tokenizer.*
  std::vector<TensorPlan> tensors;  // in file order
  int64_t n_vocab = 0;
};

// Resolves the shape (Error(invalid_argument) naming an unknown shape or a bad --layers) into
// metadata and the tensor list with each tensor's type under the mix.
Plan make_plan(const Options& options);

// Rows [first_row, last_row) of tensor t at t.type into out (the whole tensor's bytes). Depends
// only on (seed, t, row), never on how rows are split between threads.
void fill_rows(const TensorPlan& t, uint64_t seed, bool fast_quant, std::span<uint8_t> out,
               uint64_t first_row, uint64_t last_row);

// The whole tensor into out, its rows split over up to `threads` workers (fill_rows each); the
// bytes do not depend on `threads`. Errors name the tensor.
void fill_tensor(const TensorPlan& t, uint64_t seed, bool fast_quant, int threads,
                 std::span<uint8_t> out);

// The counter-based generator: out[i] is the approximately standard normal value number
// first + i of stream `stream` under `seed` (splitmix64 of the counter, four 16-bit uniforms).
void fill_normal(uint64_t seed, uint64_t stream, uint64_t first, std::span<float> out);

// Writes the GGUF (under output_path + ".tmp", renamed when complete), one tensor in memory at a
// time, its rows split over options.threads workers.
convert::Summary write_gguf(const Options& options, const gguf::Writer::ProgressFn& progress = {});

}  // namespace memra::synth
