// `memra bench-structured`: the cost of grammar-constrained decoding on a real vocabulary (default:
// the packaged Gemma 3 270M, 262,144 tokens): building the vocabulary trie once per model, an
// uncached token mask at a structural position and inside a JSON string, and a cached mask.
// Prints median, min and max over several runs, in wall and this thread's CPU milliseconds.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "core/error.h"
#include "formats/model_source.h"
#include "structured/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli {

namespace {

using structured::TokenConstraint;

constexpr const char* kUsage =
    "usage: memra bench-structured [-m SOURCE] [--runs N]\n"
    "  -m SOURCE   GGUF file or Hugging Face folder (default: the packaged Gemma 3 270M)\n"
    "  --runs N    timed runs per figure (default 7)\n";

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Timing {
  std::vector<double> wall_ms, cpu_ms;
  void print(const char* what, size_t allowed) const {
    auto stats = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return std::array<double, 3>{v[v.size() / 2], v.front(), v.back()};
    };
    const auto w = stats(wall_ms), c = stats(cpu_ms);
    std::printf("%-34s cpu %8.3f ms (min %.3f, max %.3f)  wall %8.3f ms  allowed %zu\n", what, c[0],
                c[1], c[2], w[0], allowed);
  }
};

size_t count_allowed(const structured::TokenMask& mask) {
  size_t n = 0;
  for (uint64_t w : mask.words) n += static_cast<size_t>(__builtin_popcountll(w));
  return n;
}

// A token per byte value (byte-fallback tokens), to drive a constraint to a given text.
std::vector<int32_t> byte_tokens(const Tokenizer& tok) {
  std::vector<int32_t> ids(256, -1);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_special(id)) continue;
    const std::string bytes = tok.token_bytes(id);
    if (bytes.size() == 1 && ids[static_cast<uint8_t>(bytes[0])] < 0) {
      ids[static_cast<uint8_t>(bytes[0])] = id;
    }
  }
  return ids;
}

void drive(TokenConstraint& c, const std::vector<int32_t>& byte_ids, const std::string& text) {
  for (char ch : text) {
    const int32_t id = byte_ids[static_cast<uint8_t>(ch)];
    if (id < 0) fail(ErrorCode::unsupported, "vocabulary has no token for byte {:#x}", ch);
    c.accept(id);
  }
}

int run_bench_structured(const Args& args) {
  std::string source;
  int runs = 7;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      source = value();
    } else if (a == "--runs") {
      runs = parse_int(a, value(), 1, 1000);
    } else {
      fail(ErrorCode::invalid_argument, "unknown option '{}' (see memra bench-structured --help)",
           a);
    }
  }
  if (runs < 1 || runs > 1000) fail(ErrorCode::invalid_argument, "--runs must be in [1, 1000]");
  if (source.empty()) source = model_source_default_path();
  const auto tok = Tokenizer::from_source(source);
  const int32_t n_vocab = tok->n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n_vocab));
  std::vector<bool> usable(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    bytes[static_cast<size_t>(id)] = tok->token_bytes(id);
    usable[static_cast<size_t>(id)] = !tok->is_special(id);
  }
  double c0 = thread_cpu_ms();
  auto vocab = std::make_shared<structured::TokenVocabulary>(bytes, usable, tok->eos_ids());
  std::printf("vocabulary: %d tokens from %s; trie built in %.1f ms cpu\n", n_vocab, source.c_str(),
              thread_cpu_ms() - c0);
  const std::vector<int32_t> byte_ids = byte_tokens(*tok);

  structured::GrammarBuilder builder;
  const auto grammar = builder.build(builder.any_json_object());
  // Each figure: a fresh constraint (empty cache) driven to `prefix`, then one timed allowed();
  // `then` (when set) is accepted afterwards and the next allowed() timed instead.
  auto bench = [&](const char* what, const std::string& prefix, const std::string& then) {
    Timing t;
    size_t allowed = 0;
    for (int r = 0; r < runs; ++r) {
      TokenConstraint c(grammar, vocab);
      drive(c, byte_ids, prefix);
      if (!then.empty()) {
        c.allowed();
        drive(c, byte_ids, then);
      }
      const auto w0 = std::chrono::steady_clock::now();
      c0 = thread_cpu_ms();
      allowed = count_allowed(c.allowed());
      t.cpu_ms.push_back(thread_cpu_ms() - c0);
      t.wall_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count());
    }
    t.print(what, allowed);
  };
  std::printf("grammar: response_format json_object; %d runs each\n", runs);
  bench("uncached, start ('')", "", "");
  bench("uncached, structural ('{\"a\": ')", "{\"a\": ", "");
  bench("uncached, after value ('{\"a\": 1')", "{\"a\": 1", "");
  bench("uncached, in string ('{\"a\": \"x')", "{\"a\": \"x", "");
  bench("cached, in string (+'y')", "{\"a\": \"x", "y");
  return 0;
}

const Registration kReg{{"bench-structured",
                         "time constrained-decoding token masks on a model's vocabulary",
                         &run_bench_structured}};

}  // namespace

}  // namespace memra::cli
