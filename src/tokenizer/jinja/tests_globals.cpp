// jinja2's built-in tests (defined, none, string, mapping, iterable, ...) with Python semantics
// (bool counts as a number, Undefined is iterable), and the globals a chat template can call:
// range (sandbox-limited), namespace, dict, joiner, plus transformers' raise_exception and
// strftime_now.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "core/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/strings.h"

namespace memra::jinja {

namespace {

const char* const kTests[] = {
    "!=",       "<",        "<=",          "==",       ">",           ">=",       "boolean",
    "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
    "false",    "filter",   "float",       "ge",       "greaterthan", "gt",       "in",
    "integer",  "iterable", "le",          "lessthan", "lower",       "lt",       "mapping",
    "ne",       "none",     "number",      "odd",      "sameas",      "sequence", "string",
    "test",     "true",     "undefined",   "upper"};

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

const Value& arg0(const std::string& test, List& args, Kwargs& kwargs) {
  if (!args.empty()) return args[0];
  if (!kwargs.empty()) return kwargs[0].second;
  fail(ErrorCode::invalid_argument, "test '{}' needs an argument", test);
}

bool has_case(const std::string& s, bool upper) {
  bool cased = false;
  for (char c : s) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (!upper) return false;
      cased = true;
    }
    if (std::islower(static_cast<unsigned char>(c))) {
      if (upper) return false;
      cased = true;
    }
  }
  return cased;
}

Value builtin_range(Interpreter& in, List& args, Kwargs&) {
  if (args.empty() || args.size() > 3)
    fail(ErrorCode::invalid_argument, "range expected 1 to 3 arguments");
  for (const Value& a : args)
    if (!a.is_integral())
      fail(ErrorCode::invalid_argument, "'{}' object cannot be interpreted as an integer",
           type_name(a));
  int64_t start = 0, stop, step = 1;
  if (args.size() == 1) {
    stop = args[0].as_int();
  } else {
    start = args[0].as_int();
    stop = args[1].as_int();
    if (args.size() == 3) step = args[2].as_int();
  }
  if (step == 0) fail(ErrorCode::invalid_argument, "range() arg 3 must not be zero");
  double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                           static_cast<double>(step));
  if (count > static_cast<double>(kMaxRange))
    fail(ErrorCode::invalid_argument,
         "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(Value::from_int(i));
  in.charge(out.size());
  return Value::from_list(std::move(out));
}

Value new_dict(List& args, Kwargs& kwargs, const char* what) {
  auto d = std::make_shared<Dict>();
  if (args.size() > 1)
    fail(ErrorCode::invalid_argument, "{} expected at most 1 positional argument", what);
  if (!args.empty()) {
    if (!args[0].is_dict() || args[0].namespace_ || args[0].loop)
      fail(ErrorCode::unsupported, "{}() accepts only a mapping as positional argument", what);
    *d = *args[0].dict;
  }
  for (auto& [k, v] : kwargs) d->set(Value::from_string(k), v);
  return Value::from_dict(std::move(d));
}

Value builtin_strftime_now(Interpreter&, List& args, Kwargs&) {
  if (args.size() != 1 || !args[0].is_string())
    fail(ErrorCode::invalid_argument, "strftime_now takes one format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  size_t n = std::strftime(buf, sizeof(buf), args[0].text.c_str(), &local);
  if (n == 0 && !args[0].text.empty())
    fail(ErrorCode::invalid_argument, "strftime_now format produced no output or is too long");
  return Value::from_string(std::string(buf, n));
}

}  // namespace

bool test_exists(const std::string& name) {
  return std::find_if(std::begin(kTests), std::end(kTests),
                      [&](const char* t) { return name == t; }) != std::end(kTests);
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, List& args,
                Kwargs& kwargs) {
  (void)in;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Kind::boolean;
  if (name == "true") return v.kind == Kind::boolean && v.boolean;
  if (name == "false") return v.kind == Kind::boolean && !v.boolean;
  if (name == "integer") return v.kind == Kind::integer;
  if (name == "float") return v.kind == Kind::floating;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.namespace_ && !v.loop;
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.namespace_);
  if (name == "sequence")
    return v.is_undefined() || v.is_string() || v.is_list() ||
           (v.is_dict() && !v.namespace_ && !v.loop);
  if (name == "callable") return v.kind == Kind::callable;
  if (name == "escaped") return v.markup;
  if (name == "lower" || name == "upper") return v.is_string() && has_case(v.text, name == "upper");
  if (name == "even" || name == "odd") {
    Value r = binary_op(in, "%", v, Value::from_int(2));
    return truthy(r) == (name == "odd");
  }
  if (name == "filter") return v.is_string() && filter_exists(v.text);
  if (name == "test") return v.is_string() && test_exists(v.text);
  const Value& other = arg0(name, args, kwargs);
  if (name == "divisibleby") return !truthy(binary_op(in, "%", v, other));
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, other);
  if (name == "ne" || name == "!=") return !equals(v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other);
  if (name == "le" || name == "<=") return less(v, other) || equals(v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other, v);
  if (name == "ge" || name == ">=") return less(other, v) || equals(v, other);
  if (name == "in") return contains(other, v);
  if (name == "sameas") {
    if (v.kind != other.kind) return false;
    if (v.is_none() || v.kind == Kind::boolean) return equals(v, other);
    if (v.is_list()) return v.list == other.list;
    if (v.is_dict()) return v.dict == other.dict;
    return false;
  }
  fail(ErrorCode::unsupported, "test '{}' is not supported", name);
}

void add_globals(std::unordered_map<std::string, Value>& g) {
  g["range"] = Value::from_callable("range", builtin_range);
  g["namespace"] =
      Value::from_callable("namespace", [](Interpreter& in, List& args, Kwargs& kwargs) {
        Value v = new_dict(args, kwargs, "namespace");
        v.namespace_ = true;
        in.track_namespace(v.dict);
        return v;
      });
  g["dict"] = Value::from_callable("dict", [](Interpreter&, List& args, Kwargs& kwargs) {
    return new_dict(args, kwargs, "dict");
  });
  g["raise_exception"] =
      Value::from_callable("raise_exception", [](Interpreter&, List& args, Kwargs&) -> Value {
        fail(ErrorCode::invalid_argument, "raise_exception: {}",
             args.empty() ? "" : to_str(args[0]));
      });
  g["strftime_now"] = Value::from_callable("strftime_now", builtin_strftime_now);
  g["joiner"] = Value::from_callable("joiner", [](Interpreter&, List& args, Kwargs&) {
    std::string sep = args.empty() ? ", " : to_str(args[0]);
    auto used = std::make_shared<bool>(false);
    return Value::from_callable("joiner", [sep, used](Interpreter&, List&, Kwargs&) {
      if (!*used) {
        *used = true;
        return Value::from_string("");
      }
      return Value::from_string(sep);
    });
  });
  for (const char* name : {"cycler", "lipsum"}) {
    std::string n = name;
    g[n] = Value::from_callable(n, [n](Interpreter&, List&, Kwargs&) -> Value {
      fail(ErrorCode::unsupported, "global '{}' is not supported", n);
    });
  }
}

}  // namespace memra::jinja
