// `memra template`: renders a Jinja chat template with a JSON context, one at a time
// (--template FILE --context JSON) or in batch (--batch FILE: many template/context pairs in one
// process, results as JSON), which is how the Python parity gate drives it.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace memra::cli {

namespace {

constexpr const char* kUsage =
    "usage: memra template --template FILE (--context JSON | --context-file FILE)\n"
    "       memra template --batch FILE [--out FILE]\n"
    "\n"
    "Renders a chat template as transformers' apply_chat_template would. The context holds the\n"
    "template variables (messages, tools, add_generation_prompt, bos_token, ...).\n"
    "Batch file: {\"templates\": {NAME: PATH, ...}, \"cases\": [{\"template\": NAME,\n"
    "\"context\": {...}}, ...]}; output: a JSON array with {\"text\": ...} or {\"error\": ...}\n"
    "per case.\n";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::not_found, "cannot open '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::invalid_argument, "{} is not valid JSON: {}", what, e.what());
  }
}

int run_batch(const std::string& batch_path, const std::string& out_path) {
  nlohmann::ordered_json batch = parse_json(read_file(batch_path), batch_path);
  if (!batch.contains("templates") || !batch["templates"].is_object() || !batch.contains("cases") ||
      !batch["cases"].is_array())
    fail(ErrorCode::invalid_argument, "batch file needs a 'templates' object and a 'cases' array");
  std::map<std::string, std::optional<ChatTemplate>> templates;
  std::map<std::string, std::string> parse_errors;
  for (const auto& [name, path] : batch["templates"].items()) {
    if (!path.is_string())
      fail(ErrorCode::invalid_argument, "template '{}' path must be a string", name);
    try {
      templates[name].emplace(read_file(path.get<std::string>()));
    } catch (const Error& e) {
      parse_errors[name] = e.what();
      templates[name].reset();
    }
  }
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& c : batch["cases"]) {
    nlohmann::ordered_json r = nlohmann::ordered_json::object();
    std::string name = c.value("template", "");
    auto it = templates.find(name);
    if (it == templates.end())
      fail(ErrorCode::invalid_argument, "case names unknown template '{}'", name);
    if (!it->second) {
      r["error"] = parse_errors[name];
    } else {
      try {
        r["text"] = it->second->render(c.at("context"));
      } catch (const Error& e) {
        r["error"] = e.what();
      }
    }
    results.push_back(std::move(r));
  }
  std::string text = results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (out_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    std::ofstream out(out_path, std::ios::binary);
    out << text;
    if (!out) fail(ErrorCode::io, "cannot write '{}'", out_path);
  }
  return 0;
}

int run_template(const Args& args) {
  std::string template_path, context_text, batch_path, out_path;
  bool have_context = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size())
      fail(ErrorCode::invalid_argument, "option '{}' needs a value (see --help)", a);
    const std::string& v = args[++i];
    if (a == "--template")
      template_path = v;
    else if (a == "--context")
      context_text = v, have_context = true;
    else if (a == "--context-file")
      context_text = read_file(v), have_context = true;
    else if (a == "--batch")
      batch_path = v;
    else if (a == "--out")
      out_path = v;
    else
      fail(ErrorCode::invalid_argument, "unknown option '{}' (see --help)", a);
  }
  if (!batch_path.empty()) return run_batch(batch_path, out_path);
  if (template_path.empty() || !have_context)
    fail(ErrorCode::invalid_argument, "need --template and --context (see --help)");
  ChatTemplate tmpl(read_file(template_path));
  std::string text = tmpl.render(parse_json(context_text, "--context"));
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const Registration kReg{
    {"template", "render a Jinja chat template with a JSON context", &run_template}};

}  // namespace

}  // namespace memra::cli
