// Overflow-checked size arithmetic for everything computed from untrusted sizes (file headers,
// request fields). Each helper names what it was computing so the error says which field
// overflowed.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace memra {

inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    fail(ErrorCode::malformed_file, "{}: {} + {} overflows", what, a, b);
  return out;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    fail(ErrorCode::malformed_file, "{}: {} * {} overflows", what, a, b);
  return out;
}

// Rounds value up to a multiple of alignment (> 0), checking for overflow.
inline uint64_t checked_align_up(uint64_t value, uint64_t alignment, std::string_view what) {
  if (alignment == 0) fail(ErrorCode::malformed_file, "{}: alignment is zero", what);
  const uint64_t rem = value % alignment;
  return rem == 0 ? value : checked_add(value, alignment - rem, what);
}

}  // namespace memra
