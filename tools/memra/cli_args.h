// Option parsing shared by the memra subcommands: a flag's value taken with a clear error at the
// end of the command line, and numbers read whole and range-checked, so "--runs 5x" or "--runs"
// alone is refused by name (exit 2) instead of surfacing as an internal error.
#pragma once

#include <cstdint>
#include <string>

#include "commands.h"

namespace memra::cli {

// The value after the flag at args[i]; advances i. Error(invalid_argument) "FLAG needs a value".
const std::string& flag_value(const Args& args, size_t& i);

// Error(invalid_argument) naming the flag, the range and the text when it is not a whole number
// in [lo, hi].
int32_t parse_int(const std::string& flag, const std::string& text, int32_t lo, int32_t hi);
double parse_double(const std::string& flag, const std::string& text, double lo, double hi);
// "on" or "off" (also 1/0, true/false); Error(invalid_argument) naming the flag otherwise.
bool parse_on_off(const std::string& flag, const std::string& text);

}  // namespace memra::cli
