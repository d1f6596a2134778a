// Flag and MEMRA_* environment parsing for the server; one table lists every option once.
#include "server/config.h"

#include <charconv>

#include "core/error.h"

namespace memra::server {

namespace {

struct Option {
  const char* flag;
  const char* env;
  const char* meta;  // nullptr: a boolean switch
  const char* help;
  std::function<void(ServerConfig&, const std::string&)> set;
};

int64_t to_int(const std::string& text, const char* what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    fail(ErrorCode::invalid_argument, "{} must be an integer in [{}, {}], got '{}'", what, lo, hi,
         text);
  return v;
}

// A fraction in (0, 1], e.g. "0.9".
double to_fraction(const std::string& text, const char* what) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v > 0.0 && v <= 1.0))
    fail(ErrorCode::invalid_argument, "{} must be a number in (0, 1], got '{}'", what, text);
  return v;
}

bool to_bool(const std::string& text, const char* what) {
  if (text == "1" || text == "true" || text == "on" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "off" || text == "no") return false;
  fail(ErrorCode::invalid_argument, "{} must be true/false, got '{}'", what, text);
}

void check_task(const std::string& task, const std::string& where) {
  if (task != "generate" && task != "embed" && task != "rerank")
    fail(ErrorCode::invalid_argument, "{}: task must be generate, embed or rerank, got '{}'", where,
         task);
}

void check_pooling(const std::string& pooling, const std::string& where) {
  if (pooling != "last" && pooling != "mean" && pooling != "cls")
    fail(ErrorCode::invalid_argument, "{}: pooling must be last, mean or cls, got '{}'", where,
         pooling);
}

// "SOURCE;task=embed;pooling=mean": the source, then the entry's options.
ModelSpec parse_model_entry(std::string alias, const std::string& rest, const std::string& item) {
  ModelSpec spec{std::move(alias), rest.substr(0, rest.find(';'))};
  for (size_t at = rest.find(';'); at != std::string::npos;) {
    const size_t next = rest.find(';', at + 1);
    const std::string opt = rest.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    at = next;
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq),
                      value = eq == std::string::npos ? "" : opt.substr(eq + 1);
    const std::string where = "MEMRA_MODELS entry '" + item + "'";
    if (key == "task") {
      check_task(value, where);
      spec.task = value;
    } else if (key == "pooling") {
      check_pooling(value, where);
      spec.pooling = value;
    } else if (key == "rerank_prompt" && !value.empty()) {
      spec.rerank_prompt = value;
    } else if (key == "rerank_tokens" && value.find('/') != std::string::npos) {
      spec.rerank_tokens = value;
    } else {
      fail(ErrorCode::invalid_argument,
           "{}: unknown or empty option '{}' (task=, pooling=, rerank_prompt=, "
           "rerank_tokens=YES/NO)",
           where, opt);
    }
  }
  if (spec.source.empty())
    fail(ErrorCode::invalid_argument, "MEMRA_MODELS entry '{}' must be alias=SOURCE", item);
  return spec;
}

std::vector<ModelSpec> parse_models(const std::string& list) {
  std::vector<ModelSpec> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      fail(ErrorCode::invalid_argument, "MEMRA_MODELS entry '{}' must be alias=SOURCE", item);
    out.push_back(parse_model_entry(item.substr(0, eq), item.substr(eq + 1), item));
  }
  if (out.empty()) fail(ErrorCode::invalid_argument, "MEMRA_MODELS names no model");
  return out;
}

const std::vector<Option>& options() {
  static const std::vector<Option> kOptions = {
      {"--host", "MEMRA_HOST", "ADDR", "address to listen on (default 127.0.0.1)",
       [](ServerConfig& c, const std::string& v) { c.host = v; }},
      {"--port", "MEMRA_PORT", "N", "port (default 8080; 0 picks a free one)",
       [](ServerConfig& c, const std::string& v) { c.port = int(to_int(v, "--port", 0, 65535)); }},
      {"--model", "MEMRA_MODEL", "SOURCE",
       "one model: GGUF file, HF folder or hf:org/name[:QUANT][@rev]",
       [](ServerConfig& c, const std::string& v) {
         c.models = {{"", v}};
       }},
      {"--models", "MEMRA_MODELS", "LIST", "several models: alias=SOURCE,alias=SOURCE",
       [](ServerConfig& c, const std::string& v) { c.models = parse_models(v); }},
      {"--task", "MEMRA_TASK", "TASK",
       "generate (default), embed or rerank: what models without their own task= serve",
       [](ServerConfig& c, const std::string& v) {
         check_task(v, "--task");
         c.task = v;
       }},
      {"--pooling", "MEMRA_POOLING", "MODE",
       "embedding pooling last | mean | cls for models without their own pooling= (default: the "
       "file's)",
       [](ServerConfig& c, const std::string& v) {
         check_pooling(v, "--pooling");
         c.pooling = v;
       }},
      {"--ctx-size", "MEMRA_CTX_SIZE", "N", "context length per sequence (0 = model's, max 8192)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.context_length = int32_t(to_int(v, "--ctx-size", 0, 1 << 24));
       }},
      {"--max-sequences", "MEMRA_MAX_SEQUENCES", "N", "sequences running at once (default 64)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.max_sequences = int32_t(to_int(v, "--max-sequences", 1, 4096));
       }},
      {"--max-batch-tokens", "MEMRA_MAX_BATCH_TOKENS", "N",
       "token budget per engine step (default 512)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.max_batch_tokens = int32_t(to_int(v, "--max-batch-tokens", 1, 1 << 20));
       }},
      {"--max-queued", "MEMRA_MAX_QUEUED", "N", "waiting requests before 429 (default 256)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.max_queued = int32_t(to_int(v, "--max-queued", 0, 1 << 20));
       }},
      {"--kv-blocks", "MEMRA_KV_BLOCKS", "N", "KV cache blocks (0 = enough for every sequence)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.kv_blocks = int32_t(to_int(v, "--kv-blocks", 0, 1 << 24));
       }},
      {"--state-snapshots", "MEMRA_STATE_SNAPSHOTS", "N",
       "prefix-cache state snapshot slots of hybrid models (-1 = max sequences, 0 = no prefix "
       "cache for them)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.state_snapshots = int32_t(to_int(v, "--state-snapshots", -1, 1 << 16));
       }},
      {"--threads", "MEMRA_THREADS", "N", "CPU backend threads (0 = all cores)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.n_threads = int(to_int(v, "--threads", 0, 1024));
       }},
      {"--device", "MEMRA_DEVICE", "DEV", "auto | cpu | cuda | cuda:N (default auto: a GPU if any)",
       [](ServerConfig& c, const std::string& v) { c.engine.device = v; }},
      {"--kv-dtype", "MEMRA_KV_DTYPE", "TYPE",
       "KV cache type: f16 (CUDA default), bf16, f32, f8_e4m3 alias fp8 (half of f16's "
       "bytes, lossy: docs/PERFORMANCE.md; attention on CUDA cores) (CPU: f32, f8_e4m3)",
       [](ServerConfig& c, const std::string& v) { c.engine.kv_dtype = v; }},
      {"--deterministic", "MEMRA_DETERMINISTIC", "on|off",
       "off: faster GPU prefill that breaks the determinism contract (default on)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.deterministic = to_bool(v, "--deterministic");
       }},
      {"--cuda-graphs", "MEMRA_CUDA_GRAPHS", "on|off",
       "replay GPU decode steps as CUDA graphs (default on)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.cuda_graphs = to_bool(v, "--cuda-graphs");
       }},
      {"--gpu-memory-fraction", "MEMRA_GPU_MEMORY_FRACTION", "F",
       "share of free GPU memory the KV cache may take (default 0.9)",
       [](ServerConfig& c, const std::string& v) {
         c.engine.gpu_memory_fraction = to_fraction(v, "--gpu-memory-fraction");
       }},
      {"--no-prefix-cache", "MEMRA_NO_PREFIX_CACHE", nullptr, "disable the prefix cache",
       [](ServerConfig& c, const std::string& v) {
         c.engine.prefix_cache = !to_bool(v, "--no-prefix-cache");
       }},
      {"--api-key-file", "MEMRA_API_KEY_FILE", "PATH",
       "file of API keys, one per line (# comments)",
       [](ServerConfig& c, const std::string& v) { c.api_key_file = v; }},
      {"--max-body-bytes", "MEMRA_MAX_BODY_BYTES", "N", "request body limit (default 8 MiB)",
       [](ServerConfig& c, const std::string& v) {
         c.http.max_body_bytes = size_t(to_int(v, "--max-body-bytes", 1024, int64_t(1) << 32));
       }},
      {"--max-header-bytes", "MEMRA_MAX_HEADER_BYTES", "N",
       "request line + headers limit (default 16 KiB)",
       [](ServerConfig& c, const std::string& v) {
         c.http.max_header_bytes = size_t(to_int(v, "--max-header-bytes", 1024, 1 << 20));
       }},
      {"--max-connections", "MEMRA_MAX_CONNECTIONS", "N",
       "open connections before 503 (default 512)",
       [](ServerConfig& c, const std::string& v) {
         c.http.max_connections = int(to_int(v, "--max-connections", 1, 65536));
       }},
      {"--read-timeout", "MEMRA_READ_TIMEOUT", "SEC", "time to receive one request (default 30)",
       [](ServerConfig& c, const std::string& v) {
         c.http.read_timeout_ms = int(to_int(v, "--read-timeout", 1, 3600) * 1000);
       }},
      {"--idle-timeout", "MEMRA_IDLE_TIMEOUT", "SEC", "keep-alive idle time (default 15)",
       [](ServerConfig& c, const std::string& v) {
         c.http.idle_timeout_ms = int(to_int(v, "--idle-timeout", 1, 3600) * 1000);
       }},
      {"--write-timeout", "MEMRA_WRITE_TIMEOUT", "SEC",
       "a client reading nothing this long is dropped (default 30)",
       [](ServerConfig& c, const std::string& v) {
         c.http.write_timeout_ms = int(to_int(v, "--write-timeout", 1, 3600) * 1000);
       }},
      {"--max-n", "MEMRA_MAX_N", "N", "largest 'n' a request may ask (default 16)",
       [](ServerConfig& c, const std::string& v) {
         c.request.max_n = int32_t(to_int(v, "--max-n", 1, 128));
       }},
      {"--responses-store-max", "MEMRA_RESPONSES_STORE_MAX", "N",
       "stored Responses kept (default 1000; 0 = none)",
       [](ServerConfig& c, const std::string& v) {
         c.response_store.max_responses = size_t(to_int(v, "--responses-store-max", 0, 1 << 24));
       }},
      {"--responses-store-bytes", "MEMRA_RESPONSES_STORE_BYTES", "N",
       "JSON bytes of stored Responses (default 64 MiB)",
       [](ServerConfig& c, const std::string& v) {
         c.response_store.max_bytes =
             size_t(to_int(v, "--responses-store-bytes", 0, int64_t(1) << 40));
       }},
      {"--responses-store-ttl", "MEMRA_RESPONSES_STORE_TTL", "SEC",
       "age at which a stored Response is dropped (default 86400)",
       [](ServerConfig& c, const std::string& v) {
         c.response_store.max_age_s = to_int(v, "--responses-store-ttl", 1, int64_t(1) << 32);
       }},
      {"--shutdown-timeout", "MEMRA_SHUTDOWN_TIMEOUT", "SEC", "drain time on SIGTERM (default 30)",
       [](ServerConfig& c, const std::string& v) {
         c.shutdown_timeout_s = int(to_int(v, "--shutdown-timeout", 0, 86400));
       }},
      {"--chat-template", "MEMRA_CHAT_TEMPLATE", "FILE",
       "Jinja chat template replacing the model's (e.g. one with a tool-call format)",
       [](ServerConfig& c, const std::string& v) { c.chat_template_file = v; }},
      {"--log-level", "MEMRA_LOG_LEVEL", "LEVEL", "debug, info, warn or error (default info)",
       [](ServerConfig& c, const std::string& v) { c.log_level = v; }},
  };
  return kOptions;
}

}  // namespace

ServerConfig parse_server_config(const std::vector<std::string>& args, const EnvLookup& env) {
  ServerConfig config;
  // Environment first, then flags (flags win).
  for (const Option& o : options()) {
    const char* v = env(o.env);
    if (v && *v) o.set(config, v);
  }
  if (const char* keys = env("MEMRA_API_KEYS")) config.api_keys = keys;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      config.help = true;
      continue;
    }
    std::string name = a, value;
    bool inline_value = false;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    if (name == "-m") name = "--model";
    const Option* found = nullptr;
    for (const Option& o : options())
      if (name == o.flag) found = &o;
    if (!found) fail(ErrorCode::invalid_argument, "unknown option '{}' (see --help)", a);
    if (!found->meta) {
      found->set(config, inline_value ? value : "true");
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) fail(ErrorCode::invalid_argument, "{} needs a value", name);
      value = args[++i];
    }
    found->set(config, value);
  }
  // --task / --pooling fill the entries that did not set their own (or the single model).
  if ((!config.task.empty() || !config.pooling.empty()) && config.models.empty())
    config.models.push_back({"", ""});
  for (ModelSpec& spec : config.models) {
    if (spec.task.empty()) spec.task = config.task;
    if (spec.pooling.empty()) spec.pooling = config.pooling;
  }
  if (!config.chat_template_file.empty() && config.models.size() > 1)
    fail(ErrorCode::invalid_argument,
         "--chat-template replaces one model's template; MEMRA_MODELS names {} models",
         config.models.size());
  return config;
}

std::string server_usage(const char* program) {
  std::string out = std::string("usage: ") + program + " [options]\n\n" +
                    "Serves the OpenAI-compatible API (docs/SERVING.md). Every option can also be\n"
                    "set by its environment variable; the flag wins.\n\n";
  for (const Option& o : options()) {
    std::string left = std::string(o.flag) + (o.meta ? std::string(" ") + o.meta : "");
    out += fmt::format("  {:<26} {:<24} {}\n", left, o.env, o.help);
  }
  out += fmt::format("  {:<26} {:<24} {}\n", "", "MEMRA_API_KEYS", "comma-separated API keys");
  return out;
}

}  // namespace memra::server
