// Thinking-span detection and splitting; see reasoning.h.
#include "server/reasoning.h"

#include <algorithm>

namespace memra::server {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, text.size()); k > 0; --k)
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace

ReasoningFormat reasoning_format_of(std::string_view source) {
  if (source.find("<|channel>") != std::string_view::npos &&
      source.find("<channel|>") != std::string_view::npos)
    return {"<|channel>thought", "<channel|>"};  // Gemma 4
  if (source.find("<think>") != std::string_view::npos &&
      source.find("</think>") != std::string_view::npos)
    return {"<think>", "</think>"};
  return {};
}

bool prompt_opens_reasoning(const ReasoningFormat& format, std::string_view prompt_text) {
  return format.enabled() && trim_right(prompt_text).ends_with(format.open);
}

bool prompt_closes_reasoning(const ReasoningFormat& format, std::string_view prompt_text) {
  return format.enabled() && trim_right(prompt_text).ends_with(format.close);
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format, bool starts_inside)
    : format_(std::move(format)),
      state_(!format_.enabled() ? State::content
             : starts_inside    ? State::reasoning
                                : State::start) {}

ReasoningSplit ReasoningSplitter::push(std::string_view text) {
  held_ += text;
  return drain(false);
}

ReasoningSplit ReasoningSplitter::finish() {
  return drain(true);
}

ReasoningSplit ReasoningSplitter::force_close() {
  ReasoningSplit out;
  if (state_ != State::reasoning && state_ != State::start) return out;
  if (state_ == State::reasoning) {
    out.reasoning = std::string(trim_right(held_));
    if (!span_started_) out.reasoning.erase(0, out.reasoning.find_first_not_of(" \n\r\t"));
  }
  held_.clear();
  state_ = State::after_close;
  return out;
}

// Releases everything decided; `at_end` releases the rest too.
ReasoningSplit ReasoningSplitter::drain(bool at_end) {
  ReasoningSplit out;
  for (;;) {
    if (state_ == State::content) {
      out.content += held_;
      held_.clear();
      return out;
    }
    if (state_ == State::start) {  // a span opens only as the reply's first non-space text
      const size_t first = held_.find_first_not_of(" \n\r\t");
      if (first == std::string::npos) {
        if (at_end)
          state_ = State::content;
        else
          return out;
        continue;
      }
      std::string_view rest = std::string_view(held_).substr(first);
      if (rest.starts_with(format_.open)) {
        held_.erase(0, first + format_.open.size());
        state_ = State::reasoning;
      } else if (!at_end && format_.open.starts_with(rest)) {
        return out;  // may still become the open tag
      } else {
        state_ = State::content;
      }
      continue;
    }
    if (state_ == State::after_close) {  // the answer starts after the blank lines
      const size_t first = held_.find_first_not_of(" \n\r\t");
      held_.erase(0, first == std::string::npos ? held_.size() : first);
      if (held_.empty()) return out;
      state_ = State::content;
      continue;
    }
    // reasoning: up to the close tag; hold back trailing space and a partial tag.
    if (!span_started_) {
      held_.erase(0, std::min(held_.size(), held_.find_first_not_of(" \n\r\t")));
      if (held_.empty()) return out;
    }
    const size_t close = held_.find(format_.close);
    if (close != std::string::npos) {
      out.reasoning += trim_right(std::string_view(held_).substr(0, close));
      held_.erase(0, close + format_.close.size());
      state_ = State::after_close;
      continue;
    }
    size_t keep = at_end ? 0 : partial_tag_at_end(held_, format_.close);
    std::string_view ready = std::string_view(held_).substr(0, held_.size() - keep);
    if (!at_end) ready = trim_right(ready);
    out.reasoning += ready;
    span_started_ = span_started_ || !ready.empty();
    held_.erase(0, ready.size());
    return out;
  }
}

}  // namespace memra::server
