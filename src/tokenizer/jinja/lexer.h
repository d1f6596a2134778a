// Jinja lexer with the environment transformers uses: trim_blocks, lstrip_blocks, `-`/`+`
// whitespace control, newlines normalized to '\n' and one trailing newline dropped (jinja2's
// keep_trailing_newline=False).
#pragma once

#include <string>
#include <vector>

namespace memra::jinja {

enum class Tok {
  data,         // template text outside tags
  var_begin,    // {{
  var_end,      // }}
  block_begin,  // {%
  block_end,    // %}
  name,
  string,  // text holds the unescaped value
  integer,
  floating,
  op,  // text holds the operator
  eof,
};

struct Token {
  Tok type;
  std::string text;
  int line;
};

// Throws Error(invalid_argument) "line N: ..." on an unterminated tag or string, or a bad char.
std::vector<Token> lex(const std::string& source);

}  // namespace memra::jinja
