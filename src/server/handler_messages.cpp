// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API over the same chat
// rendering, engine and tool-call parsing as /v1/chat/completions. Responses and SSE events follow
// Anthropic's shapes: content blocks (text, tool_use), stop_reason end_turn / max_tokens /
// stop_sequence / tool_use, and the message_start ... message_stop event sequence.
#include <chrono>

#include "server/anthropic_request.h"
#include "server/generate.h"
#include "server/generation.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace memra::server {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct MessageState {
  std::string text;  // outside tool calls
  ToolCallStreamer streamer;
  std::vector<ParsedToolCall> calls;
  FinishReason finish = FinishReason::none;
  std::string matched_stop;
  std::string error;
  Usage usage;
};

const char* stop_reason(const MessageState& s) {
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

class MessagesRunner {
 public:
  MessagesRunner(App& app, ServedModel& model, GenerationJob& job, HttpExchange& ex)
      : app_(app), model_(model), job_(job), ex_(ex) {}

  void run() {
    std::vector<Request> requests = engine_requests(job_);  // one: Messages has no n
    start_ = Clock::now();
    timer_.emplace(app_.metrics(), start_);
    Generation gen(*model_.engine);
    gen.submit(std::move(requests));  // Error(invalid_argument / resource_exhausted) -> 400 / 429
    if (job_.gen.stream)
      stream(gen);
    else
      collect(gen);
  }

 private:
  bool gone() { return app_.aborting() || ex_.client_gone(); }

  // Applies one event; returns the text to show now.
  std::string apply(const StreamEvent& ev) {
    timer_->on_tokens(ev.tokens.size());
    s_.usage = ev.usage;
    std::string delta = job_.tools_active ? s_.streamer.push(ev.text) : ev.text;
    if (ev.finish != FinishReason::none) {
      s_.finish = ev.finish;
      s_.error = ev.error;
      s_.matched_stop = ev.matched_stop;
      if (job_.tools_active) {
        ToolCallParse rest = s_.streamer.finish();
        delta += rest.content;
        s_.calls = std::move(rest.calls);
      }
      timer_->on_finish(openai_finish_reason(s_.finish, !s_.calls.empty()));
    }
    s_.text += delta;
    return delta;
  }

  json message_json(json content) const {
    return {{"id", job_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_.id},
            {"content", std::move(content)},
            {"stop_reason", s_.finish == FinishReason::none ? json() : json(stop_reason(s_))},
            {"stop_sequence", s_.matched_stop.empty() ? json() : json(s_.matched_stop)},
            {"usage", usage_json(s_.usage)}};
  }

  void collect(Generation& gen) {
    while (auto e = gen.next([&] { return gone(); })) apply(e->event);
    if (gen.cancelled()) {
      app_.metrics().count_finished("cancelled");
      ex_.send(499, "application/json", "{}");  // nobody reads it; it marks the request
      return;
    }
    if (s_.finish == FinishReason::error)
      throw ApiError(500, "api_error", "", "generation_error", s_.error);
    json content = json::array();
    if (!s_.text.empty()) content.push_back({{"type", "text"}, {"text", s_.text}});
    for (const ParsedToolCall& call : s_.calls) content.push_back(tool_use_block(call, false));
    send_json(ex_, 200, message_json(content));
  }

  bool event(const char* name, const json& data) {
    return ex_.stream_write(fmt::format("event: {}\ndata: {}\n\n", name, json_dump(data)));
  }

  bool close_text_block() {
    if (!text_open_) return true;
    text_open_ = false;
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
  }

  void stream(Generation& gen) {
    if (!ex_.stream_begin(200, "text/event-stream")) return abandon(gen);
    json start = message_json(json::array());
    start["usage"]["input_tokens"] = static_cast<int32_t>(job_.prompts.front().size());
    if (!event("message_start", {{"type", "message_start"}, {"message", start}}) ||
        !event("ping", {{"type", "ping"}}))
      return abandon(gen);
    while (auto e = gen.next([&] { return gone(); })) {
      std::string delta = apply(e->event);
      if (s_.finish == FinishReason::error) {
        event("error",
              {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", s_.error}}}});
        gen.cancel_all();
        break;
      }
      if (!delta.empty()) {
        if (!text_open_) {
          text_open_ = true;
          if (!event("content_block_start", {{"type", "content_block_start"},
                                             {"index", index_},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}}))
            return abandon(gen);
        }
        if (!event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", index_},
                                           {"delta", {{"type", "text_delta"}, {"text", delta}}}}))
          return abandon(gen);
      }
      if (s_.finish != FinishReason::none && !finish_stream()) return abandon(gen);
    }
    if (gen.cancelled() && gone()) {  // nobody left to deliver to
      if (s_.finish == FinishReason::none) app_.metrics().count_finished("cancelled");
      return;
    }
    ex_.stream_end();
  }

  // The closing events: the text block, one block per tool call (its input as one JSON delta),
  // the stop reason with the final usage, message_stop.
  bool finish_stream() {
    if (!close_text_block()) return false;
    for (const ParsedToolCall& call : s_.calls) {
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
    json usage = {{"output_tokens", s_.usage.completion_tokens}};
    return event("message_delta",
                 {{"type", "message_delta"},
                  {"delta",
                   {{"stop_reason", stop_reason(s_)},
                    {"stop_sequence", s_.matched_stop.empty() ? json() : json(s_.matched_stop)}}},
                  {"usage", usage}}) &&
           event("message_stop", {{"type", "message_stop"}});
  }

  void abandon(Generation& gen) {
    gen.cancel_all();
    if (s_.finish == FinishReason::none) app_.metrics().count_finished("cancelled");
  }

  App& app_;
  ServedModel& model_;
  GenerationJob& job_;
  HttpExchange& ex_;
  MessageState s_;
  Clock::time_point start_;
  std::optional<ChoiceTimer> timer_;
  bool text_open_ = false;
  int index_ = 0;  // the next content block's index
};

// The prompt the request renders to, as for /v1/chat/completions.
GenerationJob prepare(App& app, const HttpRequest& req, bool count_only, ServedModel*& model) {
  ojson body = parse_json_body(req.body, app.config().request_limits);
  ChatRequest chat = parse_messages_request(body, app.config().request_limits, count_only);
  model = &app.model(chat.gen.model);
  GenerationJob job;
  job.chat = true;
  job.id = make_completion_id("msg_");
  job.prompts.push_back(render_chat_prompt(*model, chat));
  job.gen = chat.gen;
  job.tools_active = chat.tools_active();
  if (!count_only)
    job.grammar = chat.tool_call_forced()
                      ? forced_tool_call_grammar(chat, model->tool_format, model->id)
                      : response_format_grammar(chat.gen);
  return job;
}

}  // namespace

void handle_messages(App& app, const HttpRequest& req, HttpExchange& ex) {
  ServedModel* model = nullptr;
  GenerationJob job = prepare(app, req, false, model);
  fit_to_context(*model, job);
  MessagesRunner(app, *model, job, ex).run();
}

void handle_count_tokens(App& app, const HttpRequest& req, HttpExchange& ex) {
  ServedModel* model = nullptr;
  GenerationJob job = prepare(app, req, true, model);
  send_json(ex, 200, {{"input_tokens", job.prompts.front().size()}});
}

}  // namespace memra::server
