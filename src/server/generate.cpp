// Shared generation flow: engine fan-out, SSE chunks and collected responses in OpenAI's shapes
// (chat.completion[.chunk] and text_completion), usage, logprobs and tool-call extraction.
#include "server/generate.h"

#include <chrono>
#include <optional>
#include <random>

#include "server/generation.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ChoiceState {
  std::string text;  // content so far (chat: outside tool calls)
  ToolCallStreamer tool_streamer;
  std::vector<ParsedToolCall> calls;
  FinishReason finish = FinishReason::none;
  std::string error;
  Usage usage;
  json logprobs_content = json::array();  // chat shape
  json legacy_logprobs = {{"tokens", json::array()},
                          {"token_logprobs", json::array()},
                          {"top_logprobs", json::array()},
                          {"text_offset", json::array()}};
  size_t text_bytes = 0;  // for legacy text_offset
  std::optional<ChoiceTimer> timer;
};

json token_bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(int(c));
  return out;
}

// Chat-shaped logprob items for the tokens of one event.
json chat_logprobs(const Tokenizer& tok, const std::vector<GeneratedToken>& tokens) {
  json items = json::array();
  for (const GeneratedToken& t : tokens) {
    std::string piece = tok.token_bytes(t.id);
    json top = json::array();
    for (const TokenLogprob& alt : t.top) {
      std::string alt_piece = tok.token_bytes(alt.id);
      top.push_back(
          {{"token", alt_piece}, {"logprob", alt.logprob}, {"bytes", token_bytes_json(alt_piece)}});
    }
    items.push_back({{"token", piece},
                     {"logprob", t.logprob},
                     {"bytes", token_bytes_json(piece)},
                     {"top_logprobs", top}});
  }
  return items;
}

void legacy_logprobs(const Tokenizer& tok, const std::vector<GeneratedToken>& tokens,
                     ChoiceState& c, json& out) {
  for (const GeneratedToken& t : tokens) {
    std::string piece = tok.token_bytes(t.id);
    out["tokens"].push_back(piece);
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : t.top) top[tok.token_bytes(alt.id)] = alt.logprob;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(c.text_bytes);
    c.text_bytes += piece.size();
  }
}

const char* finish_name(const ChoiceState& c) {
  return openai_finish_reason(c.finish, !c.calls.empty());
}

// Each call gets its own random id (unique across choices), as OpenAI's are.
json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool delta) {
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json call = {{"id", make_completion_id("call_")},
                 {"type", "function"},
                 {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
    if (delta) call["index"] = k;
    out.push_back(call);
  }
  return out;
}

class Runner {
 public:
  Runner(App& app, ServedModel& model, GenerationJob& job, HttpExchange& ex)
      : app_(app), model_(model), job_(job), ex_(ex), tok_(model.engine->tokenizer()) {}

  void run() {
    std::vector<Request> requests = engine_requests(job_);
    states_.resize(requests.size());
    start_ = Clock::now();
    for (ChoiceState& c : states_) c.timer.emplace(app_.metrics(), start_);
    Generation gen(*model_.engine);
    gen.submit(std::move(requests));  // Error(invalid_argument / resource_exhausted) -> 400 / 429
    if (job_.gen.stream)
      stream(gen);
    else
      collect(gen);
  }

 private:
  bool gone() { return app_.aborting() || ex_.client_gone(); }

  // Applies one event to its choice; returns the content delta to show.
  std::string apply(ChoiceEvent& e, json* logprobs_out) {
    ChoiceState& c = states_[e.choice];
    const StreamEvent& ev = e.event;
    c.timer->on_tokens(ev.tokens.size());
    c.usage = ev.usage;
    if (job_.gen.logprobs && !ev.tokens.empty()) {
      if (job_.chat) {
        json items = chat_logprobs(tok_, ev.tokens);
        for (const json& it : items) c.logprobs_content.push_back(it);
        if (logprobs_out) *logprobs_out = {{"content", items}};
      } else {
        json part = {{"tokens", json::array()},
                     {"token_logprobs", json::array()},
                     {"top_logprobs", json::array()},
                     {"text_offset", json::array()}};
        legacy_logprobs(tok_, ev.tokens, c, part);
        for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& x : part[k]) c.legacy_logprobs[k].push_back(x);
        if (logprobs_out) *logprobs_out = part;
      }
    }
    std::string delta = job_.tools_active ? c.tool_streamer.push(ev.text) : ev.text;
    if (ev.finish != FinishReason::none) {
      c.finish = ev.finish;
      c.error = ev.error;
      if (job_.tools_active) {
        ToolCallParse rest = c.tool_streamer.finish();
        delta += rest.content;
        c.calls = std::move(rest.calls);
      }
      c.timer->on_finish(finish_name(c));
    }
    c.text += delta;
    return delta;
  }

  void count_abandoned() {
    for (const ChoiceState& c : states_)
      if (c.finish == FinishReason::none) app_.metrics().count_finished("cancelled");
  }

  json usage_json() const {
    int32_t prompt = 0, completion = 0, cached = 0;
    size_t n = static_cast<size_t>(job_.gen.n);
    for (size_t c = 0; c < states_.size(); ++c) {
      completion += states_[c].usage.completion_tokens;
      if (c % n == 0) {  // the prompt is counted once per prompt, not per choice
        prompt += static_cast<int32_t>(job_.prompts[c / n].size());
        cached += states_[c].usage.cached_tokens;
      }
    }
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  json envelope(const char* object) const {
    json j = {{"id", job_.id}, {"object", object}, {"created", job_.created}, {"model", model_.id}};
    if (job_.chat) j["system_fingerprint"] = app_.config().fingerprint;
    return j;
  }

  bool emit(json chunk) {
    if (job_.gen.include_usage && !chunk.contains("usage")) chunk["usage"] = nullptr;
    return ex_.stream_write("data: " + json_dump(chunk) + "\n\n");
  }

  json chunk_choice(int index, const std::string& text, json logprobs, const char* finish,
                    json delta_extra = json::object()) {
    json choice = {{"index", index},
                   {"logprobs", logprobs},
                   {"finish_reason", finish ? json(finish) : json()}};
    if (job_.chat) {
      json delta = delta_extra;
      if (!text.empty()) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
    }
    return choice;
  }

  void abandon(Generation& gen) {
    gen.cancel_all();
    count_abandoned();
  }

  void stream(Generation& gen) {
    const char* object = job_.chat ? "chat.completion.chunk" : "text_completion";
    if (!ex_.stream_begin(200, "text/event-stream")) return abandon(gen);
    if (job_.chat) {
      for (size_t c = 0; c < states_.size(); ++c) {
        json chunk = envelope(object);
        chunk["choices"] = {
            chunk_choice(int(c), "", nullptr, nullptr, {{"role", "assistant"}, {"content", ""}})};
        if (!emit(chunk)) return abandon(gen);
      }
    }
    while (auto e = gen.next([&] { return gone(); })) {
      if (e->choice < 0 || e->choice >= static_cast<int>(states_.size())) continue;
      json logprobs = nullptr;
      std::string delta = apply(*e, &logprobs);
      ChoiceState& c = states_[e->choice];
      if (c.finish == FinishReason::error) {
        emit({{"error",
               {{"message", c.error},
                {"type", "server_error"},
                {"param", nullptr},
                {"code", "generation_error"}}}});
        gen.cancel_all();
        break;
      }
      bool done = c.finish != FinishReason::none;
      if (!delta.empty() || !logprobs.is_null()) {
        json chunk = envelope(object);
        chunk["choices"] = {chunk_choice(e->choice, delta, logprobs, nullptr)};
        if (!emit(chunk)) return abandon(gen);
      }
      if (done && !c.calls.empty()) {
        json chunk = envelope(object);
        chunk["choices"] = {chunk_choice(e->choice, "", nullptr, nullptr,
                                         {{"tool_calls", tool_calls_json(c.calls, true)}})};
        if (!emit(chunk)) return abandon(gen);
      }
      if (done) {
        json chunk = envelope(object);
        chunk["choices"] = {chunk_choice(e->choice, "", nullptr, finish_name(c))};
        if (!emit(chunk)) return abandon(gen);
      }
    }
    if (gen.cancelled() && gone()) return count_abandoned();  // nobody left to deliver to
    if (job_.gen.include_usage) {
      json chunk = envelope(object);
      chunk["choices"] = json::array();
      chunk["usage"] = usage_json();
      emit(chunk);
    }
    ex_.stream_write("data: [DONE]\n\n");
    ex_.stream_end();
  }

  void collect(Generation& gen) {
    while (auto e = gen.next([&] { return gone(); })) {
      if (e->choice >= 0 && e->choice < static_cast<int>(states_.size())) apply(*e, nullptr);
    }
    if (gen.cancelled()) {
      count_abandoned();
      // The client left (or a forced shutdown): nobody reads this, it only marks the request.
      ex_.send(499, "application/json", "{}");
      return;
    }
    json choices = json::array();
    for (size_t i = 0; i < states_.size(); ++i) {
      const ChoiceState& c = states_[i];
      if (c.finish == FinishReason::error)
        throw ApiError(500, "server_error", "", "generation_error", c.error);
      json choice = {{"index", i}, {"finish_reason", finish_name(c)}};
      if (job_.chat) {
        json message = {{"role", "assistant"},
                        {"content", c.text.empty() && !c.calls.empty() ? json() : json(c.text)},
                        {"refusal", nullptr}};
        if (!c.calls.empty()) message["tool_calls"] = tool_calls_json(c.calls, false);
        choice["message"] = message;
        choice["logprobs"] = job_.gen.logprobs ? json{{"content", c.logprobs_content}} : json();
      } else {
        choice["text"] = c.text;
        choice["logprobs"] = job_.gen.logprobs ? c.legacy_logprobs : json();
      }
      choices.push_back(choice);
    }
    json body = envelope(job_.chat ? "chat.completion" : "text_completion");
    body["choices"] = choices;
    body["usage"] = usage_json();
    send_json(ex_, 200, body);
  }

  App& app_;
  ServedModel& model_;
  GenerationJob& job_;
  HttpExchange& ex_;
  const Tokenizer& tok_;
  std::vector<ChoiceState> states_;
  Clock::time_point start_;
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

std::vector<int32_t> render_chat_prompt(const ServedModel& model, const ChatRequest& chat) {
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
  std::string text;
  try {
    text = model.render_chat(context);
  } catch (const Error& e) {
    // The template refused the conversation (raise_exception, e.g. roles must alternate).
    throw ApiError(400, "invalid_request_error", "messages", "chat_template_error", e.what());
  }
  // Control tokens in the rendered template are real; the template text already holds BOS.
  return tok.encode(text, {.add_special = false, .parse_special = true});
}

void fit_to_context(const ServedModel& model, GenerationJob& job) {
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
  const char* field = job.chat ? "max_tokens" : "max_tokens";
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
        400, "invalid_request_error", field, "context_length_exceeded",
        fmt::format("This model's maximum context length is {} tokens. However, you "
                    "requested {} tokens ({} in the prompt, {} for the completion)",
                    ctx, longest + job.gen.stop.max_tokens, longest, job.gen.stop.max_tokens));
  }
}

void run_generation(App& app, ServedModel& model, GenerationJob& job, HttpExchange& ex) {
  Runner(app, model, job, ex).run();
}

}  // namespace memra::server
