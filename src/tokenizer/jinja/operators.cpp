// Python semantics for Jinja's arithmetic operators, `in` and iteration: int/float promotion,
// floor division and modulo toward negative infinity, str/list repetition and concatenation, and
// markupsafe's rule that `Markup + str` HTML-escapes the plain side.
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja/interpreter.h"

namespace memra::jinja {

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  fail(ErrorCode::invalid_argument, "unsupported operand type(s) for {}: '{}' and '{}'", op,
       type_name(a), type_name(b));
}

void check_overflow(bool overflow) {
  if (overflow) fail(ErrorCode::invalid_argument, "integer overflow (memra ints are 64-bit)");
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0)
    return seq.is_string() ? Value::from_string("", seq.markup) : Value::from_list({}, seq.tuple);
  size_t unit = seq.is_string() ? seq.text.size() : seq.list->size();
  if (unit > 0) in.check_size(unit * std::min<size_t>(static_cast<size_t>(n), SIZE_MAX / unit));
  in.charge(unit * static_cast<size_t>(n) / 16);
  if (seq.is_string()) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += seq.text;
    return Value::from_string(std::move(s), seq.markup);
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::from_list(std::move(out), seq.tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  bool use_float = a.kind == Kind::floating || b.kind == Kind::floating;
  if (op == "/") {
    double d = b.as_double();
    if (d == 0) fail(ErrorCode::invalid_argument, "division by zero");
    return Value::from_float(a.as_double() / d);
  }
  if (use_float) {
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::from_float(x + y);
    if (op == "-") return Value::from_float(x - y);
    if (op == "*") return Value::from_float(x * y);
    if (op == "**") return Value::from_float(std::pow(x, y));
    if (y == 0) fail(ErrorCode::invalid_argument, "float division by zero");
    // CPython's float divmod: fmod, then move the remainder to the divisor's sign.
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) {
      mod += y;
      div -= 1.0;
    }
    if (op == "%") return Value::from_float(mod);
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return Value::from_float(floordiv);
  }
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  if (op == "+" || op == "-" || op == "*") {
    check_overflow(op == "+"   ? __builtin_add_overflow(x, y, &r)
                   : op == "-" ? __builtin_sub_overflow(x, y, &r)
                               : __builtin_mul_overflow(x, y, &r));
    return Value::from_int(r);
  }
  if (op == "**") {
    if (y < 0) return Value::from_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t result = 1, base = x;
    while (y > 0) {
      if (y & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
      y >>= 1;
      if (y > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
    }
    return Value::from_int(result);
  }
  if (y == 0) fail(ErrorCode::invalid_argument, "integer division or modulo by zero");
  if (x == INT64_MIN && y == -1) fail(ErrorCode::invalid_argument, "integer overflow");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    q -= 1;
    m += y;
  }
  return Value::from_int(op == "%" ? m : q);
}

// str % args with the conversions templates use (%s %r %d %i %%); other specs are refused.
Value printf_format(Interpreter& in, const Value& fmt, const Value& args) {
  List items = args.is_list() && args.tuple ? *args.list : List{args};
  size_t next = 0;
  std::string out;
  const std::string& f = fmt.text;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (i + 1 >= f.size()) fail(ErrorCode::invalid_argument, "incomplete format");
    char c = f[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'r' && c != 'd' && c != 'i')
      fail(ErrorCode::unsupported, "printf-style format '%{}' is not supported", c);
    if (next >= items.size())
      fail(ErrorCode::invalid_argument, "not enough arguments for format string");
    const Value& v = items[next++];
    if (c == 's')
      out += to_str(v);
    else if (c == 'r')
      out += repr(v);
    else if (v.is_number())
      out += std::to_string(v.kind == Kind::floating ? static_cast<int64_t>(v.number) : v.as_int());
    else
      fail(ErrorCode::invalid_argument, "%{} format: a real number is required, not {}", c,
           type_name(v));
    in.check_size(out.size());
  }
  if (next < items.size())
    fail(ErrorCode::invalid_argument, "not all arguments converted during string formatting");
  return Value::from_string(std::move(out));
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.text.size() + b.text.size());
      // Escaping moves bytes: a marked side marks the whole result.
      Value r;
      if (a.markup != b.markup) {
        r = a.markup ? Value::from_string(a.text + html_escape(b.text), true)
                     : Value::from_string(html_escape(a.text) + b.text, true);
        mark_derived(r, !a.marks.empty() || !b.marks.empty());
        return r;
      }
      r = Value::from_string(a.text + b.text, a.markup);
      r.marks = a.marks;
      marks_append(r.marks, b.marks, a.text.size());
      return r;
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple) {
      in.check_size(a.list->size() + b.list->size());
      in.charge(a.list->size() + b.list->size());
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::from_list(std::move(out), a.tuple);
    }
  }
  if (op == "*") {
    Value r;
    if ((a.is_string() || a.is_list()) && b.is_integral())
      r = repeat(in, a, b.as_int());
    else if ((b.is_string() || b.is_list()) && a.is_integral())
      r = repeat(in, b, a.as_int());
    if (r.is_string()) mark_derived(r, !a.marks.empty() || !b.marks.empty());
    if (!r.is_undefined()) return r;
  }
  if (op == "%" && a.is_string()) {
    Value r = printf_format(in, a, b);
    mark_derived(r, !a.marks.empty() || has_marks(b));
    return r;
  }
  unsupported_operands(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::undefined:
      return false;
    case Kind::string:
      if (!item.is_string())
        fail(ErrorCode::invalid_argument, "'in <string>' requires string as left operand, not {}",
             type_name(item));
      return container.text.find(item.text) != std::string::npos;
    case Kind::list:
      for (const auto& v : *container.list)
        if (equals(v, item)) return true;
      return false;
    case Kind::dict:
      if (container.namespace_ || container.loop)
        fail(ErrorCode::invalid_argument, "argument of type '{}' is not iterable",
             type_name(container));
      return container.dict->find(item) != nullptr;
    default:
      fail(ErrorCode::invalid_argument, "argument of type '{}' is not iterable",
           type_name(container));
  }
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
      return {};
    case Kind::list:
      return *v.list;
    case Kind::string: {
      List out;
      size_t at = 0;
      for (auto& c : utf8_chars(v.text)) {
        const size_t n = c.size();
        out.push_back(Value::from_string(std::move(c), v.markup));
        if (!v.marks.empty()) out.back().marks = marks_slice(v.marks, at, at + n);
        at += n;
      }
      return out;
    }
    case Kind::dict: {
      if (v.namespace_ || v.loop)
        fail(ErrorCode::invalid_argument, "'{}' object is not iterable", type_name(v));
      List out;
      for (const auto& [k, e] : v.dict->items) out.push_back(k);
      return out;
    }
    default:
      fail(ErrorCode::invalid_argument, "'{}' object is not iterable", type_name(v));
  }
}

}  // namespace memra::jinja
