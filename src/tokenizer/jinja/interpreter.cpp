// Statement execution and expression evaluation. Scoping follows jinja2: `if` shares its scope,
// each for-loop iteration, macro call and `with` gets a child scope (so `set` inside them does not
// leak), and namespaces are the one mutable object.
#include "tokenizer/jinja/interpreter.h"

#include "core/error.h"

namespace memra::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

[[noreturn]] void undefined_error(const Value& v) {
  if (!v.hint.empty()) fail(ErrorCode::invalid_argument, "{}", v.hint);
  if (v.text.empty()) fail(ErrorCode::invalid_argument, "value is undefined");
  fail(ErrorCode::invalid_argument, "'{}' is undefined", v.text);
}

Interpreter::Interpreter(Limits limits) : limits_(limits) {
  add_globals(globals_);
}

Interpreter::~Interpreter() {
  for (auto& scope : macro_scopes_) scope->vars.clear();
  for (auto& dict : namespaces_) dict->items.clear();
}

void Interpreter::charge(size_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    fail(ErrorCode::resource_exhausted, "template exceeded its step limit ({})", limits_.max_steps);
}

void Interpreter::charge_size(const Value& v) {
  // Work on a value is linear in its size: 1 step per 64 bytes of text or per element.
  if (v.is_string())
    charge(v.text.size() / 64);
  else if (v.is_list())
    charge(v.list->size());
  else if (v.is_dict())
    charge(v.dict->items.size());
}

void Interpreter::check_size(size_t n) const {
  if (n > limits_.max_output_bytes)
    fail(ErrorCode::resource_exhausted, "template value exceeded the output limit ({} bytes)",
         limits_.max_output_bytes);
}

void Interpreter::append(Output& out, const std::string& text, const Marks& marks) {
  charge(text.size() / 64);
  marks_append(out.marks, marks, out.text.size());
  out.text += text;
  check_size(out.text.size());
}

void Interpreter::append_value(Output& out, const Value& v) {
  Marks marks;
  std::string text = to_str_marked(v, marks);
  append(out, text, marks);
}

namespace {

Value output_value(Output&& out) {
  Value v = Value::from_string(std::move(out.text));
  v.marks = std::move(out.marks);
  return v;
}

// Filters whose result keeps its marks exactly (they are written for it) or is one of their
// arguments handed back (for containers: the elements keep theirs); see mark_derived.
bool filter_keeps_marks(const std::string& name, const Value& input) {
  static const char* const exact[] = {"trim", "join", "string", "safe", "default", "d"};
  static const char* const elements[] = {
      "first",   "last",   "min",    "max",        "random",     "attr",  "sum",
      "map",     "select", "reject", "selectattr", "rejectattr", "sort",  "unique",
      "reverse", "batch",  "slice",  "dictsort",   "groupby",    "items", "list"};
  for (const char* n : exact)
    if (name == n) return true;
  if (input.is_string()) return false;
  for (const char* n : elements)
    if (name == n) return true;
  return false;
}

bool args_marked(const List& args, const Kwargs& kwargs) {
  for (const Value& a : args)
    if (has_marks(a)) return true;
  for (const auto& [k, v] : kwargs)
    if (has_marks(v)) return true;
  return false;
}

// The generic rule for a filter or str method result (see mark_derived): a string made from
// marked inputs, or a list of strings made from a marked string.
void mark_result(Value& r, const Value& input, const List& args, const Kwargs& kwargs) {
  if (r.is_string() && r.marks.empty())
    mark_derived(r, has_marks(input) || args_marked(args, kwargs));
  else if (r.is_list() && input.is_string())
    mark_derived(r, !input.marks.empty());
}

}  // namespace

Output Interpreter::render(const Body& body, const Value& context) {
  auto root = std::make_shared<Scope>();
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict->items)
      if (k.is_string()) root->vars[k.text] = v;
  }
  Output out;
  exec(body, root, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, Output& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope, Output& out) {
  charge(1);
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::data:
      append(out, s.text);
      return Flow::normal;
    case StmtKind::print:
      append_value(out, eval(*s.expr, scope));
      return Flow::normal;
    case StmtKind::if_:
      for (const auto& [cond, body] : s.branches) {
        if (truthy(eval(*cond, scope))) return exec(body, scope, out);
      }
      return exec(s.else_body, scope, out);
    case StmtKind::for_:
      return exec_for(s, scope, out);
    case StmtKind::set:
      exec_set(s, scope);
      return Flow::normal;
    case StmtKind::macro:
      scope->vars[s.name] = make_macro(s, scope, s.body, s.params, s.name);
      macro_scopes_.push_back(scope);
      return Flow::normal;
    case StmtKind::call_block: {
      Value caller = make_macro(s, scope, s.body, s.params, "caller");
      const Expr& call_expr = *s.expr;
      Value fn = eval(*call_expr.a, scope);
      List args;
      Kwargs kwargs;
      eval_args(call_expr, scope, args, kwargs);
      kwargs.emplace_back("caller", caller);
      append_value(out, call(fn, args, kwargs));
      return Flow::normal;
    }
    case StmtKind::filter_block: {
      Output inner;
      exec(s.body, scope, inner);
      append_value(out, apply_filter_chain(*s.filter, output_value(std::move(inner)), scope));
      return Flow::normal;
    }
    case StmtKind::break_:
      return Flow::break_;
    case StmtKind::continue_:
      return Flow::continue_;
    case StmtKind::with: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& p : s.params) inner->vars[p.name] = eval(*p.default_value, scope);
      return exec(s.body, inner, out);
    }
    case StmtKind::scope:
      return exec(s.body, scope, out);
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, Output& out) {
  Value iterable = eval(*s.expr, scope);
  List items = iterate(iterable);
  charge(items.size());
  if (s.cond) {
    List kept;
    for (auto& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      if (s.targets.size() == 1)
        probe->vars[s.targets[0]] = item;
      else {
        List parts = iterate(item);
        for (size_t i = 0; i < s.targets.size() && i < parts.size(); ++i)
          probe->vars[s.targets[i]] = parts[i];
      }
      if (truthy(eval(*s.cond, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge(8);  // a fresh scope and loop object per iteration cost about as much as 8 steps
    auto iter_scope = std::make_shared<Scope>();
    iter_scope->parent = scope;
    const Value& item = items[static_cast<size_t>(i)];
    if (s.targets.size() == 1) {
      iter_scope->vars[s.targets[0]] = item;
    } else {
      List parts = iterate(item);
      if (parts.size() != s.targets.size())
        fail(ErrorCode::invalid_argument, "cannot unpack {} values into {} loop variables",
             parts.size(), s.targets.size());
      for (size_t k = 0; k < parts.size(); ++k) iter_scope->vars[s.targets[k]] = parts[k];
    }
    auto loop = std::make_shared<Dict>();
    auto set = [&](const char* key, Value v) {
      loop->items.emplace_back(Value::from_string(key), std::move(v));
    };
    set("index", Value::from_int(i + 1));
    set("index0", Value::from_int(i));
    set("revindex", Value::from_int(n - i));
    set("revindex0", Value::from_int(n - i - 1));
    set("first", Value::from_bool(i == 0));
    set("last", Value::from_bool(i == n - 1));
    set("length", Value::from_int(n));
    set("depth", Value::from_int(1));
    set("depth0", Value::from_int(0));
    set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
    set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
    set("cycle", Value::from_callable("cycle", [i](Interpreter&, List& args, Kwargs&) {
          if (args.empty()) fail(ErrorCode::invalid_argument, "no items for cycling given");
          return args[static_cast<size_t>(i) % args.size()];
        }));
    Value loop_value = Value::from_dict(loop);
    loop_value.loop = true;
    iter_scope->vars["loop"] = std::move(loop_value);
    Flow f = exec(s.body, iter_scope, out);
    if (f == Flow::break_) break;
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value value;
  if (s.expr) {
    value = eval(*s.expr, scope);
  } else {
    Output inner;
    exec(s.body, scope, inner);
    value = output_value(std::move(inner));
    if (s.filter) value = apply_filter_chain(*s.filter, std::move(value), scope);
  }
  if (s.attr_target) {
    Value ns = lookup(s.targets[0], scope);
    if (!ns.is_dict() || !ns.namespace_)
      fail(ErrorCode::invalid_argument, "cannot assign attribute on non-namespace object");
    ns.dict->set(Value::from_string(s.targets[1]), std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    scope->vars[s.targets[0]] = std::move(value);
    return;
  }
  List parts = iterate(value);
  if (parts.size() != s.targets.size())
    fail(ErrorCode::invalid_argument, "cannot unpack {} values into {} names", parts.size(),
         s.targets.size());
  for (size_t i = 0; i < parts.size(); ++i) scope->vars[s.targets[i]] = parts[i];
}

Value Interpreter::make_macro(const Stmt& s, const ScopePtr& scope, const Body& body,
                              const std::vector<Param>& params, const std::string& name) {
  const Stmt* stmt = &s;
  const Body* b = &body;
  const std::vector<Param>* ps = &params;
  return Value::from_callable(name, [stmt, b, ps, scope, name](Interpreter& in, List& args,
                                                               Kwargs& kwargs) {
    if (args.size() > ps->size())
      fail(ErrorCode::invalid_argument, "macro '{}' takes not more than {} argument(s)", name,
           ps->size());
    if (++in.depth_ > in.limits_.max_depth) {
      --in.depth_;
      fail(ErrorCode::resource_exhausted, "macro calls nested deeper than {}",
           in.limits_.max_depth);
    }
    auto frame = std::make_shared<Scope>();
    frame->parent = scope;
    std::vector<bool> bound(ps->size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      frame->vars[(*ps)[i].name] = args[i];
      bound[i] = true;
    }
    for (auto& [key, value] : kwargs) {
      size_t i = 0;
      while (i < ps->size() && (*ps)[i].name != key) ++i;
      if (i == ps->size()) {
        if (key == "caller") {
          frame->vars["caller"] = value;
          continue;
        }
        --in.depth_;
        fail(ErrorCode::invalid_argument, "macro '{}' takes no keyword argument '{}'", name, key);
      }
      frame->vars[key] = value;
      bound[i] = true;
    }
    int saved_line = in.line_;
    try {
      for (size_t i = 0; i < ps->size(); ++i) {
        if (bound[i]) continue;
        const Param& p = (*ps)[i];
        frame->vars[p.name] =
            p.default_value ? in.eval(*p.default_value, frame) : Value::undefined(p.name);
      }
      Output out;
      in.exec(*b, frame, out);
      --in.depth_;
      in.line_ = saved_line;
      (void)stmt;
      return output_value(std::move(out));
    } catch (...) {
      --in.depth_;
      throw;
    }
  });
}

Value Interpreter::apply_filter_chain(const Expr& chain, Value input, const ScopePtr& scope) {
  if (chain.kind != ExprKind::filter) return eval(chain, scope);
  if (chain.a) input = apply_filter_chain(*chain.a, std::move(input), scope);
  return eval_filter(chain, std::move(input), scope);
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) const {
  if (const Value* v = scope->lookup(name)) return *v;
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  return Value::undefined(name);
}

void Interpreter::eval_args(const Expr& e, const ScopePtr& scope, List& args, Kwargs& kwargs) {
  for (const auto& a : e.args) args.push_back(eval(*a, scope));
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v, scope));
}

Value Interpreter::call(const Value& fn, List& args, Kwargs& kwargs) {
  if (fn.kind != Kind::callable) {
    if (fn.is_undefined()) undefined_error(fn);
    fail(ErrorCode::invalid_argument, "'{}' object is not callable", type_name(fn));
  }
  return fn.callable->call(*this, args, kwargs);
}

Value Interpreter::eval_call(const Expr& e, const ScopePtr& scope) {
  if (e.a->kind == ExprKind::attr) {
    Value obj = eval(*e.a->a, scope);
    if (obj.is_string() || obj.is_list() || (obj.is_dict() && !obj.namespace_ && !obj.loop)) {
      List args;
      Kwargs kwargs;
      eval_args(e, scope, args, kwargs);
      bool found = false;
      line_ = e.line;
      charge_size(obj);
      for (const Value& a : args) charge_size(a);
      Value r = call_method(*this, obj, e.a->name, args, kwargs, found);
      if (found) {
        // dict and list methods hand back elements; str methods other than these build text.
        const std::string& m = e.a->name;
        if (obj.is_string() && m != "strip" && m != "lstrip" && m != "rstrip" && m != "join")
          mark_result(r, obj, args, kwargs);
        return r;
      }
      return call(get_attr(obj, e.a->name), args, kwargs);
    }
    Value fn = get_attr(obj, e.a->name);
    List args;
    Kwargs kwargs;
    eval_args(e, scope, args, kwargs);
    line_ = e.line;
    return call(fn, args, kwargs);
  }
  Value fn = eval(*e.a, scope);
  List args;
  Kwargs kwargs;
  eval_args(e, scope, args, kwargs);
  line_ = e.line;
  return call(fn, args, kwargs);
}

Value Interpreter::eval_filter(const Expr& e, Value input, const ScopePtr& scope) {
  List args;
  Kwargs kwargs;
  eval_args(e, scope, args, kwargs);
  line_ = e.line;
  if (!e.known) fail(ErrorCode::invalid_argument, "no filter named '{}'", e.name);
  charge_size(input);
  for (const Value& a : args) charge_size(a);
  Value r = apply_filter(*this, e.name, input, args, kwargs);
  if (!filter_keeps_marks(e.name, input)) mark_result(r, input, args, kwargs);
  return r;
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.a, scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i], scope);
    charge_size(left);
    charge_size(right);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==")
      r = equals(left, right);
    else if (op == "!=")
      r = !equals(left, right);
    else if (op == "<")
      r = less(left, right);
    else if (op == ">")
      r = less(right, left);
    else if (op == "<=")
      r = less(left, right) || equals(left, right);
    else if (op == ">=")
      r = less(right, left) || equals(left, right);
    else if (op == "in")
      r = contains(right, left);
    else
      r = !contains(right, left);
    if (!r) return Value::from_bool(false);
    left = std::move(right);
  }
  return Value::from_bool(true);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  charge(1);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::literal:
      return e.value;
    case ExprKind::name:
      return lookup(e.name, scope);
    case ExprKind::list:
    case ExprKind::tuple: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::from_list(std::move(items), e.kind == ExprKind::tuple);
    }
    case ExprKind::dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], scope);
        if (k.is_list() && !k.tuple) fail(ErrorCode::invalid_argument, "unhashable type: 'list'");
        if (k.is_dict()) fail(ErrorCode::invalid_argument, "unhashable type: 'dict'");
        d->set(k, eval(*e.args[i + 1], scope));
      }
      return Value::from_dict(std::move(d));
    }
    case ExprKind::attr: {
      Value obj = eval(*e.a, scope);
      line_ = e.line;
      return get_attr(obj, e.name);
    }
    case ExprKind::item: {
      Value obj = eval(*e.a, scope);
      Value key = eval(*e.b, scope);
      line_ = e.line;
      if (obj.is_string()) charge_size(obj);
      return get_item(obj, key);
    }
    case ExprKind::slice: {
      Value obj = eval(*e.a, scope);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[i] ? eval(*e.args[i], scope) : Value::none();
      line_ = e.line;
      charge_size(obj);
      Value r = slice(obj, parts[0], parts[1], parts[2]);
      charge(r.is_list() ? r.list->size() : r.text.size() / 64);
      return r;
    }
    case ExprKind::call:
      return eval_call(e, scope);
    case ExprKind::filter:
      return eval_filter(e, eval(*e.a, scope), scope);
    case ExprKind::test: {
      Value v = eval(*e.a, scope);
      List args;
      Kwargs kwargs;
      eval_args(e, scope, args, kwargs);
      line_ = e.line;
      if (!e.known) fail(ErrorCode::invalid_argument, "no test named '{}'", e.name);
      charge_size(v);
      for (const Value& a : args) charge_size(a);
      bool r = apply_test(*this, e.name, v, args, kwargs);
      return Value::from_bool(e.negated ? !r : r);
    }
    case ExprKind::unary: {
      Value v = eval(*e.a, scope);
      line_ = e.line;
      if (e.name == "not") return Value::from_bool(!truthy(v));
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number())
        fail(ErrorCode::invalid_argument, "bad operand type for unary {}: '{}'", e.name,
             type_name(v));
      if (e.name == "+") return v.kind == Kind::boolean ? Value::from_int(v.as_int()) : v;
      if (v.kind == Kind::floating) return Value::from_float(-v.number);
      if (v.as_int() == INT64_MIN) fail(ErrorCode::invalid_argument, "integer overflow");
      return Value::from_int(-v.as_int());
    }
    case ExprKind::binary: {
      if (e.name == "and") {
        Value a = eval(*e.a, scope);
        return truthy(a) ? eval(*e.b, scope) : a;
      }
      if (e.name == "or") {
        Value a = eval(*e.a, scope);
        return truthy(a) ? a : eval(*e.b, scope);
      }
      Value a = eval(*e.a, scope);
      Value b = eval(*e.b, scope);
      line_ = e.line;
      charge_size(a);
      charge_size(b);
      return binary_op(*this, e.name, a, b);
    }
    case ExprKind::compare:
      return eval_compare(e, scope);
    case ExprKind::concat: {
      Output s;
      for (const auto& a : e.args) append_value(s, eval(*a, scope));
      return output_value(std::move(s));
    }
    case ExprKind::cond:
      if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined();
  }
  return Value::undefined();
}

}  // namespace memra::jinja
