// OpenAI's Responses API: POST /v1/responses (one choice over the chat rendering, engine,
// tool-call parsing and constrained decoding the other endpoints use), answered as one Response
// object or as its typed event stream (response.created ... response.completed); and the stored
// responses: GET /v1/responses/{id}, GET /v1/responses/{id}/input_items, DELETE.
#include <string_view>

#include "server/generate.h"
#include "server/json_fields.h"
#include "server/responses_request.h"
#include "server/structured_output.h"
#include "server/writers.h"

namespace memra::server {

namespace {

using json = nlohmann::json;

constexpr std::string_view kPrefix = "/v1/responses/";

// The Response fields that echo the request.
struct ResponseEcho {
  const ResponsesRequest* req;
  ojson conversation;  // previous turns and this input, without instructions
};

json function_call_item(const ParsedToolCall& call, const std::string& id,
                        const std::string& call_id, const char* status, bool with_arguments) {
  return {{"id", id},          {"type", "function_call"},
          {"status", status},  {"call_id", call_id},
          {"name", call.name}, {"arguments", with_arguments ? call.arguments : ""}};
}

json output_text_part(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", json::array()},
          {"logprobs", json::array()}};
}

json message_item(const std::string& id, const char* status, json content) {
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

class ResponsesWriter : public ResponseWriter {
 public:
  ResponsesWriter(App& app, const ServedModel& model, const GenerationJob& job, ResponseEcho echo,
                  HttpExchange& ex)
      : app_(app), model_(model), job_(job), echo_(std::move(echo)), ex_(ex) {}

  bool stream_start() override {
    const json r = response_json("in_progress", json::array(), nullptr);
    return event("response.created", {{"response", r}}) &&
           event("response.in_progress", {{"response", r}});
  }

  bool stream_delta(int, const ChoiceState& s, const ChoiceDelta& d) override {
    if (!d.reasoning.empty()) {
      if (!open_reasoning()) return false;
      if (!event("response.reasoning_text.delta", {{"item_id", reasoning_id_},
                                                   {"output_index", output_.size()},
                                                   {"content_index", 0},
                                                   {"delta", d.reasoning}}))
        return false;
    }
    if (d.content.empty()) return true;
    if (reasoning_open_ && !close_reasoning(s)) return false;
    if (!open_message()) return false;
    return event("response.output_text.delta", {{"item_id", message_id_},
                                                {"output_index", output_.size()},
                                                {"content_index", 0},
                                                {"delta", d.content},
                                                {"logprobs", json::array()}});
  }

  bool stream_finish(int, const ChoiceState& s) override {
    if (reasoning_open_ && !close_reasoning(s)) return false;
    if (s.calls.empty() && !open_message()) return false;
    if (message_open_ && !close_message(s)) return false;
    for (const ParsedToolCall& call : s.calls) {
      const std::string id = make_completion_id("fc_"), call_id = make_completion_id("call_");
      const size_t index = output_.size();
      json item = function_call_item(call, id, call_id, "completed", true);
      if (!event("response.output_item.added",
                 {{"output_index", index},
                  {"item", function_call_item(call, id, call_id, "in_progress", false)}}) ||
          !event("response.function_call_arguments.delta",
                 {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}}) ||
          !event("response.function_call_arguments.done", {{"item_id", id},
                                                           {"output_index", index},
                                                           {"name", call.name},
                                                           {"arguments", call.arguments}}) ||
          !event("response.output_item.done", {{"output_index", index}, {"item", item}}))
        return false;
      output_.push_back(std::move(item));
    }
    const json r = finished(s);
    return event(r["status"] == "completed" ? "response.completed" : "response.incomplete",
                 {{"response", r}});
  }

  void stream_error(const ChoiceState& s) override {
    json r = response_json("failed", output_, nullptr);
    r["error"] = {{"code", "server_error"}, {"message", s.error}};
    event("response.failed", {{"response", r}});
  }

  void stream_end(const std::vector<ChoiceState>&) override {}

  void respond(const std::vector<ChoiceState>& states) override {
    const ChoiceState& s = states.front();
    if (!s.reasoning.empty()) output_.push_back(reasoning_item(make_completion_id("rs_"), s));
    if (!s.text.empty() || s.calls.empty())
      output_.push_back(message_item(make_completion_id("msg_"), item_status(s),
                                     json::array({output_text_part(s.text)})));
    for (const ParsedToolCall& call : s.calls)
      output_.push_back(function_call_item(call, make_completion_id("fc_"),
                                           make_completion_id("call_"), "completed", true));
    send_json(ex_, 200, finished(s));
  }

 private:
  static const char* item_status(const ChoiceState& s) {
    return s.finish == FinishReason::length ? "incomplete" : "completed";
  }

  bool event(const char* type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return ex_.stream_write(fmt::format("event: {}\ndata: {}\n\n", type, json_dump(data)));
  }

  static json reasoning_item(const std::string& id, const ChoiceState& s) {
    return {{"id", id},
            {"type", "reasoning"},
            {"status", "completed"},
            {"summary", json::array()},
            {"content", json::array({{{"type", "reasoning_text"}, {"text", s.reasoning}}})}};
  }

  bool open_reasoning() {
    if (reasoning_open_) return true;
    reasoning_open_ = true;
    reasoning_id_ = make_completion_id("rs_");
    return event("response.output_item.added", {{"output_index", output_.size()},
                                                {"item",
                                                 {{"id", reasoning_id_},
                                                  {"type", "reasoning"},
                                                  {"status", "in_progress"},
                                                  {"summary", json::array()},
                                                  {"content", json::array()}}}});
  }

  bool close_reasoning(const ChoiceState& s) {
    reasoning_open_ = false;
    const size_t index = output_.size();
    json item = reasoning_item(reasoning_id_, s);
    const bool ok = event("response.reasoning_text.done", {{"item_id", reasoning_id_},
                                                           {"output_index", index},
                                                           {"content_index", 0},
                                                           {"text", s.reasoning}}) &&
                    event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
    return ok;
  }

  bool open_message() {
    if (message_open_) return true;
    message_open_ = true;
    message_id_ = make_completion_id("msg_");
    const size_t index = output_.size();
    return event("response.output_item.added",
                 {{"output_index", index},
                  {"item", message_item(message_id_, "in_progress", json::array())}}) &&
           event("response.content_part.added", {{"item_id", message_id_},
                                                 {"output_index", index},
                                                 {"content_index", 0},
                                                 {"part", output_text_part("")}});
  }

  bool close_message(const ChoiceState& s) {
    message_open_ = false;
    const size_t index = output_.size();
    json item = message_item(message_id_, item_status(s), json::array({output_text_part(s.text)}));
    const bool ok = event("response.output_text.done", {{"item_id", message_id_},
                                                        {"output_index", index},
                                                        {"content_index", 0},
                                                        {"text", s.text},
                                                        {"logprobs", json::array()}}) &&
                    event("response.content_part.done", {{"item_id", message_id_},
                                                         {"output_index", index},
                                                         {"content_index", 0},
                                                         {"part", output_text_part(s.text)}}) &&
                    event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
    return ok;
  }

  // The final Response; stored (when asked) before the client can see it, so a retrieve right
  // after the last event finds it.
  json finished(const ChoiceState& s) {
    const bool complete = s.finish != FinishReason::length;
    json usage = {{"input_tokens", s.usage.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", s.usage.cached_tokens}}},
                  {"output_tokens", s.usage.completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", s.reasoning_tokens}}},
                  {"total_tokens", s.usage.prompt_tokens + s.usage.completion_tokens}};
    json r = response_json(complete ? "completed" : "incomplete", output_, usage);
    if (!complete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (echo_.req->store) store(s, r);
    return r;
  }

  void store(const ChoiceState& s, const json& response) {
    auto stored = std::make_shared<StoredResponse>();
    stored->id = job_.id;
    stored->response = response;
    stored->input_items = echo_.req->input_items;
    stored->conversation = echo_.conversation;
    ojson turn = {{"role", "assistant"}, {"content", s.text}};
    if (!s.reasoning.empty()) turn["reasoning_content"] = s.reasoning;
    for (const json& item : response["output"]) {
      if (item["type"] != "function_call") continue;
      ojson args = ojson::parse(item["arguments"].get<std::string>(), nullptr, false);
      if (!turn.contains("tool_calls")) turn["tool_calls"] = ojson::array();
      turn["tool_calls"].push_back({{"id", item["call_id"]},
                                    {"type", "function"},
                                    {"function", {{"name", item["name"]}, {"arguments", args}}}});
    }
    stored->conversation.push_back(std::move(turn));
    app_.responses().put(std::move(stored));
  }

  json response_json(const char* status, json output, json usage) const {
    const ResponsesRequest& req = *echo_.req;
    const GenerationParams& g = req.chat.gen;
    auto or_null = [](const std::string& v) { return v.empty() ? json() : json(v); };
    return {{"id", job_.id},
            {"object", "response"},
            {"created_at", job_.created},
            {"status", status},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"instructions", or_null(req.instructions)},
            {"max_output_tokens", g.max_tokens_given ? json(g.stop.max_tokens) : json()},
            {"metadata", json::parse(req.metadata.dump())},
            {"model", model_.id},
            {"output", std::move(output)},
            {"parallel_tool_calls", req.chat.parallel_tool_calls},
            {"previous_response_id", or_null(req.previous_response_id)},
            {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
            {"store", req.store},
            {"temperature", g.sampling.temperature},
            {"text", {{"format", json::parse(req.text_format.dump())}}},
            {"tool_choice", json::parse(req.tool_choice.dump())},
            {"tools", json::parse(req.tools.dump())},
            {"top_p", g.sampling.top_p},
            {"truncation", "disabled"},
            {"usage", std::move(usage)},
            {"user", or_null(g.user)}};
  }

  App& app_;
  const ServedModel& model_;
  const GenerationJob& job_;
  ResponseEcho echo_;
  HttpExchange& ex_;
  json output_ = json::array();  // finished output items
  int64_t sequence_ = 0;
  bool message_open_ = false;
  std::string message_id_;
  bool reasoning_open_ = false;
  std::string reasoning_id_;
};

[[noreturn]] void response_not_found(const std::string& id, const char* param = "") {
  throw ApiError(404, "invalid_request_error", param, "",
                 fmt::format("Response with id '{}' not found.", id));
}

// The id after /v1/responses/, and whether /input_items follows it.
std::string response_id(const HttpRequest& req, bool& input_items) {
  std::string rest = req.path.substr(kPrefix.size());
  constexpr std::string_view kItems = "/input_items";
  input_items = rest.size() > kItems.size() && rest.ends_with(kItems);
  if (input_items) rest.resize(rest.size() - kItems.size());
  if (rest.empty() || rest.find('/') != std::string::npos)
    throw ApiError(404, "invalid_request_error", "", "not_found",
                   fmt::format("unknown route {} {}", req.method, req.path));
  return rest;
}

// One query parameter's raw value ("" when absent).
std::string query_param(const std::string& query, std::string_view name) {
  size_t at = 0;
  while (at <= query.size()) {
    size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    std::string_view pair(query.data() + at, end - at);
    if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=')
      return std::string(pair.substr(name.size() + 1));
    at = end + 1;
  }
  return "";
}

// GET .../input_items: OpenAI's cursor page (limit 1..100, order asc|desc, after an item id).
json input_items_page(const StoredResponse& r, const std::string& query) {
  const std::string order = query_param(query, "order");
  const std::string after = query_param(query, "after");
  const std::string limit_text = query_param(query, "limit");
  if (!order.empty() && order != "asc" && order != "desc")
    bad_request("order", "'order' must be asc or desc");
  int limit = 20;
  if (!limit_text.empty()) {
    limit =
        limit_text.size() <= 3 && limit_text.find_first_not_of("0123456789") == std::string::npos
            ? std::stoi(limit_text)
            : 0;
    if (limit < 1 || limit > 100) bad_request("limit", "'limit' must be an integer from 1 to 100");
  }
  std::vector<json> items;
  for (const ojson& item : r.input_items) items.push_back(json::parse(item.dump()));
  if (order != "asc") std::reverse(items.begin(), items.end());
  size_t start = 0;
  if (!after.empty()) {
    while (start < items.size() && !(items[start].contains("id") && items[start]["id"] == after))
      ++start;
    if (start == items.size()) bad_request("after", "'after' names no item of this response");
    ++start;
  }
  json data = json::array();
  for (size_t i = start; i < items.size() && data.size() < static_cast<size_t>(limit); ++i)
    data.push_back(items[i]);
  const bool more = start + data.size() < items.size();
  return {{"object", "list"},
          {"data", data},
          {"first_id", data.empty() ? json() : data.front()["id"]},
          {"last_id", data.empty() ? json() : data.back()["id"]},
          {"has_more", more}};
}

}  // namespace

void handle_responses(App& app, const HttpRequest& req, HttpExchange& ex) {
  ojson body = parse_json_body(req.body, app.config().request_limits);
  ResponsesRequest r = parse_responses_request(body, app.config().request_limits);
  ServedModel& model = app.model_for(r.chat.gen.model, ModelTask::generate);
  ResponseEcho echo{&r, ojson::array()};
  if (!r.previous_response_id.empty()) {
    auto previous = app.responses().get(r.previous_response_id);
    if (!previous) response_not_found(r.previous_response_id, "previous_response_id");
    echo.conversation = previous->conversation;
  }
  for (const ojson& m : r.chat.messages) echo.conversation.push_back(m);
  // Instructions apply to this response only (OpenAI does not carry them over a chain).
  ChatRequest chat = r.chat;
  chat.messages = ojson::array();
  if (!r.instructions.empty())
    chat.messages.push_back({{"role", "system"}, {"content", r.instructions}});
  for (const ojson& m : echo.conversation) chat.messages.push_back(m);
  GenerationJob job;
  job.chat = true;
  job.id = make_completion_id("resp_");
  job.created = unix_time_now();
  job.gen = chat.gen;
  job.tools_active = chat.tools_active();
  job.grammar = chat.tool_call_forced()
                    ? forced_tool_call_grammar(chat, model.tool_format, model.id)
                    : response_format_grammar(chat.gen, "text.format.schema");
  render_chat_job(model, chat, job);
  fit_to_context(model, job, "max_output_tokens");
  ResponsesWriter writer(app, model, job, std::move(echo), ex);
  run_generation(app, model, job, ex, writer);
}

void handle_response_get(App& app, const HttpRequest& req, HttpExchange& ex) {
  bool input_items = false;
  const std::string id = response_id(req, input_items);
  if (!input_items && query_param(req.query, "stream") == "true")
    unsupported_field("stream", "streaming a stored response is not supported by memra");
  auto stored = app.responses().get(id);
  if (!stored) response_not_found(id);
  send_json(ex, 200, input_items ? input_items_page(*stored, req.query) : stored->response);
}

void handle_response_delete(App& app, const HttpRequest& req, HttpExchange& ex) {
  bool input_items = false;
  const std::string id = response_id(req, input_items);
  if (input_items)
    throw ApiError(405, "invalid_request_error", "", "method_not_allowed",
                   "DELETE is not allowed on input_items");
  if (!app.responses().remove(id)) response_not_found(id);
  send_json(ex, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace memra::server
