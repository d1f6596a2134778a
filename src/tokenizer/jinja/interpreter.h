// Jinja interpreter: renders a parsed template against a context the way jinja2's
// ImmutableSandboxedEnvironment does for transformers (Undefined semantics, scoping of loops and
// macros, sandboxed attribute access), with step, output-size and call-depth limits.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace memra::jinja {

struct Limits {
  size_t max_steps;
  size_t max_output_bytes;
  size_t max_depth;
};

// Rendered text and which of its bytes are the client's (see Value::marks).
struct Output {
  std::string text;
  Marks marks;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* lookup(const std::string& name) const;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(Limits limits);
  // Breaks the reference cycles a render can create (a macro stored in the scope it closes over,
  // a namespace holding itself) so that shared_ptr ownership frees everything.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Registers a namespace object so its contents are released with the interpreter.
  void track_namespace(std::shared_ptr<Dict> dict) { namespaces_.push_back(std::move(dict)); }

  // Renders `body` with `context` (a dict) as the template's top-level variables.
  Output render(const Body& body, const Value& context);

  // The template line being executed, for error messages.
  int line() const { return line_; }

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& fn, List& args, Kwargs& kwargs);

  // Charges `n` steps of work (elements copied, characters produced) against the step budget.
  void charge(size_t n);
  // Charges the work of touching a string, list or dict in proportion to its size.
  void charge_size(const Value& v);
  // Refuses a string or list result larger than the output limit.
  void check_size(size_t n) const;

 private:
  enum class Flow { normal, break_, continue_ };

  Flow exec(const Body& body, const ScopePtr& scope, Output& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, Output& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, Output& out);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, const Body& body,
                   const std::vector<Param>& params, const std::string& name);
  Value apply_filter_chain(const Expr& chain, Value input, const ScopePtr& scope);
  void append(Output& out, const std::string& text, const Marks& marks = {});
  void append_value(Output& out, const Value& v);

  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, Value input, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope) const;
  void eval_args(const Expr& e, const ScopePtr& scope, List& args, Kwargs& kwargs);

  Limits limits_;
  size_t steps_ = 0;
  size_t depth_ = 0;
  int line_ = 0;
  std::unordered_map<std::string, Value> globals_;
  std::vector<ScopePtr> macro_scopes_;             // scopes that hold macros closing over them
  std::vector<std::shared_ptr<Dict>> namespaces_;  // namespace() objects created by the render
};

// Python semantics for operators, shared by the interpreter and filters (operators.cpp).
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// Iterating a value as a Python `for` would (dict: keys, str: characters).
List iterate(const Value& v);
// a.name and a[key] as the sandboxed environment resolves them (methods.cpp).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// obj.name(args...) for str/dict/list methods; sets `found` false when there is no such method.
Value call_method(Interpreter& in, const Value& obj, const std::string& name, List& args,
                  Kwargs& kwargs, bool& found);
// Filters and tests (builtins.cpp).
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, List& args,
                   Kwargs& kwargs);
bool apply_test(Interpreter& in, const std::string& name, const Value& input, List& args,
                Kwargs& kwargs);
// range, namespace, dict, raise_exception, strftime_now, joiner, cycler.
void add_globals(std::unordered_map<std::string, Value>& globals);
// Raises jinja2's UndefinedError for a use of `v` that needs a real value.
[[noreturn]] void undefined_error(const Value& v);

}  // namespace memra::jinja
