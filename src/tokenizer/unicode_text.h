// UTF-8 helpers the tokenizers share: validation and lossy repair of untrusted bytes (invalid
// sequences become U+FFFD exactly as Python's bytes.decode("utf-8", "replace") does), the GPT-2
// byte <-> printable-character map of byte-level BPE, and code point classification helpers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace memra::text {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are invalid or
// truncated (overlongs, surrogates and code points above U+10FFFF are invalid).
size_t utf8_valid_length(std::string_view s, size_t i);
bool utf8_is_valid(std::string_view s);
// Replaces each maximal invalid subpart with U+FFFD (the Unicode "best practice" Python follows).
std::string utf8_sanitize(std::string_view s);
// Bytes at the end of s that form an incomplete but so far valid UTF-8 sequence (0..3).
size_t utf8_incomplete_tail(std::string_view s);
// Decodes the code point at s[i] (s must be valid there); advances i.
uint32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100.. in byte order, so every byte string becomes printable text.
const std::array<uint32_t, 256>& byte_to_unicode();
// Inverse map as UTF-8 strings; returns -1 for a code point outside the map.
int unicode_to_byte(uint32_t cp);

}  // namespace memra::text
