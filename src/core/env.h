// Switches read from the environment, for A/B runs and opt-ins.
#pragma once

namespace memra {

// A 0/1 switch: unset gives `unset`, "1" true, "0" false; any other value is refused by name (a
// typo must not quietly leave a switch at its default).
bool env_switch(const char* name, bool unset);

}  // namespace memra
