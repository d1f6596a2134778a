// Attribute and item access as jinja2's ImmutableSandboxedEnvironment resolves them (Python
// attribute first for `.`, item first for `[]`, Undefined when missing, SecurityError on calls of
// mutating methods such as list.append), slicing, and the str/dict/list methods templates call.
#include <algorithm>

#include "core/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/strings.h"

namespace memra::jinja {

namespace {

const char* const kStrMethods[] = {
    "strip",      "lstrip",       "rstrip",       "split",     "rsplit",    "splitlines",
    "startswith", "endswith",     "upper",        "lower",     "title",     "capitalize",
    "replace",    "find",         "rfind",        "index",     "rindex",    "count",
    "join",       "isdigit",      "isalpha",      "isalnum",   "isspace",   "isupper",
    "islower",    "removeprefix", "removesuffix", "format",    "partition", "rpartition",
    "casefold",   "swapcase",     "center",       "ljust",     "rjust",     "zfill",
    "encode",     "expandtabs",   "istitle",      "isnumeric", "isdecimal"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "copy"};
const char* const kDictUnsafe[] = {"pop", "popitem", "setdefault", "update", "clear", "fromkeys"};
const char* const kListMethods[] = {"index", "count", "copy"};
const char* const kListUnsafe[] = {"append", "extend",  "insert", "pop",
                                   "remove", "reverse", "sort",   "clear"};

template <size_t N>
bool in_table(const char* const (&table)[N], const std::string& name) {
  return std::find_if(std::begin(table), std::end(table),
                      [&](const char* m) { return name == m; }) != std::end(table);
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(
      name, "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
}

Value bound_method(const Value& obj, const std::string& name) {
  return Value::from_callable(name, [obj, name](Interpreter& in, List& args, Kwargs& kwargs) {
    bool found = false;
    Value r = call_method(in, obj, name, args, kwargs, found);
    if (!found)
      fail(ErrorCode::unsupported, "method '{}' of '{}' is not supported", name, type_name(obj));
    return r;
  });
}

// Python index normalization for element access; returns false when out of range.
bool normalize_index(int64_t& i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  return i >= 0 && i < static_cast<int64_t>(size);
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::undefined:
      undefined_error(obj);
    case Kind::string:
      if (!name.starts_with("_") && in_table(kStrMethods, name)) return bound_method(obj, name);
      return Value::undefined(name);
    case Kind::list:
      if (in_table(kListUnsafe, name)) return unsafe(obj, name);
      if (in_table(kListMethods, name)) return bound_method(obj, name);
      return Value::undefined(name);
    case Kind::dict: {
      if (!obj.namespace_ && !obj.loop) {
        if (in_table(kDictUnsafe, name)) return unsafe(obj, name);
        if (in_table(kDictMethods, name)) return bound_method(obj, name);
      }
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined(name);
    }
    default:
      return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::undefined:
      undefined_error(obj);
    case Kind::dict:
      if (!obj.namespace_ && !obj.loop) {
        if (const Value* v = obj.dict->find(key)) return *v;
      }
      break;
    case Kind::list:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (normalize_index(i, obj.list->size())) return (*obj.list)[static_cast<size_t>(i)];
        return Value::undefined();
      }
      break;
    case Kind::string:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (!normalize_index(i, utf8_length(obj.text))) return Value::undefined();
        size_t start = 0;  // byte offset of code point i: walk lead bytes, no allocation
        for (int64_t seen = -1; start < obj.text.size(); ++start) {
          if ((static_cast<unsigned char>(obj.text[start]) & 0xc0) != 0x80 && ++seen == i) break;
        }
        size_t end = start + 1;
        while (end < obj.text.size() && (static_cast<unsigned char>(obj.text[end]) & 0xc0) == 0x80)
          ++end;
        return substring(obj, start, end);
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.text);
  return Value::undefined();
}

Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  auto as_index = [](const Value& v, const char* what) -> int64_t {
    if (!v.is_integral())
      fail(ErrorCode::invalid_argument, "slice {} must be an integer or None, not {}", what,
           type_name(v));
    return v.as_int();
  };
  int64_t step = step_v.is_none() ? 1 : as_index(step_v, "step");
  if (step == 0) fail(ErrorCode::invalid_argument, "slice step cannot be zero");
  std::vector<size_t> bounds;  // byte offset where each code point starts, plus the end
  size_t size;
  if (obj.is_string()) {
    for (size_t b = 0; b < obj.text.size(); ++b)
      if ((static_cast<unsigned char>(obj.text[b]) & 0xc0) != 0x80) bounds.push_back(b);
    size = bounds.size();
    bounds.push_back(obj.text.size());
  } else if (obj.is_list()) {
    size = obj.list->size();
  } else {
    fail(ErrorCode::invalid_argument, "'{}' object is not subscriptable", type_name(obj));
  }
  const int64_t n = static_cast<int64_t>(size);
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t i = as_index(v, "index");
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
  int64_t stop = clamp(stop_v, step > 0 ? n : -1);
  std::vector<size_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    picks.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    std::string out;
    Marks marks;
    for (size_t i : picks) {
      if (!obj.marks.empty())
        marks_append(marks, marks_slice(obj.marks, bounds[i], bounds[i + 1]), out.size());
      out.append(obj.text, bounds[i], bounds[i + 1] - bounds[i]);
    }
    Value v = Value::from_string(std::move(out), obj.markup);
    v.marks = std::move(marks);
    return v;
  }
  List out;
  for (size_t i : picks) out.push_back((*obj.list)[i]);
  return Value::from_list(std::move(out), obj.tuple);
}

namespace {

struct ArgReader {
  const std::string& method;
  List& args;
  Kwargs& kwargs;

  const Value* get(size_t index, const char* name) const {
    if (index < args.size()) return &args[index];
    for (const auto& [k, v] : kwargs)
      if (k == name) return &v;
    return nullptr;
  }
  std::string str(size_t index, const char* name) const {
    const Value* v = get(index, name);
    if (!v || !v->is_string())
      fail(ErrorCode::invalid_argument, "{}() argument '{}' must be str", method, name);
    return v->text;
  }
  // An optional str argument that may be None.
  bool opt_str(size_t index, const char* name, std::string& out) const {
    const Value* v = get(index, name);
    if (!v || v->is_none()) return false;
    if (!v->is_string())
      fail(ErrorCode::invalid_argument, "{}() argument '{}' must be str or None", method, name);
    out = v->text;
    return true;
  }
  int64_t integer(size_t index, const char* name, int64_t dflt) const {
    const Value* v = get(index, name);
    if (!v) return dflt;
    if (!v->is_integral())
      fail(ErrorCode::invalid_argument, "{}() argument '{}' must be int", method, name);
    return v->as_int();
  }
};

Value string_list(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::from_string(p));
  return Value::from_list(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, const std::string& method) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      fail(ErrorCode::invalid_argument, "{}() arg must be str or a tuple of str", method);
    return prefix ? s.starts_with(a.text) : s.ends_with(a.text);
  };
  if (affix.is_list() && affix.tuple) {
    return std::any_of(affix.list->begin(), affix.list->end(), one);
  }
  return one(affix);
}

// str.format with plain fields ({}, {0}, {name}, !r/!s); format specs are refused by name.
Value str_format(Interpreter& in, const std::string& f, const ArgReader& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}')
        ++i;
      else
        fail(ErrorCode::invalid_argument, "Single '}}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos)
      fail(ErrorCode::invalid_argument, "Single '{{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    char conv = 's';
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 < field.size())
        fail(ErrorCode::unsupported, "str.format specs ('{}') are not supported", field);
      field.resize(colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's'))
        fail(ErrorCode::unsupported, "str.format conversion in '{}' is not supported", field);
      conv = field[bang + 1];
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.args.size())
        fail(ErrorCode::invalid_argument, "Replacement index {} out of range", auto_index);
      v = &a.args[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t k = std::stoul(field);
      if (k >= a.args.size())
        fail(ErrorCode::invalid_argument, "Replacement index {} out of range", k);
      v = &a.args[k];
    } else {
      for (const auto& [key, val] : a.kwargs)
        if (key == field) v = &val;
      if (!v) fail(ErrorCode::invalid_argument, "KeyError: '{}'", field);
    }
    out += conv == 'r' ? repr(*v) : to_str(*v);
    in.check_size(out.size());
  }
  return Value::from_string(std::move(out));
}

Value string_method(Interpreter& in, const Value& obj, const std::string& name, const ArgReader& a,
                    bool& found) {
  const std::string& s = obj.text;
  found = true;
  std::string chars;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool has = a.opt_str(0, "chars", chars);
    StripSide side = name == "strip"    ? StripSide::both
                     : name == "lstrip" ? StripSide::left
                                        : StripSide::right;
    const auto [begin, end] = py_strip_range(s, has ? &chars : nullptr, side);
    return substring(obj, begin, end);
  }
  if (name == "split" || name == "rsplit") {
    bool has = a.opt_str(0, "sep", chars);
    if (has && chars.empty()) fail(ErrorCode::invalid_argument, "empty separator");
    auto parts =
        py_split(s, has ? &chars : nullptr, a.integer(1, "maxsplit", -1), name == "rsplit");
    in.charge(parts.size());
    return string_list(parts);
  }
  if (name == "splitlines") {
    const Value* k = a.get(0, "keepends");
    return string_list(py_splitlines(s, k && truthy(*k)));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* affix = a.get(0, "prefix");
    if (!affix) fail(ErrorCode::invalid_argument, "{}() takes at least 1 argument", name);
    return Value::from_bool(affix_match(s, *affix, name == "startswith", name));
  }
  if (name == "upper") return Value::from_string(py_upper(s), obj.markup);
  if (name == "lower" || name == "casefold") return Value::from_string(py_lower(s), obj.markup);
  if (name == "title") return Value::from_string(py_title(s), obj.markup);
  if (name == "capitalize") return Value::from_string(py_capitalize(s), obj.markup);
  if (name == "replace") {
    std::string r = py_replace(s, a.str(0, "old"), a.str(1, "new"), a.integer(2, "count", -1));
    in.check_size(r.size());
    return Value::from_string(std::move(r), obj.markup);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    std::string sub = a.str(0, "sub");
    if (a.get(1, "start"))
      fail(ErrorCode::unsupported, "str.{}() with start/end is not supported", name);
    size_t at = name == "find" || name == "index" ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex")
        fail(ErrorCode::invalid_argument, "substring not found");
      return Value::from_int(-1);
    }
    return Value::from_int(static_cast<int64_t>(utf8_length(s.substr(0, at))));
  }
  if (name == "count") return Value::from_int(py_count(s, a.str(0, "sub")));
  if (name == "format") return str_format(in, s, a);
  if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (!items) fail(ErrorCode::invalid_argument, "join() takes exactly one argument");
    Value out = Value::from_string("");
    bool first = true;
    for (const Value& v : iterate(*items)) {
      if (!v.is_string())
        fail(ErrorCode::invalid_argument, "sequence item: expected str instance, {} found",
             type_name(v));
      if (!first) {
        marks_append(out.marks, obj.marks, out.text.size());
        out.text += s;
      }
      first = false;
      marks_append(out.marks, v.marks, out.text.size());
      out.text += v.text;
      in.check_size(out.text.size());
    }
    return out;
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string affix = a.str(0, "affix");
    if (name == "removeprefix" && s.starts_with(affix))
      return Value::from_string(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.ends_with(affix))
      return Value::from_string(s.substr(0, s.size() - affix.size()));
    return Value::from_string(s);
  }
  auto all_chars = [&](auto pred) {
    if (s.empty()) return Value::from_bool(false);
    return Value::from_bool(std::all_of(
        s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); }));
  };
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return all_chars([](unsigned char c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return all_chars([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all_chars([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") {
    std::string stripped = py_strip(s, nullptr, StripSide::both);
    return Value::from_bool(!s.empty() && stripped.empty());
  }
  if (name == "isupper" || name == "islower") {
    bool any_cased = false, ok = true;
    for (char c : s) {
      if (std::isupper(static_cast<unsigned char>(c)))
        any_cased = true, ok = ok && name == "isupper";
      if (std::islower(static_cast<unsigned char>(c)))
        any_cased = true, ok = ok && name == "islower";
    }
    return Value::from_bool(any_cased && ok);
  }
  found = false;
  return Value::undefined();
}

}  // namespace

Value call_method(Interpreter& in, const Value& obj, const std::string& name, List& args,
                  Kwargs& kwargs, bool& found) {
  ArgReader a{name, args, kwargs};
  found = false;
  if (obj.is_string()) return string_method(in, obj, name, a, found);
  if (obj.is_dict() && !obj.namespace_ && !obj.loop) {
    found = true;
    const Dict& d = *obj.dict;
    if (name == "items" || name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : d.items) {
        if (name == "items")
          out.push_back(Value::from_list({k, v}, true));
        else
          out.push_back(name == "keys" ? k : v);
      }
      in.charge(out.size());
      return Value::from_list(std::move(out));
    }
    if (name == "get") {
      const Value* key = a.get(0, "key");
      if (!key) fail(ErrorCode::invalid_argument, "get expected at least 1 argument, got 0");
      if (const Value* v = d.find(*key)) return *v;
      const Value* dflt = a.get(1, "default");
      return dflt ? *dflt : Value::none();
    }
    if (name == "copy") return Value::from_dict(std::make_shared<Dict>(d));
    if (in_table(kDictUnsafe, name)) undefined_error(unsafe(obj, name));
    found = false;
    return Value::undefined();
  }
  if (obj.is_list()) {
    found = true;
    if (name == "index" || name == "count") {
      const Value* x = a.get(0, "value");
      if (!x) fail(ErrorCode::invalid_argument, "{}() takes exactly one argument", name);
      int64_t n = 0;
      for (size_t i = 0; i < obj.list->size(); ++i) {
        if (!equals((*obj.list)[i], *x)) continue;
        if (name == "index") return Value::from_int(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") fail(ErrorCode::invalid_argument, "value is not in list");
      return Value::from_int(n);
    }
    if (name == "copy") return Value::from_list(*obj.list, obj.tuple);
    if (in_table(kListUnsafe, name)) undefined_error(unsafe(obj, name));
    found = false;
  }
  return Value::undefined();
}

}  // namespace memra::jinja
