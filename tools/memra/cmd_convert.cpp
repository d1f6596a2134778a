// `memra convert HF_DIR -o OUT.gguf --type T`: a Hugging Face checkpoint folder to a standard
// GGUF file (GGUF tensor names and architecture keys, tokenizer.ggml.* keys, chat template),
// its matrices at type T (a plain type or a llama-quantize style *_K mix). Progress goes to
// stderr: a bar redrawn in place on a terminal, a few plain lines otherwise.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "cli_args.h"
#include "cli_progress.h"
#include "commands.h"
#include "core/error.h"
#include "formats/convert.h"
#include "formats/model_archive.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli {

namespace {

constexpr const char* kUsage =
    "usage: memra convert HF_DIR -o OUT.gguf --type TYPE [--threads N]\n"
    "\n"
    "Converts a Hugging Face model folder (config.json, *.safetensors, tokenizer.json) to GGUF.\n"
    "TYPE: f32, f16, bf16, q8_0 (every matrix at that type), q4_k_m, q5_k_m (K-quant mixes that\n"
    "keep output, some attn_v and ffn_down at Q6_K, as llama-quantize does), q6_k.\n"
    "Vectors and norms stay F32. --threads: rows quantized in parallel (default: up to 4).\n";

struct ConvertArgs {
  std::string input;
  convert::Options options;
};

ConvertArgs parse_args(const Args& args) {
  ConvertArgs out;
  out.options.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  bool have_type = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-o" || a == "--output") {
      out.options.output_path = value();
    } else if (a == "--type" || a == "-t") {
      const std::string& name = value();
      const auto mix = convert::mix_from_name(name);
      if (!mix)
        fail(ErrorCode::invalid_argument, "--type {} is not one of {}", name, convert::mix_names());
      out.options.mix = *mix;
      have_type = true;
    } else if (a == "--threads") {
      const std::string& v = value();
      int n = 0;
      for (char c : v) n = (c >= '0' && c <= '9' && n < 1000) ? n * 10 + (c - '0') : -1;
      if (n < 1 || n > 256) fail(ErrorCode::invalid_argument, "--threads {} is not in 1..256", v);
      out.options.threads = n;
    } else if (!a.empty() && a[0] == '-') {
      fail(ErrorCode::invalid_argument, "unknown option {} (see memra convert --help)", a);
    } else if (out.input.empty()) {
      out.input = a;
    } else {
      fail(ErrorCode::invalid_argument, "unexpected argument '{}'", a);
    }
  }
  if (out.input.empty()) fail(ErrorCode::invalid_argument, "missing HF_DIR\n{}", kUsage);
  if (out.options.output_path.empty()) fail(ErrorCode::invalid_argument, "missing -o OUT.gguf");
  if (!have_type)
    fail(ErrorCode::invalid_argument, "missing --type (one of {})", convert::mix_names());
  return out;
}

int run_convert(const Args& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const ConvertArgs parsed = parse_args(args);
  const ModelArchive archive = archive_open(parsed.input);
  if (archive.kind != ArchiveKind::hf_folder)
    fail(ErrorCode::unsupported,
         "{} is a GGUF file; convert reads Hugging Face folders (re-quantizing GGUF is not "
         "supported)",
         parsed.input);
  gguf::Metadata extra;
  Tokenizer::from_hf_folder(parsed.input)->to_gguf(extra);
  convert::read_chat_template(parsed.input, extra);

  ProgressPrinter printer("converting");
  const convert::Summary summary =
      convert::write_gguf(archive, extra, parsed.options,
                          [&](size_t done, size_t total, uint64_t written, uint64_t all) {
                            printer(done, total, written, all);
                          });
  std::string types;
  for (const auto& [dtype, count] : summary.tensors_per_type) {
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, dtype_name(dtype));
  }
  std::printf("wrote %s: %s, %zu tensors (%s), %.1f MiB of tensor data\n",
              parsed.options.output_path.c_str(),
              std::string(convert::mix_name(parsed.options.mix)).c_str(), summary.n_tensors,
              types.c_str(), summary.n_bytes / 1048576.0);
  return 0;
}

const Registration kReg{{"convert", "convert a Hugging Face folder to GGUF", &run_convert}};

}  // namespace
}  // namespace memra::cli
