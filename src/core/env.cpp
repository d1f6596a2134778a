#include "core/env.h"

#include <cstdlib>
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

}  // namespace memra
