// `memra bench-tokenizer`: single-thread encode throughput (MB/s of input text) of a model's
// tokenizer on English text, generated deterministically here or read from a file. Reports the
// median, min and max of several timed runs after one warm-up run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include "cli_args.h"
#include "commands.h"
#include "core/error.h"
#include "formats/model_source.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli {

namespace {

constexpr const char* kUsage =
    "usage: memra bench-tokenizer [-m SOURCE] [--file TEXT_FILE] [--mb N] [--runs N]\n"
    "  -m SOURCE   GGUF file or Hugging Face folder (default: the packaged Gemma 3 270M)\n"
    "  --file F    encode this file instead of generated English text\n"
    "  --mb N      size of the generated text in MB (default 8)\n"
    "  --runs N    timed runs (default 3)\n";

// Pseudo-English: common words with Zipf-like frequencies, capitals, punctuation, numbers and
// paragraph breaks, so pre-tokenization and the word cache see realistic text.
std::string english_text(size_t bytes) {
  static const char* const kWords[] = {"the",
                                       "of",
                                       "and",
                                       "to",
                                       "a",
                                       "in",
                                       "is",
                                       "that",
                                       "for",
                                       "it",
                                       "as",
                                       "was",
                                       "with",
                                       "be",
                                       "by",
                                       "on",
                                       "not",
                                       "he",
                                       "this",
                                       "are",
                                       "or",
                                       "his",
                                       "from",
                                       "at",
                                       "which",
                                       "but",
                                       "have",
                                       "an",
                                       "had",
                                       "they",
                                       "you",
                                       "were",
                                       "their",
                                       "one",
                                       "all",
                                       "we",
                                       "can",
                                       "her",
                                       "has",
                                       "there",
                                       "been",
                                       "if",
                                       "more",
                                       "when",
                                       "will",
                                       "would",
                                       "who",
                                       "so",
                                       "no",
                                       "model",
                                       "language",
                                       "inference",
                                       "engine",
                                       "token",
                                       "memory",
                                       "bandwidth",
                                       "throughput",
                                       "system",
                                       "government",
                                       "development",
                                       "understanding",
                                       "particularly",
                                       "information",
                                       "however",
                                       "between",
                                       "important",
                                       "different",
                                       "following",
                                       "without",
                                       "something",
                                       "because",
                                       "through",
                                       "another",
                                       "example",
                                       "question",
                                       "although",
                                       "everything",
                                       "performance"};
  constexpr size_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  std::mt19937 rng(42);
  std::string out;
  out.reserve(bytes + 64);
  bool sentence_start = true;
  while (out.size() < bytes) {
    // Zipf-like pick: small indices far more often.
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto index = static_cast<size_t>(static_cast<double>(kCount) * u * u * u);
    std::string word = kWords[std::min(index, kCount - 1)];
    if (sentence_start) word[0] = static_cast<char>(word[0] - 'a' + 'A');
    sentence_start = false;
    out += word;
    const unsigned r = rng() % 100;
    if (r < 6) {
      out += ". ";
      sentence_start = true;
    } else if (r < 10) {
      out += ", ";
    } else if (r < 11) {
      out += ' ';
      out += std::to_string(rng() % 10000);
      out += ' ';
    } else if (r < 12) {
      out += ".\n\n";
      sentence_start = true;
    } else {
      out += " ";
    }
  }
  return out;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int run_bench_tokenizer(const Args& args) {
  std::string source, file;
  double mb = 8;
  int runs = 3;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      source = value();
    } else if (a == "--file") {
      file = value();
    } else if (a == "--mb") {
      mb = parse_double(a, value(), 0.01, 4096);
    } else if (a == "--runs") {
      runs = parse_int(a, value(), 1, 1000);
    } else {
      fail(ErrorCode::invalid_argument, "unknown option '{}' (see memra bench-tokenizer --help)",
           a);
    }
  }
  if (mb <= 0 || mb > 1024 || runs < 1 || runs > 100)
    fail(ErrorCode::invalid_argument, "--mb must be in (0, 1024] and --runs in [1, 100]");
  if (source.empty()) source = model_source_default_path();
  const auto tok = Tokenizer::from_source(source);
  std::string text;
  if (file.empty()) {
    text = english_text(static_cast<size_t>(mb * 1e6));
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(ErrorCode::not_found, "cannot read {}", file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  const EncodeOptions options{false, false};
  size_t n_tokens = tok->encode(text, options).size();  // warm-up (fills the word cache)
  // Wall time, and this thread's CPU time: on a shared machine the CPU-time rate is the
  // per-core figure, the wall rate what this run happened to get.
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    n_tokens = tok->encode(text, options).size();
    const double cpu = thread_cpu_seconds() - c0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(text.size()) / 1e6 / s);
    cpu_rates.push_back(static_cast<double>(text.size()) / 1e6 / cpu);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  std::printf("tokenizer: %s\ntext: %.2f MB (%s), %zu tokens (%.2f bytes/token)\n", source.c_str(),
              static_cast<double>(text.size()) / 1e6,
              file.empty() ? "generated English" : file.c_str(), n_tokens,
              static_cast<double>(text.size()) / static_cast<double>(n_tokens));
  std::printf("encode, 1 thread, wall time: median %.1f MB/s (min %.1f, max %.1f) over %d runs\n",
              rates[rates.size() / 2], rates.front(), rates.back(), runs);
  std::printf("encode per CPU-second of the thread: median %.1f MB/s (min %.1f, max %.1f)\n",
              cpu_rates[cpu_rates.size() / 2], cpu_rates.front(), cpu_rates.back());
  return 0;
}

const Registration kReg{{"bench-tokenizer", "encode throughput of a tokenizer (MB/s, one thread)",
                         &run_bench_tokenizer}};

}  // namespace

}  // namespace memra::cli
