// Thinking spans in generated text, for models whose chat template shows one: Qwen3 / QwQ /
// DeepSeek-R1 style <think>...</think>, Gemma 4's <|channel>thought ... <channel|>. The span
// comes first in a reply (or the template opens it in the generation prompt); ReasoningSplitter
// separates it from the answer as text streams in, holding back what may be a partial tag.
#pragma once

#include <string>
#include <string_view>

namespace memra::server {

struct ReasoningFormat {
  std::string open;  // empty: the model has no thinking format
  std::string close;
  bool enabled() const { return !open.empty(); }
};

// From a chat template's source text.
ReasoningFormat reasoning_format_of(std::string_view chat_template_source);

// Does the rendered prompt leave the model inside an open span (the template wrote the open tag
// last, as Qwen3.5 and DeepSeek-R1 templates do)?
bool prompt_opens_reasoning(const ReasoningFormat& format, std::string_view prompt_text);
// Does it end with a closed span (the template turned thinking off: Qwen3's enable_thinking)?
bool prompt_closes_reasoning(const ReasoningFormat& format, std::string_view prompt_text);

struct ReasoningSplit {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  ReasoningSplitter() = default;
  ReasoningSplitter(ReasoningFormat format, bool starts_inside);

  ReasoningSplit push(std::string_view text);
  ReasoningSplit finish();  // releases what is held back (a cut-off span stays reasoning)
  // Ends the span as if the close tag had been generated (a thinking budget ran out).
  ReasoningSplit force_close();
  bool in_reasoning() const { return state_ == State::reasoning; }
  const ReasoningFormat& format() const { return format_; }

 private:
  enum class State { start, reasoning, after_close, content };
  ReasoningSplit drain(bool at_end);

  ReasoningFormat format_;
  State state_ = State::content;
  std::string held_;           // undecided text
  bool span_started_ = false;  // non-space reasoning text already released
};

}  // namespace memra::server
