// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API over the same chat
// rendering, engine and tool-call parsing as /v1/chat/completions. Responses and SSE events follow
// Anthropic's shapes: content blocks (text, tool_use), stop_reason end_turn / max_tokens /
// stop_sequence / tool_use, and the message_start ... message_stop event sequence.
#include "server/anthropic_request.h"
#include "server/generate.h"
#include "server/structured_output.h"
#include "server/writers.h"

namespace memra::server {

namespace {

using json = nlohmann::json;

const char* stop_reason(const ChoiceState& s) {
  if (!s.calls.empty()) return "tool_use";
  if (s.finish == FinishReason::length) return "max_tokens";
  return s.matched_stop.empty() ? "end_turn" : "stop_sequence";
}

json usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"output_tokens", u.completion_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens}};
}

// `streamed`: the input arrives as input_json_delta events, so the block starts with {}.
json tool_use_block(const ParsedToolCall& call, bool streamed) {
  json input = streamed ? json::object() : json::parse(call.arguments, nullptr, false);
  if (input.is_discarded()) input = json::object();  // the parser only yields valid JSON
  return {{"type", "tool_use"},
          {"id", make_completion_id("toolu_")},
          {"name", call.name},
          {"input", input}};
}

// One choice (Messages has no n): a Message body, or its event sequence.
class MessagesWriter : public ResponseWriter {
 public:
  MessagesWriter(const ServedModel& model, const GenerationJob& job, HttpExchange& ex)
      : model_(model), job_(job), ex_(ex) {}

  bool stream_start() override {
    json start = message_json(ChoiceState{}, json::array());
    start["usage"]["input_tokens"] = static_cast<int32_t>(job_.prompts.front().size());
    return event("message_start", {{"type", "message_start"}, {"message", start}}) &&
           event("ping", {{"type", "ping"}});
  }

  // The thinking block (if any) comes first, then the text block; each opens at its first text.
  bool stream_delta(int, const ChoiceState&, const ChoiceDelta& d) override {
    if (!d.reasoning.empty()) {
      if (!open_block(Block::thinking)) return false;
      if (!event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index_},
                  {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}}))
        return false;
    }
    if (d.content.empty()) return true;
    return open_block(Block::text) &&
           event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
  }

  // The closing events: the text block, one block per tool call (its input as one JSON delta),
  // the stop reason with the final usage, message_stop.
  bool stream_finish(int, const ChoiceState& s) override {
    if (!close_block()) return false;
    for (const ParsedToolCall& call : s.calls) {
      if (!event("content_block_start", {{"type", "content_block_start"},
                                         {"index", index_},
                                         {"content_block", tool_use_block(call, true)}}) ||
          !event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index_},
                  {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}}) ||
          !event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}}))
        return false;
    }
    json usage = {{"output_tokens", s.usage.completion_tokens}};
    return event("message_delta",
                 {{"type", "message_delta"},
                  {"delta",
                   {{"stop_reason", stop_reason(s)},
                    {"stop_sequence", s.matched_stop.empty() ? json() : json(s.matched_stop)}}},
                  {"usage", usage}}) &&
           event("message_stop", {{"type", "message_stop"}});
  }

  void stream_error(const ChoiceState& s) override {
    event("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", s.error}}}});
  }

  void stream_end(const std::vector<ChoiceState>&) override {}

  void respond(const std::vector<ChoiceState>& states) override {
    const ChoiceState& s = states.front();
    json content = json::array();
    if (!s.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", s.reasoning}, {"signature", ""}});
    if (!s.text.empty()) content.push_back({{"type", "text"}, {"text", s.text}});
    for (const ParsedToolCall& call : s.calls) content.push_back(tool_use_block(call, false));
    send_json(ex_, 200, message_json(s, content));
  }

 private:
  json message_json(const ChoiceState& s, json content) const {
    return {{"id", job_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_.id},
            {"content", std::move(content)},
            {"stop_reason", s.finish == FinishReason::none ? json() : json(stop_reason(s))},
            {"stop_sequence", s.matched_stop.empty() ? json() : json(s.matched_stop)},
            {"usage", usage_json(s.usage)}};
  }

  bool event(const char* name, const json& data) {
    return ex_.stream_write(fmt::format("event: {}\ndata: {}\n\n", name, json_dump(data)));
  }

  enum class Block { none, thinking, text };

  bool open_block(Block kind) {
    if (open_ == kind) return true;
    if (!close_block()) return false;
    open_ = kind;
    // memra signs nothing: the signature is empty, as clients that only pass it back expect.
    json block = kind == Block::thinking
                     ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                     : json{{"type", "text"}, {"text", ""}};
    return event("content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }

  bool close_block() {
    if (open_ == Block::none) return true;
    open_ = Block::none;
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
  }

  const ServedModel& model_;
  const GenerationJob& job_;
  HttpExchange& ex_;
  Block open_ = Block::none;
  int index_ = 0;  // the next content block's index
};

// The prompt the request renders to, as for /v1/chat/completions.
GenerationJob prepare(App& app, const HttpRequest& req, bool count_only, ServedModel*& model) {
  ojson body = parse_json_body(req.body, app.config().request_limits);
  ChatRequest chat = parse_messages_request(body, app.config().request_limits, count_only);
  model = &app.model_for(chat.gen.model, ModelTask::generate);
  GenerationJob job;
  job.chat = true;
  job.id = make_completion_id("msg_");
  job.gen = chat.gen;
  job.tools_active = chat.tools_active();
  if (!count_only)
    job.grammar = chat.tool_call_forced()
                      ? forced_tool_call_grammar(chat, model->tool_format, model->id)
                      : response_format_grammar(chat.gen);
  render_chat_job(*model, chat, job);
  return job;
}

}  // namespace

std::unique_ptr<ResponseWriter> make_messages_writer(const ServedModel& model,
                                                     const GenerationJob& job, HttpExchange& ex) {
  return std::make_unique<MessagesWriter>(model, job, ex);
}

void handle_messages(App& app, const HttpRequest& req, HttpExchange& ex) {
  ServedModel* model = nullptr;
  GenerationJob job = prepare(app, req, false, model);
  fit_to_context(*model, job);
  run_generation(app, *model, job, ex, *make_messages_writer(*model, job, ex));
}

void handle_count_tokens(App& app, const HttpRequest& req, HttpExchange& ex) {
  ServedModel* model = nullptr;
  GenerationJob job = prepare(app, req, true, model);
  send_json(ex, 200, {{"input_tokens", job.prompts.front().size()}});
}

}  // namespace memra::server
