// Feeders for JSON scalars: strings (UTF-8 validated byte by byte, escapes, surrogate pairs) and
// numbers (the JSON number grammar with a length cap). Neither pushes child frames; each refuses
// a byte as soon as the text could no longer be completed, so no state is a dead end.
#include "structured/matcher_feed.h"

namespace memra::structured {

namespace {

// ---- JSON strings: UTF-8 validated byte by byte; a = continuation bytes or escape unit,
// b = \u value so far, pos = hex digits or (UTF-8: next byte's lowest | highest << 8).

enum StringPhase : uint8_t { kOpen, kBody, kEscape, kHex, kPairBackslash, kPairU, kUtf8 };

Feed utf8_lead(Frame& f, uint8_t c) {
  uint32_t more = 0, lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    more = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    more = 2;
    if (c == 0xe0) lo = 0xa0;  // no overlong 3-byte forms
    if (c == 0xed) hi = 0x9f;  // no UTF-16 surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    more = 3;
    if (c == 0xf0) lo = 0x90;  // no overlong 4-byte forms
    if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return Feed::reject;
  }
  f.a = more;
  f.pos = static_cast<uint16_t>(lo | hi << 8);
  f.phase = kUtf8;
  return Feed::consumed;
}

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A hex digit of \uXXXX; refused as soon as the unit can only end up an unpaired surrogate.
Feed string_hex(Frame& f, uint8_t byte) {
  const int h = hex_value(byte);
  if (h < 0) return Feed::reject;
  const uint32_t value = f.b * 16 + static_cast<uint32_t>(h);
  const uint32_t digits = f.pos + 1u;
  const uint32_t shift = 4 * (4 - digits);
  const uint32_t low = value << shift, high = low + (1u << shift) - 1;
  const bool low_surrogate_only = low >= 0xdc00 && high <= 0xdfff;
  const bool may_be_low_surrogate = high >= 0xdc00 && low <= 0xdfff;
  if (f.a == 0 ? low_surrogate_only : !may_be_low_surrogate) return Feed::reject;
  f.b = value;
  f.pos = static_cast<uint16_t>(digits);
  if (digits == 4) {
    const bool high_surrogate = f.a == 0 && value >= 0xd800 && value <= 0xdbff;
    f.phase = high_surrogate ? kPairBackslash : kBody;
    if (!high_surrogate) f.a = f.b = f.pos = 0;  // canonical in-string state
  }
  return Feed::consumed;
}

// ---- JSON numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, a = bytes written.

enum NumberPhase : uint8_t {
  kStart,
  kMinus,
  kZero,
  kInt,
  kDot,
  kFrac,
  kExp,
  kExpSign,
  kExpDigits,
  kNone = 0xff
};

uint8_t number_next(uint8_t phase, uint8_t c, bool integer) {
  const bool digit = c >= '0' && c <= '9';
  const bool exp = !integer && (c == 'e' || c == 'E');
  switch (phase) {
    case kStart:
      if (c == '-') return kMinus;
      [[fallthrough]];
    case kMinus:
      return c == '0' ? kZero : digit ? kInt : kNone;
    case kInt:
      if (digit) return kInt;
      [[fallthrough]];
    case kZero:
      return (!integer && c == '.') ? kDot : exp ? kExp : kNone;
    case kDot:
      return digit ? kFrac : kNone;
    case kFrac:
      return digit ? kFrac : exp ? kExp : kNone;
    case kExp:
      if (c == '+' || c == '-') return kExpSign;
      [[fallthrough]];
    case kExpSign:
    case kExpDigits:
      return digit ? kExpDigits : kNone;
    default:
      return kNone;
  }
}

}  // namespace

Feed feed_string(Frame& f, uint8_t byte) {
  switch (f.phase) {
    case kOpen:
      if (byte != '"') return Feed::reject;
      f.phase = kBody;
      return Feed::consumed;
    case kBody:
      if (byte == '"') return Feed::done;
      if (byte == '\\') {
        f.phase = kEscape;
        return Feed::consumed;
      }
      if (byte < 0x20) return Feed::reject;
      if (byte < 0x80) return Feed::consumed;
      return utf8_lead(f, byte);
    case kUtf8: {
      if (byte < (f.pos & 0xff) || byte > (f.pos >> 8)) return Feed::reject;
      f.pos = static_cast<uint16_t>(0x80 | 0xbf << 8);
      if (--f.a == 0) {
        f.phase = kBody;
        f.pos = 0;  // back to one canonical in-string state, so token masks cache well
      }
      return Feed::consumed;
    }
    case kEscape:
      if (byte == 'u') {
        f.phase = kHex;
        f.a = 0;
        f.b = 0;
        f.pos = 0;
        return Feed::consumed;
      }
      if (byte != '"' && byte != '\\' && byte != '/' && byte != 'b' && byte != 'f' && byte != 'n' &&
          byte != 'r' && byte != 't') {
        return Feed::reject;
      }
      f.phase = kBody;
      return Feed::consumed;
    case kHex:
      return string_hex(f, byte);
    case kPairBackslash:
      if (byte != '\\') return Feed::reject;
      f.phase = kPairU;
      return Feed::consumed;
    default:  // kPairU
      if (byte != 'u') return Feed::reject;
      f.phase = kHex;
      f.a = 1;
      f.b = 0;
      f.pos = 0;
      return Feed::consumed;
  }
}

bool number_can_end(uint8_t phase) {
  return phase == kZero || phase == kInt || phase == kFrac || phase == kExpDigits;
}

Feed feed_number(Frame& f, uint8_t byte, const GrammarLimits& limits) {
  const uint8_t next = number_next(f.phase, byte, f.node->kind == NodeKind::integer);
  // A byte that leaves a digit still to come must leave room for it.
  const uint32_t need = (next == kMinus || next == kDot || next == kExp || next == kExpSign);
  if (next == kNone || f.a + 1 + need > static_cast<uint32_t>(limits.max_number_bytes)) {
    return number_can_end(f.phase) ? Feed::pop_refeed : Feed::reject;
  }
  ++f.a;
  f.phase = next;
  return Feed::consumed;
}

}  // namespace memra::structured
