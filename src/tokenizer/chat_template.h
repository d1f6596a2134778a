// Jinja chat templates as Hugging Face `apply_chat_template` renders them. The template is
// untrusted: parsing and rendering are bounded (steps, output bytes, recursion depth) and any
// error reports the template line, never a crash.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace memra {

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra
