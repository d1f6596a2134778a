// Chat templates memra supplies for model files that carry none (the packaged Gemma 3 270M GGUF
// has no tokenizer.chat_template), chosen by architecture. The file's own template always wins;
// the fallback is logged at start-up and documented in docs/SERVING.md.
#pragma once

#include <string>

namespace memra::server {

// The Jinja source for `architecture`, or empty when memra has none for it.
std::string builtin_chat_template(const std::string& architecture);

}  // namespace memra::server
