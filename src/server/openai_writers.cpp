// OpenAI's response shapes for the shared generation loop: chat.completion[.chunk] and
// text_completion (streamed as SSE `data:` chunks ending with [DONE], or one body), usage,
// logprobs in the chat and legacy shapes, tool calls.
#include "server/writers.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

using json = nlohmann::json;

json token_bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(int(c));
  return out;
}

// Chat-shaped logprob items for `tokens`.
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

// The legacy completions shape; `text_bytes` is the offset of the first token's text and advances.
json legacy_logprobs(const Tokenizer& tok, const std::vector<GeneratedToken>& tokens,
                     size_t& text_bytes) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const GeneratedToken& t : tokens) {
    std::string piece = tok.token_bytes(t.id);
    out["tokens"].push_back(piece);
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : t.top) top[tok.token_bytes(alt.id)] = alt.logprob;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_bytes);
    text_bytes += piece.size();
  }
  return out;
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

// What chat and text completions share: the envelope, usage, the SSE chunk framing.
class OpenAIWriter : public ResponseWriter {
 public:
  OpenAIWriter(const App& app, const ServedModel& model, const GenerationJob& job, HttpExchange& ex,
               const char* object, const char* chunk_object)
      : app_(app),
        model_(model),
        job_(job),
        ex_(ex),
        tok_(model.engine->tokenizer()),
        object_(object),
        chunk_object_(chunk_object) {}

  void stream_error(const ChoiceState& c) override {
    emit({{"error",
           {{"message", c.error},
            {"type", "server_error"},
            {"param", nullptr},
            {"code", "generation_error"}}}});
  }

  void stream_end(const std::vector<ChoiceState>& states) override {
    if (job_.gen.include_usage) {
      json chunk = envelope(chunk_object_);
      chunk["choices"] = json::array();
      chunk["usage"] = usage_json(states);
      emit(chunk);
    }
    ex_.stream_write("data: [DONE]\n\n");
  }

  void respond(const std::vector<ChoiceState>& states) override {
    json choices = json::array();
    for (size_t i = 0; i < states.size(); ++i) {
      json choice = {{"index", i}, {"finish_reason", finish_name(states[i])}};
      fill_choice(states[i], choice);
      choices.push_back(choice);
    }
    json body = envelope(object_);
    body["choices"] = choices;
    body["usage"] = usage_json(states);
    send_json(ex_, 200, body);
  }

 protected:
  virtual void fill_choice(const ChoiceState& c, json& choice) const = 0;

  json usage_json(const std::vector<ChoiceState>& states) const {
    int32_t prompt = 0, completion = 0, cached = 0;
    size_t n = static_cast<size_t>(job_.gen.n);
    for (size_t c = 0; c < states.size(); ++c) {
      completion += states[c].usage.completion_tokens;
      if (c % n == 0) {  // the prompt is counted once per prompt, not per choice
        prompt += static_cast<int32_t>(job_.prompts[c / n].size());
        cached += states[c].usage.cached_tokens;
      }
    }
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  virtual json envelope(const char* object) const {
    return {{"id", job_.id}, {"object", object}, {"created", job_.created}, {"model", model_.id}};
  }

  bool emit(json chunk) {
    if (job_.gen.include_usage && !chunk.contains("usage")) chunk["usage"] = nullptr;
    return ex_.stream_write("data: " + json_dump(chunk) + "\n\n");
  }

  // One chunk holding one choice.
  bool emit_choice(json choice) {
    json chunk = envelope(chunk_object_);
    chunk["choices"] = {std::move(choice)};
    return emit(std::move(chunk));
  }

  const App& app_;
  const ServedModel& model_;
  const GenerationJob& job_;
  HttpExchange& ex_;
  const Tokenizer& tok_;
  const char* object_;
  const char* chunk_object_;
};

class ChatWriter : public OpenAIWriter {
 public:
  ChatWriter(const App& app, const ServedModel& model, const GenerationJob& job, HttpExchange& ex)
      : OpenAIWriter(app, model, job, ex, "chat.completion", "chat.completion.chunk") {}

  bool stream_start() override {
    for (size_t c = 0; c < job_.prompts.size() * static_cast<size_t>(job_.gen.n); ++c)
      if (!emit_choice(
              chunk_choice(int(c), nullptr, nullptr, {{"role", "assistant"}, {"content", ""}})))
        return false;
    return true;
  }

  bool stream_delta(int choice, const ChoiceState&, const ChoiceDelta& d) override {
    json logprobs = nullptr;
    if (job_.gen.logprobs && !d.tokens->empty())
      logprobs = {{"content", chat_logprobs(tok_, *d.tokens)}};
    if (d.content.empty() && d.reasoning.empty() && logprobs.is_null()) return true;
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    return emit_choice(chunk_choice(choice, logprobs, nullptr, delta));
  }

  bool stream_finish(int choice, const ChoiceState& c) override {
    if (!c.calls.empty() &&
        !emit_choice(chunk_choice(choice, nullptr, nullptr,
                                  {{"tool_calls", tool_calls_json(c.calls, true)}})))
      return false;
    return emit_choice(chunk_choice(choice, nullptr, finish_name(c), json::object()));
  }

 private:
  static json chunk_choice(int index, json logprobs, const char* finish, json delta) {
    return {{"index", index},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", finish ? json(finish) : json()},
            {"delta", std::move(delta)}};
  }

  json envelope(const char* object) const override {
    json j = OpenAIWriter::envelope(object);
    j["system_fingerprint"] = app_.config().fingerprint;
    return j;
  }

  void fill_choice(const ChoiceState& c, json& choice) const override {
    json message = {{"role", "assistant"},
                    {"content", c.text.empty() && !c.calls.empty() ? json() : json(c.text)},
                    {"refusal", nullptr}};
    if (!c.calls.empty()) message["tool_calls"] = tool_calls_json(c.calls, false);
    if (!c.reasoning.empty())
      message["reasoning_content"] = c.reasoning;  // DeepSeek's / vLLM's name
    choice["message"] = message;
    choice["logprobs"] =
        job_.gen.logprobs ? json{{"content", chat_logprobs(tok_, c.tokens)}} : json();
  }
};

class CompletionWriter : public OpenAIWriter {
 public:
  CompletionWriter(const App& app, const ServedModel& model, const GenerationJob& job,
                   HttpExchange& ex)
      : OpenAIWriter(app, model, job, ex, "text_completion", "text_completion"),
        text_bytes_(job.prompts.size() * static_cast<size_t>(job.gen.n), 0) {}

  bool stream_start() override { return true; }

  bool stream_delta(int choice, const ChoiceState&, const ChoiceDelta& d) override {
    json logprobs = nullptr;
    if (job_.gen.logprobs && !d.tokens->empty())
      logprobs = legacy_logprobs(tok_, *d.tokens, text_bytes_[choice]);
    if (d.content.empty() && logprobs.is_null()) return true;
    return emit_choice(chunk_choice(choice, d.content, logprobs, nullptr));
  }

  bool stream_finish(int choice, const ChoiceState& c) override {
    return emit_choice(chunk_choice(choice, "", nullptr, finish_name(c)));
  }

 private:
  static json chunk_choice(int index, const std::string& text, json logprobs, const char* finish) {
    return {{"index", index},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", finish ? json(finish) : json()},
            {"text", text}};
  }

  void fill_choice(const ChoiceState& c, json& choice) const override {
    choice["text"] = c.text;
    size_t offset = 0;
    choice["logprobs"] = job_.gen.logprobs ? legacy_logprobs(tok_, c.tokens, offset) : json();
  }

  std::vector<size_t> text_bytes_;  // per choice: bytes of token text streamed so far
};

}  // namespace

std::unique_ptr<ResponseWriter> make_chat_writer(const App& app, const ServedModel& model,
                                                 const GenerationJob& job, HttpExchange& ex) {
  return std::make_unique<ChatWriter>(app, model, job, ex);
}

std::unique_ptr<ResponseWriter> make_completion_writer(const App& app, const ServedModel& model,
                                                       const GenerationJob& job, HttpExchange& ex) {
  return std::make_unique<CompletionWriter>(app, model, job, ex);
}

}  // namespace memra::server
