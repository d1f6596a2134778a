// Switches read from the environment, for A/B runs and opt-ins.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace memra {

// A 0/1 switch: unset gives `unset`, "1" true, "0" false; any other value is refused by name (a
// typo must not quietly leave a switch at its default).
bool env_switch(const char* name, bool unset);

// One of several named values: unset or empty gives `unset`, a value equal to choices[i] gives
// i; any other value is refused by name with the choices listed.
int env_choice(const char* name, std::initializer_list<const char*> choices, int unset);

// A decimal integer in [lo, hi]: unset or empty gives `unset`; anything else (a sign, spaces,
// other characters, a value out of range) is refused by name with the range.
int64_t env_int(const char* name, int64_t lo, int64_t hi, int64_t unset);

}  // namespace memra
