// memra-server / `memra serve` entry: configuration from flags and MEMRA_* env, models loaded with
// the real engine, chat rendered with the model's Jinja template. It lives with the executables,
// not in memra_server, so the server tests (fake engine) link no engine or model code.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/log.h"
#include "server/builtin_chat_templates.h"
#include "server/serve.h"
#include "tokenizer/chat_template.h"

namespace memra::server {

namespace {

ServedModel load_with_engine(const ModelSpec& spec, const EngineOptions& options) {
  ServedModel m;
  m.engine = Engine::create(options);
  m.id = m.engine->model_info().id;
  if (const ChatTemplate* tmpl = m.engine->chat_template()) {
    m.render_chat = [tmpl](const ojson& context) { return tmpl->render(context); };
    return m;
  }
  const std::string& arch = m.engine->model_info().architecture;
  std::string source = builtin_chat_template(arch);
  if (source.empty()) {
    MEMRA_LOG_WARN("'{}' has no chat template: /v1/chat/completions will answer 400", spec.source);
    return m;
  }
  MEMRA_LOG_INFO("the model file has no chat template: using memra's built-in {} template", arch);
  auto tmpl = std::make_shared<ChatTemplate>(source);
  m.render_chat = [tmpl](const ojson& context) { return tmpl->render(context); };
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
  return run_server(config, load_with_engine);
}

}  // namespace memra::server
