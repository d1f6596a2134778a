// `memra run [-m SOURCE] -p PROMPT [--chat] [--system S] [sampling flags]`: generates from one
// prompt, streaming text to stdout, then prints prompt and generation speed to stderr. With
// --chat the prompt is rendered through the model's chat template; a model without one is
// refused by name (the packaged Gemma 3 270M GGUF carries none: it is the base model, and Gemma's
// turn format fed to it by hand yields nonsense, so no built-in format is substituted).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "core/error.h"
#include "memra/engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli {
namespace {

constexpr const char* kUsage =
    "usage: memra run [-m SOURCE] -p PROMPT [options]\n"
    "  -m, --model SOURCE       GGUF file, HF folder or hf:org/name[:QUANT] (default: the\n"
    "                           packaged Gemma 3 270M Q4_K_M)\n"
    "  -p, --prompt TEXT        the prompt\n"
    "  --chat                   render the prompt as a user turn of the model's chat template\n"
    "  --system TEXT            system message (with --chat)\n"
    "  -n, --max-tokens N       tokens to generate (default 256)\n"
    "  --temp T                 temperature (default 0 = greedy)\n"
    "  --top-k K, --top-p P, --min-p P\n"
    "  --repeat-penalty R, --presence-penalty P, --frequency-penalty F\n"
    "  --seed S                 sampling seed\n"
    "  --stop TEXT              stop string (repeatable)\n"
    "  --ignore-eos             keep generating past end-of-sequence tokens\n"
    "  --ctx N                  context length (default min(model's, 8192))\n"
    "  --threads N              CPU threads (default: all cores)\n"
    "  --device DEV             auto | cpu | cuda | cuda:N (default: $MEMRA_DEVICE or auto)\n"
    "  --cuda-graphs on|off     replay GPU decode steps as CUDA graphs (default:\n"
    "                           $MEMRA_CUDA_GRAPHS or on)\n"
    "  --deterministic on|off   off: faster GPU prefill that breaks the determinism contract\n"
    "                           (default: $MEMRA_DETERMINISTIC or on)\n";

struct RunOptions {
  EngineOptions engine;
  std::string prompt;
  bool has_prompt = false;
  bool chat = false;
  std::string system;
  SamplingParams sampling;
  StopConditions stop;
};

template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    T v{};
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::stod(text, &used));
    } else if constexpr (std::is_unsigned_v<T>) {
      v = static_cast<T>(std::stoull(text, &used));
    } else {
      const long long x = std::stoll(text, &used);
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) throw 0;
      v = static_cast<T>(x);
    }
    if (used != text.size()) throw 0;
    return v;
  } catch (...) {
    fail(ErrorCode::invalid_argument, "{} expects a number, got '{}'", flag, text);
  }
}

RunOptions parse_options(const Args& args) {
  RunOptions o;
  o.sampling.temperature = 0.0f;
  o.engine.max_sequences = 1;
  if (const char* env = std::getenv("MEMRA_DEVICE")) o.engine.device = env;
  if (const char* env = std::getenv("MEMRA_CUDA_GRAPHS"))
    o.engine.cuda_graphs = parse_on_off("MEMRA_CUDA_GRAPHS", env);
  if (const char* env = std::getenv("MEMRA_DETERMINISTIC"))
    o.engine.deterministic = parse_on_off("MEMRA_DETERMINISTIC", env);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-m" || a == "--model") {
      o.engine.model = value();
    } else if (a == "-p" || a == "--prompt") {
      o.prompt = value();
      o.has_prompt = true;
    } else if (a == "--chat") {
      o.chat = true;
    } else if (a == "--system") {
      o.system = value();
    } else if (a == "-n" || a == "--max-tokens") {
      o.stop.max_tokens = parse_number<int32_t>(a, value());
    } else if (a == "--temp" || a == "--temperature") {
      o.sampling.temperature = parse_number<float>(a, value());
    } else if (a == "--top-k") {
      o.sampling.top_k = parse_number<int32_t>(a, value());
    } else if (a == "--top-p") {
      o.sampling.top_p = parse_number<float>(a, value());
    } else if (a == "--min-p") {
      o.sampling.min_p = parse_number<float>(a, value());
    } else if (a == "--repeat-penalty") {
      o.sampling.repetition_penalty = parse_number<float>(a, value());
    } else if (a == "--presence-penalty") {
      o.sampling.presence_penalty = parse_number<float>(a, value());
    } else if (a == "--frequency-penalty") {
      o.sampling.frequency_penalty = parse_number<float>(a, value());
    } else if (a == "--seed") {
      o.sampling.seed = parse_number<uint64_t>(a, value());
    } else if (a == "--stop") {
      o.stop.stop_strings.push_back(value());
    } else if (a == "--ignore-eos") {
      o.stop.ignore_eos = true;
    } else if (a == "--ctx") {
      o.engine.context_length = parse_number<int32_t>(a, value());
    } else if (a == "--threads") {
      o.engine.n_threads = parse_number<int>(a, value());
    } else if (a == "--device") {
      o.engine.device = value();
    } else if (a == "--cuda-graphs") {
      o.engine.cuda_graphs = parse_on_off(a, value());
    } else if (a == "--deterministic") {
      o.engine.deterministic = parse_on_off(a, value());
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      fail(ErrorCode::invalid_argument, "unknown argument '{}'\n{}", a, kUsage);
    }
  }
  if (!o.has_prompt) fail(ErrorCode::invalid_argument, "missing -p PROMPT\n{}", kUsage);
  if (!o.system.empty() && !o.chat) fail(ErrorCode::invalid_argument, "--system needs --chat");
  return o;
}

std::vector<int32_t> chat_prompt(const Engine& engine, const RunOptions& o) {
  const Tokenizer& tok = engine.tokenizer();
  const ChatTemplate* tmpl = engine.chat_template();
  if (tmpl == nullptr)
    fail(ErrorCode::unsupported,
         "--chat: model '{}' has no chat template (tokenizer.chat_template); run it without --chat",
         engine.model_info().id);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", o.prompt}});
  nlohmann::ordered_json context = {{"messages", messages}, {"add_generation_prompt", true}};
  if (tok.bos_id() >= 0) context["bos_token"] = tok.token_text(tok.bos_id());
  const auto eos = tok.eos_ids();
  if (!eos.empty()) context["eos_token"] = tok.token_text(eos.front());
  // As the server does: control tokens only from the template's text, the prompt is plain text.
  const RenderedPrompt rendered = tmpl->render_marked(context, {"bos_token", "eos_token"});
  return tok.encode(rendered.text,
                    {.add_special = false, .parse_special = true, .plain_ranges = rendered.client});
}

int run_run(const Args& args) {
  RunOptions o = parse_options(args);
  std::unique_ptr<Engine> engine = Engine::create(o.engine);
  Request request;
  request.prompt = o.chat ? chat_prompt(*engine, o)
                          : engine->tokenizer().encode(o.prompt, EncodeOptions{true, false});
  request.sampling = o.sampling;
  request.stop = o.stop;

  using Clock = std::chrono::steady_clock;
  std::promise<StreamEvent> done;
  Clock::time_point first_token{};
  bool got_first = false;
  request.sink = [&](const StreamEvent& e) {
    if (!got_first && !e.tokens.empty()) {
      first_token = Clock::now();
      got_first = true;
    }
    if (!e.text.empty()) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    }
    if (e.finish != FinishReason::none) done.set_value(e);
  };
  const auto start = Clock::now();
  engine->submit(std::move(request));
  const StreamEvent last = done.get_future().get();
  const auto end = Clock::now();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (last.finish == FinishReason::error)
    fail(ErrorCode::internal, "generation failed: {}", last.error);

  const double prefill_s = std::chrono::duration<double>(first_token - start).count();
  const double decode_s = std::chrono::duration<double>(end - first_token).count();
  const int32_t n_prompt = last.usage.prompt_tokens;
  const int32_t n_gen = last.usage.completion_tokens;
  // The first generated token comes out of the prefill step; the rest are decode steps.
  std::fprintf(
      stderr, "prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s | finish: %s\n",
      n_prompt, prefill_s > 0 ? n_prompt / prefill_s : 0.0, n_gen,
      n_gen > 1 && decode_s > 0 ? (n_gen - 1) / decode_s : 0.0, finish_reason_name(last.finish));
  return 0;
}

const Registration kReg{{"run", "generate text from a prompt", &run_run}};

}  // namespace
}  // namespace memra::cli
