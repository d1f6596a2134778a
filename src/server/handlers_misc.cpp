// GET /v1/models[/{id}], POST /tokenize, POST /detokenize, GET /metrics.
#include <chrono>

#include "server/generate.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

nlohmann::json model_card(const ServedModel& m) {
  const EngineModelInfo& info = m.engine->model_info();
  return {{"id", m.id},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "memra"},
          {"max_model_len", info.context_length},
          {"architecture", info.architecture},
          {"device", info.device},
          {"kv_dtype", info.kv_dtype},
          {"deterministic", info.deterministic},
          {"status", "ready"},
          {"task", model_task_name(m.task)}};
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xe  ? 3
                     : (c >> 3) == 0x1e ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

ojson body_json(App& app, const HttpRequest& req) {
  return parse_json_body(req.body, app.config().request_limits);
}

}  // namespace

void handle_models(App& app, const HttpRequest& req, HttpExchange& ex) {
  if (req.path.size() > std::string("/v1/models/").size()) {
    std::string id = req.path.substr(std::string("/v1/models/").size());
    send_json(ex, 200, model_card(app.model(id)));
    return;
  }
  nlohmann::json data = nlohmann::json::array();
  for (const ServedModel& m : app.models()) data.push_back(model_card(m));
  // Listed so an operator sees them; "status" tells clients they cannot be used.
  for (const FailedModel& f : app.failed_models())
    data.push_back({{"id", f.id},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "memra"},
                    {"status", "failed"},
                    {"error", f.error}});
  send_json(ex, 200, {{"object", "list"}, {"data", data}});
}

void handle_tokenize(App& app, const HttpRequest& req, HttpExchange& ex) {
  ojson body = body_json(app, req);
  std::string model_name =
      body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
  ServedModel& m = app.model(model_name);
  const Tokenizer& tok = m.engine->tokenizer();
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    // Same rendering as /v1/chat/completions, so clients can count a chat prompt's tokens.
    ojson chat_body = body;
    ChatRequest chat = parse_chat_request(chat_body, app.config().request_limits);
    ids = render_chat_prompt(m, chat);
  } else {
    // vLLM's names (prompt, add_special_tokens) or llama.cpp's (content, add_special). The text
    // is the client's own, so special tokens written in it become their ids (as in Hugging Face
    // tokenizers, vLLM and llama.cpp) unless parse_special is false.
    const char* text_name = field(body, "content") ? "content" : "prompt";
    const ojson* text = field(body, text_name);
    if (!text || !text->is_string())
      bad_request("prompt", "'prompt' (or 'content') must be a string (or send 'messages')");
    const bool add_special = field(body, "add_special") ? boolean(body, "add_special", true)
                                                        : boolean(body, "add_special_tokens", true);
    ids = tok.encode(
        text->get<std::string>(),
        {.add_special = add_special, .parse_special = boolean(body, "parse_special", true)});
  }
  nlohmann::json tokens = ids;
  if (boolean(body, "with_pieces", false)) {
    // llama.cpp's shape: a piece is its text, or its bytes where they are not valid UTF-8.
    tokens = nlohmann::json::array();
    for (int32_t id : ids) {
      const std::string piece = tok.token_bytes(id);
      nlohmann::json bytes = nlohmann::json::array();
      for (unsigned char c : piece) bytes.push_back(int(c));
      tokens.push_back({{"id", id}, {"piece", valid_utf8(piece) ? nlohmann::json(piece) : bytes}});
    }
  }
  send_json(ex, 200,
            {{"tokens", tokens},
             {"count", ids.size()},
             {"max_model_len", m.engine->model_info().context_length}});
}

void handle_detokenize(App& app, const HttpRequest& req, HttpExchange& ex) {
  ojson body = body_json(app, req);
  std::string model_name =
      body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
  ServedModel& m = app.model(model_name);
  const Tokenizer& tok = m.engine->tokenizer();
  if (!body.contains("tokens") || !body["tokens"].is_array())
    bad_request("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const ojson& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
      bad_request("tokens", "'tokens' entries must be token ids in [0, {})", tok.n_vocab());
    ids.push_back(t.get<int32_t>());
  }
  send_json(ex, 200, {{"prompt", tok.decode(ids, false)}});
}

void handle_metrics(App& app, const HttpRequest&, HttpExchange& ex) {
  std::vector<Metrics::ModelView> views;
  for (const ServedModel& m : app.models())
    views.push_back({m.id, m.engine->stats(), m.engine->model_info().device});
  ex.send(200, "text/plain; version=0.0.4; charset=utf-8", app.metrics().render(views));
}

}  // namespace memra::server
