// Jinja parser: tokens to a statement tree, following jinja2's grammar and operator precedence.
// Unknown tags are refused by name; unknown filters and tests fail at parse time unless they sit
// inside an `if` (jinja2 then defers the error to the moment they are used).
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"

namespace memra::jinja {

// Throws Error(invalid_argument) "line N: ..." on a syntax error.
Body parse(const std::string& source);

// Filter and test tables, shared with the interpreter (builtins.cpp).
bool filter_exists(const std::string& name);
bool test_exists(const std::string& name);

}  // namespace memra::jinja
