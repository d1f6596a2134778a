// jinja2's built-in filters with transformers' tojson override (json.dumps with ensure_ascii=False
// by default, optional indent/separators/sort_keys). Filters jinja2 has but chat templates do not
// use (batch, format, groupby, urlize, ...) exist by name and are refused when called.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/strings.h"

namespace memra::jinja {

namespace {

const char* const kFilters[] = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};

struct FilterArgs {
  const std::string& filter;
  List& args;
  Kwargs& kwargs;

  const Value* get(size_t index, const char* name) const {
    if (index < args.size()) return &args[index];
    for (const auto& [k, v] : kwargs)
      if (k == name) return &v;
    return nullptr;
  }
  Value value(size_t index, const char* name, Value dflt) const {
    const Value* v = get(index, name);
    return v ? *v : dflt;
  }
  bool flag(size_t index, const char* name) const {
    const Value* v = get(index, name);
    return v && truthy(*v);
  }
};

size_t py_len(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
      return 0;
    case Kind::string:
      return utf8_length(v.text);
    case Kind::list:
      if (!v.generator) return v.list->size();
      break;
    case Kind::dict:
      if (!v.namespace_ && !v.loop) return v.dict->items.size();
      break;
    default:
      break;
  }
  fail(ErrorCode::invalid_argument, "object of type '{}' has no len()", type_name(v));
}

// Dotted attribute paths as jinja2's make_attrgetter resolves them ("a.b", "0").
Value get_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = numeric ? get_item(cur, Value::from_int(std::stoll(part)))
                  : get_item(cur, Value::from_string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort key: strings lower-cased unless case-sensitive, as jinja2's ignore_case does.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::from_string(py_lower(v.text));
  return v;
}

Value jinja_title(const std::string& s) {
  // jinja2 splits at runs of whitespace, '-', '(', '{', '[', '<' and capitalizes each piece.
  std::string out;
  bool at_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || c == '\t' ||
               c == '\n' || c == '\r' || c == '\v' || c == '\f';
    if (sep) {
      out += c;
      at_start = true;
    } else if (at_start) {
      out += py_upper(std::string(1, c));
      at_start = false;
    } else {
      out += py_lower(std::string(1, c));
    }
  }
  return Value::from_string(out);
}

Value do_indent(const Value& input, const FilterArgs& a) {
  Value width = a.value(0, "width", Value::from_int(4));
  std::string indention =
      width.is_string()
          ? width.text
          : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  bool first = a.flag(1, "first"), blank = a.flag(2, "blank");
  std::string s = to_str(input) + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) {
        rv.push_back('\n');
        rv.append(indention);
      }
      rv.append(lines[i]);
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv.push_back('\n');
      if (!lines[i].empty()) rv.append(indention);
      rv.append(lines[i]);
    }
  }
  if (first) rv = indention + rv;
  return Value::from_string(rv, input.markup);
}

Value do_tojson(const Value& input, const FilterArgs& a) {
  bool ensure_ascii = a.flag(0, "ensure_ascii");
  Value indent = a.value(1, "indent", Value::none());
  Value separators = a.value(2, "separators", Value::none());
  bool sort_keys = a.flag(3, "sort_keys");
  bool has_indent = !indent.is_none();
  int width = 0;
  std::string indent_text;
  if (has_indent) {
    if (!indent.is_integral()) fail(ErrorCode::unsupported, "tojson indent must be an integer");
    width = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  }
  std::string item_sep = has_indent ? "," : ", ", key_sep = ": ";
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.list->size() != 2 ||
        !(*separators.list)[0].is_string() || !(*separators.list)[1].is_string())
      fail(ErrorCode::invalid_argument, "tojson separators must be a pair of strings");
    item_sep = (*separators.list)[0].text;
    key_sep = (*separators.list)[1].text;
  }
  return Value::from_string(
      json_dumps(input, width, has_indent, item_sep, key_sep, sort_keys, ensure_ascii));
}

Value to_int(const Value& v, const FilterArgs& a) {
  Value dflt = a.value(0, "default", Value::from_int(0));
  int64_t base = a.value(1, "base", Value::from_int(10)).as_int();
  if (v.is_integral()) return Value::from_int(v.as_int());
  if (v.kind == Kind::floating) {
    if (!std::isfinite(v.number) || std::fabs(v.number) > 9.2e18) return dflt;
    return Value::from_int(static_cast<int64_t>(v.number));
  }
  if (v.is_string()) {
    std::string s = py_strip(v.text, nullptr, StripSide::both);
    std::string digits;
    for (char c : s)
      if (c != '_') digits += c;
    if (!digits.empty() && base >= 2 && base <= 36) {
      errno = 0;
      char* end = nullptr;
      long long r = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
      if (errno == 0 && end && *end == '\0' && !std::isspace(static_cast<unsigned char>(digits[0])))
        return Value::from_int(r);
    }
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value::from_int(static_cast<int64_t>(d));
  }
  return dflt;
}

Value to_float(const Value& v, const FilterArgs& a) {
  Value dflt = a.value(0, "default", Value::from_float(0.0));
  if (v.is_number()) return Value::from_float(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.text, nullptr, StripSide::both);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && s.find_first_of("xXpP") == std::string::npos)
      return Value::from_float(d);
  }
  return dflt;
}

Value do_round(const Value& v, const FilterArgs& a) {
  int64_t precision = a.value(0, "precision", Value::from_int(0)).as_int();
  std::string method = a.value(1, "method", Value::from_string("common")).text;
  if (!v.is_number())
    fail(ErrorCode::invalid_argument, "round() needs a number, not {}", type_name(v));
  if (precision < -20 || precision > 20)
    fail(ErrorCode::unsupported, "round precision out of range");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  if (method == "ceil") return Value::from_float(std::ceil(x) / scale);
  if (method == "floor") return Value::from_float(std::floor(x) / scale);
  if (method != "common") fail(ErrorCode::invalid_argument, "method must be common, ceil or floor");
  if (v.is_integral() && precision >= 0) return Value::from_int(v.as_int());
  double r = std::nearbyint(x) / scale;  // banker's rounding, as Python's round()
  return Value::from_float(r);
}

// jinja2's map/select/reject filters yield: the result is a generator, not a list.
Value generator(List items) {
  Value v = Value::from_list(std::move(items));
  v.generator = true;
  return v;
}

// select/reject/selectattr/rejectattr and map share argument handling with tests and filters.
Value select_items(Interpreter& in, const Value& input, const FilterArgs& a, bool attr, bool keep) {
  List out;
  size_t arg0 = attr ? 1 : 0;
  std::string attr_name = attr ? a.value(0, "attribute", Value::from_string("")).text : "";
  if (!truthy(input)) return generator({});  // jinja2 guards with `if value:`
  for (const Value& item : iterate(input)) {
    Value probe = attr ? get_path(item, attr_name) : item;
    bool ok;
    if (a.args.size() <= arg0) {
      ok = truthy(probe);
    } else {
      std::string test = to_str(a.args[arg0]);
      List rest(a.args.begin() + static_cast<long>(arg0) + 1, a.args.end());
      Kwargs none;
      ok = apply_test(in, test, probe, rest, none);
    }
    if (ok == keep) out.push_back(item);
  }
  in.charge(out.size());
  return generator(std::move(out));
}

Value do_map(Interpreter& in, const Value& input, FilterArgs& a) {
  List out;
  if (!truthy(input)) return generator({});  // jinja2 guards with `if value:`
  const Value* attribute = nullptr;
  for (const auto& [k, v] : a.kwargs)
    if (k == "attribute") attribute = &v;
  if (attribute) {
    Value dflt = Value::undefined();
    for (const auto& [k, v] : a.kwargs)
      if (k == "default") dflt = v;
    for (const Value& item : iterate(input)) {
      Value r = get_path(item, to_str(*attribute));
      out.push_back(r.is_undefined() && !dflt.is_undefined() ? dflt : r);
    }
  } else {
    if (a.args.empty()) fail(ErrorCode::invalid_argument, "map requires a filter name");
    std::string name = to_str(a.args[0]);
    List rest(a.args.begin() + 1, a.args.end());
    for (const Value& item : iterate(input)) {
      List args = rest;
      Kwargs kw = a.kwargs;
      out.push_back(apply_filter(in, name, item, args, kw));
    }
  }
  in.charge(out.size());
  return generator(std::move(out));
}

Value do_sort(Interpreter& in, const Value& input, const FilterArgs& a, bool unique) {
  bool reverse = !unique && a.flag(0, "reverse");
  bool case_sensitive = a.flag(unique ? 0 : 1, "case_sensitive");
  Value attribute = a.value(unique ? 1 : 2, "attribute", Value::none());
  List items = iterate(input);
  in.charge(items.size() * 4);
  auto key = [&](const Value& v) {
    return sort_key(attribute.is_none() ? v : get_path(v, to_str(attribute)), case_sensitive);
  };
  if (unique) {
    List out, seen;
    for (const Value& v : items) {
      Value k = key(v);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
        seen.push_back(k);
        out.push_back(v);
      }
    }
    return generator(std::move(out));
  }
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value::from_list(std::move(items));
}

Value do_dictsort(const Value& input, const FilterArgs& a) {
  if (!input.is_dict()) fail(ErrorCode::invalid_argument, "dictsort needs a mapping");
  bool case_sensitive = a.flag(0, "case_sensitive");
  std::string by = a.value(1, "by", Value::from_string("key")).text;
  bool reverse = a.flag(2, "reverse");
  int pos = by == "key" ? 0 : by == "value" ? 1 : -1;
  if (pos < 0)
    fail(ErrorCode::invalid_argument, "You can only sort by either \"key\" or \"value\"");
  List items;
  for (const auto& [k, v] : input.dict->items) items.push_back(Value::from_list({k, v}, true));
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key((*x.list)[static_cast<size_t>(pos)], case_sensitive);
    Value ky = sort_key((*y.list)[static_cast<size_t>(pos)], case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return Value::from_list(std::move(items));
}

Value do_join(Interpreter& in, const Value& input, const FilterArgs& a) {
  Marks sep_marks, marks;
  std::string sep = to_str_marked(a.value(0, "d", Value::from_string("")), sep_marks);
  Value attribute = a.value(1, "attribute", Value::none());
  Value out = Value::from_string("");
  bool first = true;
  for (const Value& v : iterate(input)) {
    if (!first) {
      marks_append(out.marks, sep_marks, out.text.size());
      out.text += sep;
    }
    first = false;
    std::string item =
        to_str_marked(attribute.is_none() ? v : get_path(v, to_str(attribute)), marks);
    marks_append(out.marks, marks, out.text.size());
    out.text += item;
    in.check_size(out.text.size());
  }
  return out;
}

Value do_minmax(const Value& input, const FilterArgs& a, bool want_max) {
  bool case_sensitive = a.flag(0, "case_sensitive");
  Value attribute = a.value(1, "attribute", Value::none());
  List items = iterate(input);
  if (items.empty()) return Value::undefined("", "");
  auto key = [&](const Value& v) {
    return sort_key(attribute.is_none() ? v : get_path(v, to_str(attribute)), case_sensitive);
  };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    bool better =
        want_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return items[best];
}

Value do_sum(Interpreter& in, const Value& input, const FilterArgs& a) {
  Value attribute = a.value(0, "attribute", Value::none());
  Value total = a.value(1, "start", Value::from_int(0));
  for (const Value& v : iterate(input))
    total = binary_op(in, "+", total, attribute.is_none() ? v : get_path(v, to_str(attribute)));
  return total;
}

long count_words(const std::string& s) {
  long n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    bool w = std::isalnum(c) || c == '_' || c >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

}  // namespace

bool filter_exists(const std::string& name) {
  return std::find_if(std::begin(kFilters), std::end(kFilters),
                      [&](const char* f) { return name == f; }) != std::end(kFilters);
}

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, List& args,
                   Kwargs& kwargs) {
  FilterArgs a{name, args, kwargs};
  if (name == "tojson") return do_tojson(input, a);
  if (name == "default" || name == "d") {
    bool boolean = a.flag(1, "boolean");
    if (input.is_undefined() || (boolean && !truthy(input)))
      return a.value(0, "default_value", Value::from_string(""));
    return input;
  }
  if (name == "length" || name == "count")
    return Value::from_int(static_cast<int64_t>(py_len(input)));
  if (name == "safe" || name == "string") {
    if (input.is_string() && (name == "string" || input.markup)) return input;
    Value r = Value::from_string("", name == "safe");
    r.text = to_str_marked(input, r.marks);
    return r;
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (input.markup && name != "forceescape") return input;
    return Value::from_string(html_escape(to_str(input)), true);
  }
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    std::string set = chars && !chars->is_none() ? to_str(*chars) : "";
    Value text = Value::from_string("", input.markup);
    text.text = to_str_marked(input, text.marks);
    const auto [begin, end] =
        py_strip_range(text.text, chars && !chars->is_none() ? &set : nullptr, StripSide::both);
    return substring(text, begin, end);
  }
  if (name == "upper") return Value::from_string(py_upper(to_str(input)), input.markup);
  if (name == "lower") return Value::from_string(py_lower(to_str(input)), input.markup);
  if (name == "capitalize") return Value::from_string(py_capitalize(to_str(input)), input.markup);
  if (name == "title") {
    Value r = jinja_title(to_str(input));
    r.markup = input.markup;
    return r;
  }
  if (name == "replace") {
    const Value* count = a.get(2, "count");
    std::string r = py_replace(to_str(input), to_str(a.value(0, "old", Value::from_string(""))),
                               to_str(a.value(1, "new", Value::from_string(""))),
                               count && !count->is_none() ? count->as_int() : -1);
    in.check_size(r.size());
    return Value::from_string(std::move(r));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::from_list({});
    if (!input.is_dict() || input.namespace_ || input.loop)
      fail(ErrorCode::invalid_argument, "Can only get item pairs from a mapping.");
    List none;
    Kwargs nokw;
    bool found = false;
    return call_method(in, input, "items", none, nokw, found);
  }
  if (name == "list") {
    List items = iterate(input);
    in.charge(items.size());
    return Value::from_list(std::move(items));
  }
  if (name == "first" || name == "last") {
    List items = iterate(input);
    if (items.empty()) return Value::undefined("", "No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::vector<std::string> cs = utf8_chars(input.text);
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value::from_string(out, input.markup);
    }
    List items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value::from_list(std::move(items));
  }
  if (name == "join") return do_join(in, input, a);
  if (name == "map") return do_map(in, input, a);
  if (name == "select" || name == "reject")
    return select_items(in, input, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr")
    return select_items(in, input, a, true, name == "selectattr");
  if (name == "sort") return do_sort(in, input, a, false);
  if (name == "unique") return do_sort(in, input, a, true);
  if (name == "dictsort") return do_dictsort(input, a);
  if (name == "int") return to_int(input, a);
  if (name == "float") return to_float(input, a);
  if (name == "round") return do_round(input, a);
  if (name == "abs") {
    if (input.kind == Kind::floating) return Value::from_float(std::fabs(input.number));
    if (input.is_integral())
      return binary_op(in, "*", Value::from_int(input.as_int() < 0 ? -1 : 1), input);
    fail(ErrorCode::invalid_argument, "bad operand type for abs(): '{}'", type_name(input));
  }
  if (name == "indent") return do_indent(input, a);
  if (name == "wordcount") return Value::from_int(count_words(to_str(input)));
  if (name == "min" || name == "max") return do_minmax(input, a, name == "max");
  if (name == "sum") return do_sum(in, input, a);
  if (name == "attr") return get_attr(input, to_str(a.value(0, "name", Value::from_string(""))));
  fail(ErrorCode::unsupported, "filter '{}' is not supported", name);
}

}  // namespace memra::jinja
