// memra-server / `memra serve` entry: configuration from flags and MEMRA_* env, models loaded with
// the real engine, chat rendered with the model's Jinja template. It lives with the executables,
// not in memra_server, so the server tests (fake engine) link no engine or model code.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "core/log.h"
#include "server/builtin_chat_templates.h"
#include "server/reasoning.h"
#include "server/serve.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

constexpr size_t kMaxTemplateBytes = 1 << 20;

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::not_found, "--chat-template: cannot open '{}'", path);
  std::string text(kMaxTemplateBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxTemplateBytes)
    fail(ErrorCode::invalid_argument, "--chat-template: '{}' is larger than {} bytes", path,
         kMaxTemplateBytes);
  return text;
}

// The chat template, in order: --chat-template, the model's own, memra's built-in one for the
// architecture. `template_file` is empty when none was given.
ServedModel load_with_engine(const ModelSpec& spec, const EngineOptions& options,
                             const std::string& template_file) {
  ServedModel m;
  m.engine = Engine::create(options);
  m.id = m.engine->model_info().id;
  std::string source;
  if (!template_file.empty()) {
    source = read_template_file(template_file);
    MEMRA_LOG_INFO("chat template from {}", template_file);
  } else if (const ChatTemplate* own = m.engine->chat_template()) {
    m.render_chat = [own](const ojson& context, const std::vector<std::string>& own_vars) {
      return own->render_marked(context, own_vars);
    };
    m.tool_format = tool_call_format_of(m.engine->tokenizer().chat_template());
    m.reasoning = reasoning_format_of(m.engine->tokenizer().chat_template());
  } else {
    const std::string& arch = m.engine->model_info().architecture;
    source = builtin_chat_template(arch);
    if (source.empty()) {
      MEMRA_LOG_WARN("'{}' has no chat template: /v1/chat/completions will answer 400",
                     spec.source);
      return m;
    }
    MEMRA_LOG_INFO("the model file has no chat template: using memra's built-in {} template", arch);
  }
  if (!source.empty()) {
    auto tmpl = std::make_shared<const ChatTemplate>(source);
    m.render_chat = [tmpl](const ojson& context, const std::vector<std::string>& own_vars) {
      return tmpl->render_marked(context, own_vars);
    };
    m.tool_format = tool_call_format_of(source);
    m.reasoning = reasoning_format_of(source);
  }
  MEMRA_LOG_INFO("tool-call format: {}; thinking: {}", tool_call_format_name(m.tool_format),
                 m.reasoning.enabled() ? m.reasoning.open + " ... " + m.reasoning.close : "none");
  return m;
}

}  // namespace

int serve_main(const std::vector<std::string>& args, const char* program) {
  ServerConfig config =
      parse_server_config(args, [](const char* name) { return std::getenv(name); });
  if (config.help) {
    std::fputs(server_usage(program).c_str(), stdout);
    return 0;
  }
  if (!config.log_level.empty()) {
    const std::string& l = config.log_level;
    LogLevel level = l == "debug"   ? LogLevel::debug
                     : l == "warn"  ? LogLevel::warn
                     : l == "error" ? LogLevel::error
                     : l == "info"
                         ? LogLevel::info
                         : (fail(ErrorCode::invalid_argument,
                                 "--log-level must be debug, info, warn or error, got '{}'", l),
                            LogLevel::info);
    log_set_threshold(level);
  }
  return run_server(config, [&config](const ModelSpec& spec, const EngineOptions& options) {
    return load_with_engine(spec, options, config.chat_template_file);
  });
}

}  // namespace memra::server
