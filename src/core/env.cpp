#include "core/env.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"

namespace memra {

bool env_switch(const char* name, bool unset) {
  const char* v = std::getenv(name);
  if (v == nullptr) return unset;
  if (std::string_view(v) == "1") return true;
  if (std::string_view(v) == "0") return false;
  fail(ErrorCode::invalid_argument, "{}={} is not 0 or 1", name, v);
}

int env_choice(const char* name, std::initializer_list<const char*> choices, int unset) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return unset;
  int i = 0;
  std::string listed;
  for (const char* c : choices) {
    if (std::string_view(v) == c) return i;
    listed += (i++ == 0 ? "" : ", ") + std::string(c);
  }
  fail(ErrorCode::invalid_argument, "{}={} is not one of {}", name, v, listed);
}

int64_t env_int(const char* name, int64_t lo, int64_t hi, int64_t unset) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return unset;
  int64_t value = 0;
  bool ok = true;
  for (const char* c = v; *c != '\0' && ok; ++c) {
    const int digit = *c - '0';
    // value * 10 + digit stays <= hi, checked without overflowing.
    ok = digit >= 0 && digit <= 9 && value <= (hi - digit) / 10 && value * 10 + digit <= hi;
    if (ok) value = value * 10 + digit;
  }
  if (!ok || value < lo)
    fail(ErrorCode::invalid_argument, "{}={} is not an integer from {} to {}", name, v, lo, hi);
  return value;
}

}  // namespace memra
