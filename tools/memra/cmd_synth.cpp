// `memra synth --shape NAME --type MIX -o OUT.gguf`: a GGUF of a public model shape with seeded
// random weights and a synthetic tokenizer (formats/synth.h), for benchmarks on machines that
// cannot receive real weights; llama.cpp loads the same file. Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli_args.h"
#include "cli_progress.h"
#include "commands.h"
#include "core/error.h"
#include "formats/synth.h"

namespace memra::cli {
namespace {

constexpr const char* kUsage =
    "usage: memra synth --shape NAME --type MIX -o OUT.gguf [--seed N] [--layers L]\n"
    "                   [--threads T] [--fast-quant] [--vocab-from FILE.gguf]\n"
    "\n"
    "Writes a GGUF of a public model's shape with seeded random weights and a synthetic\n"
    "tokenizer of its vocab size. Same shape, type, seed and layers give a byte-identical file\n"
    "whatever --threads.\n"
    "  --type MIX      f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q6_k (memra convert's mixes and\n"
    "                  per-tensor rules)\n"
    "  --seed N        weight seed (default 0)\n"
    "  --layers L      keep only the first L blocks (small test files; the qwen3.5/3.6\n"
    "                  shapes need at least 4, one attention layer)\n"
    "  --threads T     workers drawing and quantizing rows (default: all cores)\n"
    "  --fast-quant    write Q4_K/Q5_K/Q6_K tensors as random valid blocks instead of running\n"
    "                  the reference encoder on drawn floats (many times faster; the benchmark\n"
    "                  recipe uses it)\n"
    "  --vocab-from F  take the tokenizer and chat template (every tokenizer.* key) from the\n"
    "                  GGUF F, a real model's or a vocab-only file, instead of the synthetic\n"
    "                  vocabulary; F must hold exactly the shape's vocab size of tokens\n"
    "\n"
    "shapes:\n";

uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 19;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok) fail(ErrorCode::invalid_argument, "--seed expects a whole number, got '{}'", text);
  return v;
}

synth::Options parse_args(const Args& args) {
  synth::Options o;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool have_type = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-o" || a == "--output") {
      o.output_path = value();
    } else if (a == "--shape") {
      o.shape = value();
    } else if (a == "--type" || a == "-t") {
      const std::string& name = value();
      const auto mix = convert::mix_from_name(name);
      if (!mix)
        fail(ErrorCode::invalid_argument, "--type {} is not one of {}", name, convert::mix_names());
      o.mix = *mix;
      have_type = true;
    } else if (a == "--seed") {
      o.seed = parse_seed(value());
    } else if (a == "--layers") {
      o.layers = parse_int(a, value(), 1, 4096);
    } else if (a == "--threads") {
      o.threads = parse_int(a, value(), 1, 256);
    } else if (a == "--fast-quant") {
      o.fast_quant = true;
    } else if (a == "--vocab-from") {
      o.vocab_from = value();
    } else {
      fail(ErrorCode::invalid_argument, "unknown argument '{}' (see memra synth --help)", a);
    }
  }
  if (o.shape.empty())
    fail(ErrorCode::invalid_argument, "missing --shape (one of {})", synth::shape_names());
  if (!have_type)
    fail(ErrorCode::invalid_argument, "missing --type (one of {})", convert::mix_names());
  if (o.output_path.empty()) fail(ErrorCode::invalid_argument, "missing -o OUT.gguf");
  return o;
}

int run_synth(const Args& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    for (const synth::ShapeInfo& s : synth::shapes())
      std::printf("  %-16s %s\n", std::string(s.name).c_str(), std::string(s.description).c_str());
    return 0;
  }
  const synth::Options options = parse_args(args);
  ProgressPrinter printer("synthesizing");
  const auto start = std::chrono::steady_clock::now();
  const convert::Summary summary =
      synth::write_gguf(options, [&](size_t done, size_t total, uint64_t written, uint64_t all) {
        printer(done, total, written, all);
      });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string types;
  for (const auto& [dtype, count] : summary.tensors_per_type)
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, dtype_name(dtype));
  std::printf("wrote %s: %s %s seed %llu%s, %zu tensors (%s), %.1f MiB in %.1f s (%.0f MB/s)\n",
              options.output_path.c_str(), options.shape.c_str(),
              std::string(convert::mix_name(options.mix)).c_str(),
              static_cast<unsigned long long>(options.seed),
              options.fast_quant ? " fast-quant" : "", summary.n_tensors, types.c_str(),
              summary.n_bytes / 1048576.0, seconds,
              summary.n_bytes / 1e6 / std::max(seconds, 1e-9));
  return 0;
}

const Registration kReg{
    {"synth", "write a random-weight GGUF of a public model shape", &run_synth}};

}  // namespace
}  // namespace memra::cli
