// The generation flow shared by /v1/chat/completions and /v1/completions: prompt-length checks,
// fan-out of n choices to the engine, and the streamed (SSE) or collected response.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/app.h"

namespace memra::server {

struct GenerationJob {
  bool chat = false;
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::vector<std::vector<int32_t>> prompts;  // one per prompt; choices = prompts * n
  GenerationParams gen;
  bool tools_active = false;
  std::shared_ptr<const structured::Grammar> grammar;  // forced output (null: free text)
};

// Renders a chat request with the model's template and tokenizes it; ApiError 400 when the model
// has no template or the template refuses the conversation.
std::vector<int32_t> render_chat_prompt(const ServedModel& model, const ChatRequest& chat);

// Checks prompt + max_tokens against the context (400 naming both numbers) and fills the default
// max_tokens; also checks logit_bias ids against the vocabulary.
void fit_to_context(const ServedModel& model, GenerationJob& job);

void run_generation(App& app, ServedModel& model, GenerationJob& job, HttpExchange& ex);

// The engine requests of a job: prompts x n choices, each with the job's sampling, stop and
// grammar; with a seed, choice c samples with seed + c (distinct, reproducible). Sinks are set by
// Generation::submit.
std::vector<Request> engine_requests(const GenerationJob& job);

// One choice's latency metrics, shared by the OpenAI and Anthropic responses: time to first token
// when its first token arrives, end-to-end latency and time per output token when it finishes.
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

// OpenAI's finish_reason for a choice ("tool_calls" when calls were parsed); /metrics counts
// every API's requests by these names.
const char* openai_finish_reason(FinishReason finish, bool has_tool_calls);

// "chatcmpl-" + 24 random hex digits.
std::string make_completion_id(const char* prefix);

}  // namespace memra::server
