// The shared generation loop: engine fan-out, events applied to per-choice state, the streamed or
// collected answer handed to the protocol's ResponseWriter, abandon when the client leaves.
#include "server/generate.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

using Clock = std::chrono::steady_clock;

class Loop {
 public:
  Loop(App& app, ServedModel& model, const GenerationJob& job, HttpExchange& ex,
       ResponseWriter& writer)
      : app_(app), model_(model), job_(job), ex_(ex), writer_(writer) {}

  void run() {
    std::vector<Request> requests = engine_requests(job_);
    states_.resize(requests.size());
    const Clock::time_point start = Clock::now();
    for (ChoiceState& c : states_) {
      c.timer.emplace(app_.metrics(), start);
      c.splitter = ReasoningSplitter(job_.reasoning, job_.prompt_in_reasoning);
    }
    Generation gen(*model_.engine);
    gen.submit(std::move(requests));  // Error(invalid_argument / resource_exhausted) -> 400 / 429
    if (job_.gen.stream)
      stream(gen);
    else
      collect(gen);
  }

 private:
  bool gone() { return app_.aborting() || ex_.client_gone(); }

  // Applies one event to its choice; returns what it adds to the visible output. The text goes
  // through the thinking-span splitter first, then (the answer only) the tool-call parser.
  ChoiceDelta apply(const ChoiceEvent& e) {
    ChoiceState& c = states_[e.choice];
    const StreamEvent& ev = e.event;
    c.timer->on_tokens(ev.tokens.size());
    c.usage = ev.usage;
    c.usage.prompt_tokens = static_cast<int32_t>(prompt_of(e.choice).size());
    c.usage.completion_tokens += c.restarted_tokens;
    c.usage.cached_tokens = std::min(c.usage.cached_tokens, c.usage.prompt_tokens);
    if (job_.gen.logprobs) c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    for (const GeneratedToken& t : ev.tokens) c.ids.push_back(t.id);
    if (c.splitter.in_reasoning()) c.reasoning_tokens += static_cast<int32_t>(ev.tokens.size());
    ReasoningSplit split = c.splitter.push(ev.text);
    if (ev.finish != FinishReason::none) {
      ReasoningSplit rest = c.splitter.finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    ChoiceDelta delta{std::move(split.reasoning),
                      job_.tools_active ? c.tool_streamer.push(split.content) : split.content,
                      &ev.tokens};
    if (ev.finish != FinishReason::none) {
      c.finish = ev.finish;
      c.error = ev.error;
      c.matched_stop = ev.matched_stop;
      if (job_.tools_active) {
        ToolCallParse rest = c.tool_streamer.finish();
        delta.content += rest.content;
        c.calls = std::move(rest.calls);
      }
      c.timer->on_finish(openai_finish_reason(c.finish, !c.calls.empty()));
    }
    c.text += delta.content;
    c.reasoning += delta.reasoning;
    return delta;
  }

  const std::vector<int32_t>& prompt_of(int choice) const {
    return job_.prompts[static_cast<size_t>(choice) / static_cast<size_t>(job_.gen.n)];
  }

  // The thinking budget: once a choice has thought `max_thinking_tokens` tokens inside its span,
  // its engine request is replaced by a continuation whose prompt ends with what it generated
  // plus the close tag, so the answer follows. Text the old request still held back (a partial
  // stop string) is dropped with it. Returns the reasoning text released by closing the span.
  std::string enforce_thinking_budget(Generation& gen, int choice) {
    ChoiceState& c = states_[choice];
    if (job_.max_thinking_tokens < 0 || c.finish != FinishReason::none ||
        !c.splitter.in_reasoning() || c.reasoning_tokens < job_.max_thinking_tokens)
      return "";
    const std::vector<int32_t> close = model_.engine->tokenizer().encode(
        job_.reasoning.close + "\n\n", {.add_special = false, .parse_special = true});
    Request r = engine_requests(job_)[static_cast<size_t>(choice)];
    const int64_t produced = static_cast<int64_t>(c.ids.size() + close.size());
    if (produced >= r.stop.max_tokens) return "";  // no room left: max_tokens ends it as usual
    r.stop.max_tokens -= static_cast<int32_t>(produced);
    r.prompt.insert(r.prompt.end(), c.ids.begin(), c.ids.end());
    r.prompt.insert(r.prompt.end(), close.begin(), close.end());
    gen.restart(choice, std::move(r));
    c.restarted_tokens = static_cast<int32_t>(produced);
    std::string tail = c.splitter.force_close().reasoning;
    c.reasoning += tail;
    return tail;
  }

  void count_abandoned() {
    for (const ChoiceState& c : states_)
      if (c.finish == FinishReason::none) app_.metrics().count_finished("cancelled");
  }

  void abandon(Generation& gen) {
    gen.cancel_all();
    count_abandoned();
  }

  bool valid(const ChoiceEvent& e) const {
    return e.choice >= 0 && e.choice < static_cast<int>(states_.size());
  }

  void stream(Generation& gen) {
    if (!ex_.stream_begin(200, "text/event-stream") || !writer_.stream_start()) return abandon(gen);
    while (auto e = gen.next([&] { return gone(); })) {
      if (!valid(*e)) continue;
      ChoiceDelta delta = apply(*e);
      delta.reasoning += enforce_thinking_budget(gen, e->choice);
      const ChoiceState& c = states_[e->choice];
      if (c.finish == FinishReason::error) {
        writer_.stream_error(c);
        gen.cancel_all();
        break;
      }
      if (!writer_.stream_delta(e->choice, c, delta)) return abandon(gen);
      if (c.finish != FinishReason::none && !writer_.stream_finish(e->choice, c))
        return abandon(gen);
    }
    if (gen.cancelled() && gone()) return count_abandoned();  // nobody left to deliver to
    writer_.stream_end(states_);
    ex_.stream_end();
  }

  void collect(Generation& gen) {
    while (auto e = gen.next([&] { return gone(); })) {
      if (!valid(*e)) continue;
      apply(*e);
      enforce_thinking_budget(gen, e->choice);
    }
    if (gen.cancelled()) {
      count_abandoned();
      // The client left (or a forced shutdown): nobody reads this, it only marks the request.
      ex_.send(499, "application/json", "{}");
      return;
    }
    for (const ChoiceState& c : states_)
      if (c.finish == FinishReason::error)
        throw ApiError(500, "server_error", "", "generation_error", c.error);
    writer_.respond(states_);
  }

  App& app_;
  ServedModel& model_;
  const GenerationJob& job_;
  HttpExchange& ex_;
  ResponseWriter& writer_;
  std::vector<ChoiceState> states_;
};

}  // namespace

std::vector<Request> engine_requests(const GenerationJob& job) {
  const size_t n = static_cast<size_t>(job.gen.n);
  std::vector<Request> requests;
  for (size_t c = 0; c < job.prompts.size() * n; ++c) {
    Request r;
    r.prompt = job.prompts[c / n];
    r.sampling = job.gen.sampling;
    if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + c;
    r.stop = job.gen.stop;
    r.grammar = job.grammar;
    requests.push_back(std::move(r));
  }
  return requests;
}

const char* openai_finish_reason(FinishReason finish, bool has_tool_calls) {
  if (has_tool_calls) return "tool_calls";
  switch (finish) {
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
    default:
      return "stop";
  }
}

void ChoiceTimer::on_tokens(size_t n) {
  if (n > 0 && tokens_ == 0) {
    first_token_ = Clock::now();
    metrics_->observe_ttft(std::chrono::duration<double>(first_token_ - start_).count());
  }
  tokens_ += n;
}

void ChoiceTimer::on_finish(const char* reason) {
  const auto now = Clock::now();
  metrics_->count_finished(reason);
  metrics_->observe_e2e(std::chrono::duration<double>(now - start_).count());
  if (tokens_ > 1)
    metrics_->observe_time_per_output_token(
        std::chrono::duration<double>(now - first_token_).count() / double(tokens_ - 1));
}

std::string make_completion_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<int32_t> render_chat_prompt(const ServedModel& model, const ChatRequest& chat,
                                        std::string* text_out) {
  if (!model.render_chat)
    throw ApiError(400, "invalid_request_error", "messages", "no_chat_template",
                   fmt::format("model '{}' has no chat template, so it cannot take 'messages'; "
                               "send a raw prompt to /v1/completions instead",
                               model.id));
  const Tokenizer& tok = model.engine->tokenizer();
  ojson context = {{"messages", chat.messages}, {"add_generation_prompt", true}};
  if (chat.tools_active()) context["tools"] = chat.tools;
  context["bos_token"] = tok.bos_id() >= 0 ? tok.token_text(tok.bos_id()) : "";
  std::vector<int32_t> eos = tok.eos_ids();
  context["eos_token"] = eos.empty() ? "" : tok.token_text(eos.front());
  // The server's own strings; a chat_template_kwargs entry that replaces one is the client's.
  std::vector<std::string> own;
  for (const char* key : {"bos_token", "eos_token"})
    if (!chat.template_kwargs.contains(key)) own.emplace_back(key);
  for (const auto& [key, value] : chat.template_kwargs.items()) context[key] = value;
  RenderedPrompt rendered;
  try {
    rendered = model.render_chat(context, own);
  } catch (const Error& e) {
    // The template refused the conversation (raise_exception, e.g. roles must alternate).
    throw ApiError(400, "invalid_request_error", "messages", "chat_template_error", e.what());
  }
  // Control tokens come only from the template's own text: the client's bytes (message content,
  // tool calls and results, names, tools) are plain text, whatever they spell (SERVING.md,
  // "Special tokens"). The template text already holds BOS.
  std::vector<int32_t> ids =
      tok.encode(rendered.text,
                 {.add_special = false, .parse_special = true, .plain_ranges = rendered.client});
  if (text_out) *text_out = std::move(rendered.text);
  return ids;
}

void render_chat_job(const ServedModel& model, const ChatRequest& chat, GenerationJob& job) {
  if (chat.max_thinking_tokens >= 0 && !model.reasoning.enabled())
    unsupported_field(chat.thinking_param,
                      "model '{}' has no thinking format in its chat template, so it cannot "
                      "think to a budget",
                      model.id);
  std::string text;
  if (job.grammar && model.reasoning.enabled() &&
      !chat.template_kwargs.contains("enable_thinking")) {
    ChatRequest quiet = chat;
    quiet.template_kwargs["enable_thinking"] = false;
    job.prompts.push_back(render_chat_prompt(model, quiet, &text));
  } else {
    job.prompts.push_back(render_chat_prompt(model, chat, &text));
  }
  // A template that closed an empty span (enable_thinking off) asked for no thinking: the reply
  // is all answer, even if it writes the tags.
  if (!prompt_closes_reasoning(model.reasoning, text)) job.reasoning = model.reasoning;
  job.prompt_in_reasoning = prompt_opens_reasoning(model.reasoning, text);
  job.max_thinking_tokens = chat.max_thinking_tokens;
}

void fit_to_context(const ServedModel& model, GenerationJob& job, const char* max_tokens_param) {
  const int64_t ctx = model.engine->model_info().context_length;
  const int32_t n_vocab = model.engine->tokenizer().n_vocab();
  for (const auto& [id, bias] : job.gen.sampling.logit_bias)
    if (id < 0 || id >= n_vocab)
      bad_request("logit_bias", "'logit_bias' token id {} is outside the vocabulary (0..{})", id,
                  n_vocab - 1);
  int64_t longest = 0;
  for (const auto& p : job.prompts) {
    for (int32_t id : p)
      if (id < 0 || id >= n_vocab)
        bad_request("prompt", "token id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  if (longest >= ctx)
    throw ApiError(400, "invalid_request_error", "messages", "context_length_exceeded",
                   fmt::format("This model's maximum context length is {} tokens, but the prompt "
                               "has {} tokens",
                               ctx, longest));
  if (!job.gen.max_tokens_given) {
    // OpenAI's defaults: chat fills the context, legacy completions generate 16 tokens.
    int64_t room = ctx - longest;
    job.gen.stop.max_tokens = static_cast<int32_t>(job.chat ? room : std::min<int64_t>(16, room));
  } else if (longest + job.gen.stop.max_tokens > ctx) {
    throw ApiError(
        400, "invalid_request_error", max_tokens_param, "context_length_exceeded",
        fmt::format("This model's maximum context length is {} tokens. However, you "
                    "requested {} tokens ({} in the prompt, {} for the completion)",
                    ctx, longest + job.gen.stop.max_tokens, longest, job.gen.stop.max_tokens));
  }
}

void run_generation(App& app, ServedModel& model, const GenerationJob& job, HttpExchange& ex,
                    ResponseWriter& writer) {
  Loop(app, model, job, ex, writer).run();
}

bool run_to_results(App& app, ServedModel& model, std::vector<Request> requests, HttpExchange& ex,
                    const char* code, const char* what,
                    const std::function<bool(int, StreamEvent&)>& take) {
  Generation gen(*model.engine);
  gen.submit(std::move(requests));
  std::string error;
  while (std::optional<ChoiceEvent> e =
             gen.next([&] { return app.aborting() || ex.client_gone(); })) {
    if (e->event.finish == FinishReason::none) continue;
    const bool taken = e->event.finish == FinishReason::stop && take(e->choice, e->event);
    if (!taken && error.empty()) {
      error = !e->event.error.empty()                 ? e->event.error
              : e->event.finish == FinishReason::stop ? "malformed result"
                                                      : "cancelled";
      gen.cancel_all();
    }
  }
  if (!error.empty())
    throw ApiError(500, "server_error", "", code, fmt::format("{} failed: {}", what, error));
  return !gen.cancelled();
}

}  // namespace memra::server
