// The fake engine and tokenizer behind the server tests; see fake_engine.h.
#include "fake_engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace memra::server::testing {

namespace {

// ids 0..255 are bytes; then the control tokens below.
const char* const kSpecial[] = {"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"};
constexpr int32_t kBos = 256, kEos = 257, kVocab = 260;

class FakeTokenizer : public Tokenizer {
 public:
  void to_gguf(gguf::Metadata&) const override {}
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override {
    std::vector<int32_t> ids;
    if (o.add_special) ids.push_back(kBos);
    for (size_t i = 0; i < text.size();) {
      bool matched = false;
      for (int32_t s = 0; o.parse_special && s < 4 && !matched; ++s) {
        std::string_view sp = kSpecial[s];
        if (text.substr(i, sp.size()) == sp) {
          ids.push_back(256 + s);
          i += sp.size();
          matched = true;
        }
      }
      if (!matched) ids.push_back(static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids)
      if (!(skip_special && is_special(id))) out += token_bytes(id);
    return out;
  }
  std::string token_bytes(int32_t id) const override {
    if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
    if (id >= 256 && id < kVocab) return kSpecial[id - 256];
    return "";
  }
  const std::string& token_text(int32_t id) const override {
    static const std::vector<std::string> texts = [] {
      std::vector<std::string> t;
      for (int i = 0; i < 256; ++i) t.push_back(std::string(1, static_cast<char>(i)));
      for (const char* s : kSpecial) t.push_back(s);
      return t;
    }();
    static const std::string empty;
    return id >= 0 && id < kVocab ? texts[id] : empty;
  }
  int32_t n_vocab() const override { return kVocab; }
  int32_t bos_id() const override { return kBos; }
  std::vector<int32_t> eos_ids() const override { return {kEos}; }
  bool is_special(int32_t id) const override { return id >= 256; }
  std::string chat_template() const override { return ""; }
};

struct Sequence {
  RequestId id = 0;
  Request request;
  std::string reply;    // the scripted output
  size_t produced = 0;  // tokens generated
  std::string pending;  // text held back while a stop string may form
  bool cancelled = false;
};

std::string scripted_reply(const std::string& prompt, const SamplingParams& s) {
  size_t turn = prompt.rfind("<start_of_turn>", prompt.rfind("<start_of_turn>model") - 1);
  std::string last = turn == std::string::npos ? prompt : prompt.substr(turn);
  if (last.rfind("<start_of_turn>tool\n", 0) == 0) {
    std::string content = last.substr(20, last.find("<end_of_turn>") - 20);
    return "The tool said: " + content;
  }
  if (last.find("THINK:") != std::string::npos) {
    // A thinking model's reply; the span is already open or closed when the template wrote it.
    const std::string answer = "The answer is 42.";
    const std::string thought = "Let me think step by step about it.\n</think>\n\n" + answer;
    if (prompt.ends_with("</think>\n\n")) return answer;
    return prompt.ends_with("<think>\n") ? thought : "<think>\n" + thought;
  }
  if (last.find("TOOL:") != std::string::npos)
    return "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
           "\"Paris\"}}</tool_call>";
  if (s.temperature == 0) return "Hello! I am a fake model. The capital of France is Paris.";
  uint64_t seed = s.seed ? *s.seed : std::random_device{}();
  return "Sampled reply number " + std::to_string(seed % 100000) + ". The end.";
}

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(const FakeEngineOptions& o) : options_(o) {
    info_ = {"fake-model", "fake", o.context_length, kVocab, 1 << 20, 1 << 20};
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // test_server_lifecycle.py checks this comes after every request line (no handler may still
    // hold the engine when it goes).
    MEMRA_LOG_INFO("fake engine: stopped");
  }

  RequestId submit(Request r) override {
    if (r.kind != RequestKind::generate)
      fail(ErrorCode::unsupported, "the fake engine only generates (no embeddings or scores)");
    int64_t total = static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens;
    if (total > options_.context_length)
      fail(ErrorCode::invalid_argument,
           "prompt of {} tokens + max_tokens {} exceeds the context of {}", r.prompt.size(),
           r.stop.max_tokens, options_.context_length);
    std::lock_guard lock(mutex_);
    if (static_cast<int32_t>(queue_.size()) >= options_.max_queued)
      fail(ErrorCode::resource_exhausted, "the request queue is full ({} waiting)", queue_.size());
    Sequence s;
    s.id = ++next_id_;
    s.reply = scripted_reply(tokenizer_.decode(r.prompt, false), r.sampling);
    s.request = std::move(r);
    queue_.push_back(std::move(s));
    cv_.notify_all();
    return next_id_;
  }

  void cancel(RequestId id) override {
    std::lock_guard lock(mutex_);
    cancelled_.push_back(id);
  }

  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const ChatTemplate* chat_template() const override { return nullptr; }
  const EngineModelInfo& model_info() const override { return info_; }
  EngineStats stats() const override {
    std::lock_guard lock(mutex_);
    EngineStats s = stats_;
    s.queued = static_cast<int32_t>(queue_.size());
    s.running = static_cast<int32_t>(running_.size());
    s.kv_blocks_total = options_.max_sequences * (options_.context_length / 16);
    s.kv_blocks_used = 0;
    for (const Sequence& q : running_)
      s.kv_blocks_used += static_cast<int32_t>((q.request.prompt.size() + q.produced + 15) / 16);
    return s;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      // step_ms 0: run steps back to back while there is work, sleep when idle.
      bool busy = !queue_.empty() || !running_.empty();
      if (options_.step_ms > 0 || !busy)
        cv_.wait_for(lock, std::chrono::milliseconds(std::max(options_.step_ms, 1)));
      step();
    }
    for (Sequence& s : running_) finish(s, FinishReason::cancelled, "");
    for (Sequence& s : queue_) finish(s, FinishReason::cancelled, "");
  }

  void finish(Sequence& s, FinishReason reason, const std::string& matched) {
    StreamEvent e;
    e.finish = reason;
    e.matched_stop = matched;
    if (reason != FinishReason::cancelled) e.text = s.pending;
    e.usage = {static_cast<int32_t>(s.request.prompt.size()), static_cast<int32_t>(s.produced), 0};
    s.request.sink(e);
  }

  // One step: admit, cancel, then one token for every running sequence.
  void step() {
    ++stats_.steps_total;
    while (!queue_.empty() && static_cast<int32_t>(running_.size()) < options_.max_sequences) {
      stats_.prompt_tokens_total += queue_.front().request.prompt.size();
      running_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    for (RequestId id : cancelled_) {
      for (auto* list : {&running_, &queue_})
        for (Sequence& s : *list)
          if (s.id == id) s.cancelled = true;
    }
    cancelled_.clear();
    for (auto* list : {&queue_, &running_}) {
      for (auto it = list->begin(); it != list->end();) {
        if (it->cancelled) {
          finish(*it, FinishReason::cancelled, "");
          it = list->erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto it = running_.begin(); it != running_.end();) {
      it = advance(*it) ? running_.erase(it) : std::next(it);
    }
  }

  // Generates one token; true when the sequence finished.
  bool advance(Sequence& s) {
    const bool eos = s.produced >= s.reply.size();
    int32_t id = eos ? kEos : static_cast<unsigned char>(s.reply[s.produced]);
    ++s.produced;
    ++stats_.generated_tokens_total;
    StreamEvent e;
    GeneratedToken t{id, -0.5f, {}};
    for (int32_t k = 0; k < s.request.sampling.top_logprobs; ++k)
      t.top.push_back({k == 0 ? id : 'a' + k, k == 0 ? -0.5f : -1.0f - k});
    e.tokens.push_back(t);
    e.usage = {static_cast<int32_t>(s.request.prompt.size()), static_cast<int32_t>(s.produced), 0};
    if (eos && !s.request.stop.ignore_eos) {
      e.text = s.pending;
      e.finish = FinishReason::stop;
      s.request.sink(e);
      return true;
    }
    if (!eos) s.pending += static_cast<char>(id);
    for (const std::string& stop : s.request.stop.stop_strings) {
      size_t at = s.pending.find(stop);
      if (at != std::string::npos) {
        e.text = s.pending.substr(0, at);
        e.finish = FinishReason::stop;
        e.matched_stop = stop;
        s.request.sink(e);
        return true;
      }
    }
    // Release what cannot be the start of a stop string.
    size_t keep = 0;
    for (const std::string& stop : s.request.stop.stop_strings)
      for (size_t k = std::min(stop.size() - 1, s.pending.size()); k > keep; --k)
        if (s.pending.compare(s.pending.size() - k, k, stop, 0, k) == 0) keep = k;
    e.text = s.pending.substr(0, s.pending.size() - keep);
    s.pending.erase(0, s.pending.size() - keep);
    if (static_cast<int32_t>(s.produced) >= s.request.stop.max_tokens) {
      e.text += s.pending;
      e.finish = FinishReason::length;
    }
    s.request.sink(e);
    return e.finish != FinishReason::none;
  }

  FakeEngineOptions options_;
  EngineModelInfo info_;
  FakeTokenizer tokenizer_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Sequence> queue_;
  std::deque<Sequence> running_;
  std::vector<RequestId> cancelled_;
  EngineStats stats_;
  RequestId next_id_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// Marks the client's strings as ChatTemplate::render_marked does (roles, content, tool calls,
// tools), so the server's chat path can be tested for injected special tokens.
RenderedPrompt render_fake_chat(const ojson& context, const std::vector<std::string>&) {
  RenderedPrompt out;
  auto write = [&](const std::string& text) { out.text += text; };
  auto client = [&](const std::string& text) {
    if (!text.empty()) out.client.push_back({out.text.size(), out.text.size() + text.size()});
    out.text += text;
  };
  write("<bos>");
  if (context.contains("tools")) {
    write("<start_of_turn>tools\n");
    client(context["tools"].dump());
    write("<end_of_turn>\n");
  }
  for (const ojson& m : context["messages"]) {
    write("<start_of_turn>");
    client(m["role"].get<std::string>());
    write("\n");
    if (m["content"].is_string()) client(m["content"].get<std::string>());
    if (m.contains("tool_calls")) client(m["tool_calls"].dump());
    write("<end_of_turn>\n");
  }
  write("<start_of_turn>model\n");
  // Qwen3-style: enable_thinking false writes an empty span, true opens one.
  if (context.contains("enable_thinking"))
    write(context["enable_thinking"] == false ? "<think>\n\n</think>\n\n" : "<think>\n");
  return out;
}

}  // namespace

std::unique_ptr<Engine> make_fake_engine(const FakeEngineOptions& options) {
  return std::make_unique<FakeEngine>(options);
}

ServedModel make_fake_model(const FakeEngineOptions& options, const std::string& id) {
  ServedModel m;
  m.id = id;
  m.engine = make_fake_engine(options);
  m.render_chat = render_fake_chat;
  m.tool_format = ToolCallFormat::hermes;  // its tool replies are <tool_call> blocks
  if (options.thinking) m.reasoning = {"<think>", "</think>"};
  return m;
}

}  // namespace memra::server::testing
