// Switches read from the environment, for A/B runs and opt-ins.
#pragma once

#include <initializer_list>

namespace memra {

// A 0/1 switch: unset gives `unset`, "1" true, "0" false; any other value is refused by name (a
// typo must not quietly leave a switch at its default).
bool env_switch(const char* name, bool unset);

// One of several named values: unset or empty gives `unset`, a value equal to choices[i] gives
// i; any other value is refused by name with the choices listed.
int env_choice(const char* name, std::initializer_list<const char*> choices, int unset);

}  // namespace memra
