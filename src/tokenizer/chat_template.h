// Jinja chat templates as Hugging Face `apply_chat_template` renders them. The template is
// untrusted: parsing and rendering are bounded (steps, output bytes, recursion depth) and any
// error reports the template line, never a crash.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace memra {

// A rendered chat prompt and the byte ranges of it that are the client's text (sorted, disjoint):
// message content, names, roles, tool calls and results, tools, string kwargs, and anything a
// template made from them. Encode it with EncodeOptions::plain_ranges = client so that special
// tokens come only from the template's own markup (Tokenizer::encode says how ranges tokenize).
struct RenderedPrompt {
  std::string text;
  std::vector<TextRange> client;
};

struct TemplateLimits {
  size_t max_steps = 10'000'000;
  size_t max_output_bytes = 16u << 20;
  size_t max_depth = 64;
};

class ChatTemplate {
 public:
  // Throws Error(invalid_argument) "chat template line N: ..." on a syntax error.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with `context` as the template's variables, as transformers passes them: messages,
  // (ordered_json: Python dicts keep insertion order, and tojson output depends on it)
  // tools, add_generation_prompt, bos_token, eos_token and any extra kwargs (enable_thinking...).
  // Throws Error(invalid_argument) with the line for raise_exception and runtime errors, and
  // Error(resource_exhausted) when a limit is hit.
  std::string render(const nlohmann::ordered_json& context,
                     const TemplateLimits& limits = {}) const;
  // As render, tracking which output bytes came from the client: every string of `context` is
  // the client's except the top-level variables named in `own` (the server's: bos_token,
  // eos_token). Text the template writes itself (its literals) is not. A string a template
  // builds from client text keeps the client's bytes marked: concatenation, printing, slicing,
  // indexing, strip/trim and join keep byte-exact marks; any other operation (replace, upper,
  // tojson, format, ...) marks its whole result when an input was marked.
  RenderedPrompt render_marked(const nlohmann::ordered_json& context,
                               const std::vector<std::string>& own,
                               const TemplateLimits& limits = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra
