// Jinja syntax tree: expressions and statements as the parser builds them and the interpreter
// walks them. Every node carries its template line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace memra::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  literal,  // value
  name,     // name
  list,     // args
  tuple,    // args
  dict,     // args as key, value, key, value...
  attr,     // a.name
  item,     // a[b]
  slice,    // a[b:c:d]; missing parts are null
  call,     // a(args, kwargs)
  filter,   // a|name(args, kwargs); a is null inside a filter block
  test,     // a is [not] name(args)
  unary,    // op a  ("-", "+", "not")
  binary,   // a op b (arithmetic, "and", "or")
  compare,  // a ops[0] args[0] ops[1] args[1]...
  concat,   // args joined with ~
  cond,     // b if a else c
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;  // variable, attribute, filter, test or operator
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  bool known = true;  // filter/test exists (unknown ones are allowed only under an `if`)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  data,        // text
  print,       // {{ expr }}
  if_,         // branches
  for_,        // targets in expr [if cond]; body; else_body
  set,         // targets = expr, or ns.attr = expr, or block body (with optional filter)
  macro,       // name(params) body
  call_block,  // {% call(params) expr %} body
  filter_block,
  break_,
  continue_,
  with,   // {% with a = 1, b = 2 %} body
  scope,  // a body rendered in place ({% generation %})
};

struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                      // print value, for iterable, set value, call expression
  ExprPtr cond;                      // for loop filter
  ExprPtr filter;                    // filter block / set block filter chain (a is null)
  std::vector<std::string> targets;  // for/set names; set ns.attr: {ns, attr} with attr_target
  bool attr_target = false;
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif
  Body body;
  Body else_body;
  std::string name;           // macro name
  std::vector<Param> params;  // macro / caller params; with: name=value pairs
  bool recursive = false;
};

}  // namespace memra::jinja
