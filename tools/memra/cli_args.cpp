// Option parsing shared by the memra subcommands; see cli_args.h.
#include "cli_args.h"

#include <cmath>
#include <exception>

#include "core/error.h"

namespace memra::cli {

const std::string& flag_value(const Args& args, size_t& i) {
  if (i + 1 >= args.size()) fail(ErrorCode::invalid_argument, "{} needs a value", args[i]);
  return args[++i];
}

int32_t parse_int(const std::string& flag, const std::string& text, int32_t lo, int32_t hi) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return static_cast<int32_t>(v);
  } catch (const std::exception&) {
    // not a number at all: refused below with the same message as an out-of-range one
  }
  fail(ErrorCode::invalid_argument, "{} expects an integer in [{}, {}], got '{}'", flag, lo, hi,
       text);
}

double parse_double(const std::string& flag, const std::string& text, double lo, double hi) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v >= lo && v <= hi) return v;
  } catch (const std::exception&) {
    // not a number at all: refused below
  }
  fail(ErrorCode::invalid_argument, "{} expects a number in [{}, {}], got '{}'", flag, lo, hi,
       text);
}

bool parse_on_off(const std::string& flag, const std::string& text) {
  if (text == "on" || text == "1" || text == "true") return true;
  if (text == "off" || text == "0" || text == "false") return false;
  fail(ErrorCode::invalid_argument, "{} expects on or off, got '{}'", flag, text);
}

}  // namespace memra::cli
