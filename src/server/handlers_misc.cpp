// GET /v1/models[/{id}], POST /tokenize, POST /detokenize, GET /metrics.
#include <chrono>

#include "server/generate.h"
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
          {"device", info.device}};
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
    if (!body.contains("prompt") || !body["prompt"].is_string())
      bad_request("prompt", "'prompt' must be a string (or send 'messages')");
    bool add_special = true;
    if (body.contains("add_special_tokens")) {
      if (!body["add_special_tokens"].is_boolean())
        bad_request("add_special_tokens", "'add_special_tokens' must be a boolean");
      add_special = body["add_special_tokens"].get<bool>();
    }
    ids = tok.encode(body["prompt"].get<std::string>(),
                     {.add_special = add_special, .parse_special = false});
  }
  send_json(ex, 200,
            {{"tokens", ids},
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
