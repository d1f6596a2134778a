// Unicode NFC normalization for tokenizers whose tokenizer.json asks for it (Qwen2/3). Backed by
// ICU when memra is built with it; otherwise nfc_available() is false and loaders refuse NFC.
#pragma once

#include <string>
#include <string_view>

namespace memra::text {

bool nfc_available();
// NFC of valid UTF-8 text (ASCII returns unchanged without a copy into ICU).
std::string nfc(std::string_view utf8);

}  // namespace memra::text
