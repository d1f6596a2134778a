// ChatTemplate: parses a Jinja chat template once and renders it per request with the jinja
// interpreter (src/tokenizer/jinja/), prefixing every error with the template line.
#include "tokenizer/chat_template.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/parser.h"

namespace memra {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->body = jinja::parse(source);
  } catch (const Error& e) {
    // Parser messages start with "line N: ".
    throw Error(e.code(), std::string("chat template ") + e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const TemplateLimits& limits) const {
  return render_marked(context, {}, limits).text;
}

RenderedPrompt ChatTemplate::render_marked(const nlohmann::ordered_json& context,
                                           const std::vector<std::string>& own,
                                           const TemplateLimits& limits) const {
  if (!context.is_object())
    fail(ErrorCode::invalid_argument, "chat template context must be an object");
  jinja::Interpreter interpreter({limits.max_steps, limits.max_output_bytes, limits.max_depth});
  try {
    jinja::Value vars = jinja::Value::from_json(context, /*client=*/true);
    for (auto& [key, value] : vars.dict->items)
      if (std::find(own.begin(), own.end(), key.text) != own.end())
        value = jinja::Value::from_json(context.at(key.text), /*client=*/false);
    jinja::Output out = interpreter.render(impl_->body, vars);
    RenderedPrompt rendered{std::move(out.text), {}};
    rendered.client.reserve(out.marks.size());
    for (const jinja::Span& s : out.marks) rendered.client.push_back({s.begin, s.end});
    return rendered;
  } catch (const Error& e) {
    ErrorCode code =
        e.code() == ErrorCode::resource_exhausted ? e.code() : ErrorCode::invalid_argument;
    throw Error(code, fmt::format("chat template line {}: {}", interpreter.line(), e.what()));
  }
}

}  // namespace memra
