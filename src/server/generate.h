// The protocol-independent generation flow behind every generating endpoint: prompt-length checks,
// fan-out of n choices to the engine, one event loop that applies engine events to per-choice
// state (tool-call splitting, latency metrics, abandon on a vanished client), and a
// ResponseWriter per protocol that turns that state into SSE events or one response body.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/app.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace memra::server {

struct GenerationJob {
  bool chat = false;  // a rendered chat prompt (max_tokens default: fill the context)
  std::string id;     // chatcmpl-... / cmpl-... / msg_... / resp_...
  int64_t created = 0;
  std::vector<std::vector<int32_t>> prompts;  // one per prompt; choices = prompts * n
  GenerationParams gen;
  bool tools_active = false;
  std::shared_ptr<const structured::Grammar> grammar;  // forced output (null: free text)
  // Thinking: the model's span format (disabled: none or a raw prompt), whether the prompt
  // leaves the model inside the span, and the most tokens it may think (-1: no limit).
  ReasoningFormat reasoning;
  bool prompt_in_reasoning = false;
  int32_t max_thinking_tokens = -1;
};

// One choice's latency metrics, shared by every protocol: time to first token when its first
// token arrives, end-to-end latency and time per output token when it finishes.
class ChoiceTimer {
 public:
  using Clock = std::chrono::steady_clock;
  ChoiceTimer(Metrics& metrics, Clock::time_point start) : metrics_(&metrics), start_(start) {}
  void on_tokens(size_t n);
  void on_finish(const char* reason);

 private:
  Metrics* metrics_;
  Clock::time_point start_;
  Clock::time_point first_token_{};
  size_t tokens_ = 0;
};

// What the loop knows about one choice; writers read it.
struct ChoiceState {
  std::string text;       // content so far (outside tool calls and the thinking span)
  std::string reasoning;  // the thinking span's text so far
  int32_t reasoning_tokens = 0;
  ReasoningSplitter splitter;
  ToolCallStreamer tool_streamer;
  std::vector<ParsedToolCall> calls;  // parsed when the choice finishes
  FinishReason finish = FinishReason::none;
  std::string matched_stop;
  std::string error;
  Usage usage;
  std::vector<GeneratedToken> tokens;  // every generated token, kept only when logprobs are asked
  std::vector<int32_t> ids;            // every generated token id (a restart continues from them)
  int32_t restarted_tokens = 0;        // completion tokens before the current engine request
  std::optional<ChoiceTimer> timer;
};

// What one engine event added to a choice.
struct ChoiceDelta {
  std::string reasoning;                      // thinking text to show now
  std::string content;                        // text to show now (held back inside tool calls)
  const std::vector<GeneratedToken>* tokens;  // the event's tokens (for logprobs)
};

// One per protocol (OpenAI chat, text completions, Anthropic Messages, Responses). The loop calls
// the stream_* methods when the request streams (after the SSE head is sent), else respond().
// Every stream_* method returns false once the client is gone.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual bool stream_start() = 0;
  virtual bool stream_delta(int choice, const ChoiceState& state, const ChoiceDelta& delta) = 0;
  // A choice finished normally (stop, length or tool calls): its closing events.
  virtual bool stream_finish(int choice, const ChoiceState& state) = 0;
  // A choice failed mid-stream: the protocol's error event (the loop then cancels the rest).
  virtual void stream_error(const ChoiceState& state) = 0;
  // Every choice is done and the client is still there: trailing events (usage, [DONE]).
  virtual void stream_end(const std::vector<ChoiceState>& states) = 0;
  // Not streaming: every choice finished without error; send the whole response.
  virtual void respond(const std::vector<ChoiceState>& states) = 0;
};

// Renders a chat request with the model's template (chat_template_kwargs added to its context)
// and tokenizes it; ApiError 400 when the model has no template or the template refuses the
// conversation. `text`, when given, receives the rendered prompt.
std::vector<int32_t> render_chat_prompt(const ServedModel& model, const ChatRequest& chat,
                                        std::string* text = nullptr);

// Renders `chat` into `job` (its one prompt) with the model's thinking format: the span's start
// state and the thinking budget. Constrained output (a grammar) turns thinking off unless the
// request set enable_thinking itself: the grammar holds from the first token.
void render_chat_job(const ServedModel& model, const ChatRequest& chat, GenerationJob& job);

// Checks prompt + max_tokens against the context (400 naming both numbers) and fills the default
// max_tokens; also checks logit_bias ids against the vocabulary. `max_tokens_param` names the
// request field in the 400.
void fit_to_context(const ServedModel& model, GenerationJob& job,
                    const char* max_tokens_param = "max_tokens");

// Runs the job on the model's engine and answers through `writer`. A generation error is a 500
// (non-streaming) or the writer's error event; a vanished client cancels every choice.
void run_generation(App& app, ServedModel& model, const GenerationJob& job, HttpExchange& ex,
                    ResponseWriter& writer);

// The engine requests of a job: prompts x n choices, each with the job's sampling, stop and
// grammar; with a seed, choice c samples with seed + c (distinct, reproducible). Sinks are set by
// Generation::submit.
std::vector<Request> engine_requests(const GenerationJob& job);

// Runs engine requests that each end with one result (an embedding, a score pair) on `model`:
// take(choice, event) for each that stops, returning false when the result is malformed; the
// first that ends otherwise (or is malformed) cancels the rest and is thrown as a 500 with `code`
// ("<what> failed: <reason>"). False when the client went away or the server is stopping.
bool run_to_results(App& app, ServedModel& model, std::vector<Request> requests, HttpExchange& ex,
                    const char* code, const char* what,
                    const std::function<bool(int, StreamEvent&)>& take);

// OpenAI's finish_reason for a choice ("tool_calls" when calls were parsed); /metrics counts
// every API's requests by these names.
const char* openai_finish_reason(FinishReason finish, bool has_tool_calls);

// `prefix` + 24 random hex digits ("chatcmpl-...", "call_...").
std::string make_completion_id(const char* prefix);

// Seconds since the Unix epoch (the `created` fields).
int64_t unix_time_now();

}  // namespace memra::server
