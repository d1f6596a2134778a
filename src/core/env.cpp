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

}  // namespace memra
