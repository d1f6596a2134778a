// Value construction, Python semantics for truthiness/equality/ordering, and the text forms jinja2
// produces: str() for printing, repr() for containers, float repr, HTML escape and json.dumps.
#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace memra::jinja {

Value Value::none() {
  Value v;
  v.kind = Kind::none;
  return v;
}
Value Value::undefined(std::string name, std::string hint) {
  Value v;
  v.text = std::move(name);
  v.hint = std::move(hint);
  return v;
}
Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::boolean;
  v.boolean = b;
  return v;
}
Value Value::from_int(int64_t i) {
  Value v;
  v.kind = Kind::integer;
  v.integer = i;
  return v;
}
Value Value::from_float(double d) {
  Value v;
  v.kind = Kind::floating;
  v.number = d;
  return v;
}
Value Value::from_string(std::string s, bool markup) {
  Value v;
  v.kind = Kind::string;
  v.text = std::move(s);
  v.markup = markup;
  return v;
}
int nest_of(const Value& v) {
  if (v.kind == Kind::list) return v.nest;
  if (v.kind == Kind::dict) return v.dict->nest;
  return 0;
}

namespace {

[[noreturn]] void too_deep() {
  fail(ErrorCode::resource_exhausted, "value nested deeper than {} levels", kMaxNest);
}

// Bounds recursion of repr/equality/ordering (deep values, cycles through namespaces).
thread_local int g_walk_depth = 0;
struct WalkGuard {
  WalkGuard() {
    if (++g_walk_depth > kMaxNest + 8) {
      --g_walk_depth;
      too_deep();
    }
  }
  ~WalkGuard() { --g_walk_depth; }
  WalkGuard(const WalkGuard&) = delete;
  WalkGuard& operator=(const WalkGuard&) = delete;
};

}  // namespace

Value Value::from_list(List items, bool tuple) {
  Value v;
  for (const Value& item : items) v.nest = std::max(v.nest, nest_of(item));
  if (++v.nest > kMaxNest) too_deep();
  v.kind = Kind::list;
  v.list = std::make_shared<List>(std::move(items));
  v.tuple = tuple;
  return v;
}
Value Value::from_dict(std::shared_ptr<Dict> dict) {
  Value v;
  v.kind = Kind::dict;
  v.dict = std::move(dict);
  return v;
}
Value Value::from_callable(std::string name,
                           std::function<Value(Interpreter&, List&, Kwargs&)> call) {
  Value v;
  v.kind = Kind::callable;
  v.callable = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

namespace {
Value json_value(const nlohmann::ordered_json& j, int depth, bool client);
}

Value Value::from_json(const nlohmann::ordered_json& j, bool client) {
  return json_value(j, 0, client);
}

namespace {

Value client_string(std::string s, bool client) {
  Value v = Value::from_string(std::move(s));
  if (client && !v.text.empty()) v.marks.push_back({0, v.text.size()});
  return v;
}

Value json_value(const nlohmann::ordered_json& j, int depth, bool client) {
  if (depth > kMaxNest) too_deep();
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::from_bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::from_int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        fail(ErrorCode::invalid_argument, "integer too large");
      return Value::from_int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::from_float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return client_string(j.get<std::string>(), client);
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(json_value(e, depth + 1, client));
      return Value::from_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, e] : j.items()) {
        Value v = json_value(e, depth + 1, client);
        d->nest = std::max(d->nest, nest_of(v) + 1);
        if (d->nest > kMaxNest) too_deep();
        d->items.emplace_back(client_string(k, client), std::move(v));
      }
      return Value::from_dict(std::move(d));
    }
    default:
      fail(ErrorCode::invalid_argument, "context holds an unsupported JSON value");
  }
}

}  // namespace

double Value::as_double() const {
  if (kind == Kind::floating) return number;
  return static_cast<double>(as_int());
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}
const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Kind::string && k.text == key) return &v;
  return nullptr;
}
void Dict::set(const Value& key, Value value) {
  int n = std::max(nest_of(key), nest_of(value)) + 1;
  if (n > kMaxNest) too_deep();
  nest = std::max(nest, n);
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return v.markup ? "Markup" : "str";
    case Kind::list:
      return v.generator ? "generator" : v.tuple ? "tuple" : "list";
    case Kind::dict:
      return v.namespace_ ? "Namespace" : v.loop ? "LoopContext" : "dict";
    case Kind::callable:
      return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return v.boolean;
    case Kind::integer:
      return v.integer != 0;
    case Kind::floating:
      return v.number != 0.0;
    case Kind::string:
      return !v.text.empty();
    case Kind::list:
      return !v.list->empty();
    case Kind::dict:
      return v.namespace_ || v.loop || !v.dict->items.empty();
    case Kind::callable:
      return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  WalkGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::floating || b.kind == Kind::floating) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::undefined:
    case Kind::none:
      return true;
    case Kind::string:
      return a.text == b.text;
    case Kind::list: {
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      return true;
    }
    case Kind::dict: {
      if (a.namespace_ || b.namespace_ || a.loop || b.loop) return a.dict == b.dict;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::callable:
      return a.callable == b.callable;
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  WalkGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::floating || b.kind == Kind::floating) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::string && b.kind == Kind::string) return a.text < b.text;
  if (a.kind == Kind::list && b.kind == Kind::list && a.tuple == b.tuple) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t i = 0; i < n; ++i) {
      if (!equals((*a.list)[i], (*b.list)[i])) return less((*a.list)[i], (*b.list)[i]);
    }
    return a.list->size() < b.list->size();
  }
  fail(ErrorCode::invalid_argument, "'<' not supported between instances of '{}' and '{}'",
       type_name(a), type_name(b));
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+05": split into sign, digits and exponent.
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits += c;
  int decpt = exp + 1;
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." +
            digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
  }
  return sign + out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Decodes one UTF-8 code point at s[i] (advancing i); invalid bytes decode as themselves.
uint32_t decode_utf8(const std::string& s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
  if (i + static_cast<size_t>(len) > s.size()) len = 1;
  uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1fu) : len == 3 ? (b & 0x0fu) : (b & 0x07u);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3fu);
  i += static_cast<size_t>(len);
  return cp;
}

// Code points Python's str.isprintable() rejects among those that occur in practice.
bool non_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return true;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f)) return true;
  if ((cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff) return true;
  if ((cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0xe000 && cp <= 0xf8ff)) return true;
  return cp == 0xfff9 || cp == 0xfffa || cp == 0xfffb;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = decode_utf8(s, i);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (non_printable(cp)) {
      char buf[16];
      if (cp <= 0xff)
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      else
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      out += buf;
    } else {
      out.append(s, start, i - start);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string repr(const Value& v) {
  WalkGuard guard;
  switch (v.kind) {
    case Kind::string:
      return v.markup ? "Markup(" + string_repr(v.text) + ")" : string_repr(v.text);
    case Kind::undefined:
      return "Undefined";
    case Kind::list: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += ", ";
        out += repr((*v.list)[i]);
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Kind::dict: {
      if (v.loop) return "<LoopContext>";
      std::string out = v.namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, e] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(e);
      }
      return out + (v.namespace_ ? "}>" : "}");
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
      return "";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return v.boolean ? "True" : "False";
    case Kind::integer:
      return std::to_string(v.integer);
    case Kind::floating:
      return float_repr(v.number);
    case Kind::string:
      return v.text;
    case Kind::callable:
      return "<function " + v.callable->name + ">";
    default:
      return repr(v);
  }
}

bool has_marks(const Value& v) {
  if (v.is_string()) return !v.marks.empty();
  if (v.is_list()) {
    WalkGuard guard;
    return std::any_of(v.list->begin(), v.list->end(), [](const Value& e) { return has_marks(e); });
  }
  if (v.is_dict()) {
    WalkGuard guard;
    for (const auto& [k, e] : v.dict->items)
      if (has_marks(k) || has_marks(e)) return true;
  }
  return false;
}

Marks marks_slice(const Marks& marks, size_t begin, size_t end) {
  Marks out;
  for (const Span& s : marks) {
    const size_t b = std::max(s.begin, begin), e = std::min(s.end, end);
    if (b < e) out.push_back({b - begin, e - begin});
  }
  return out;
}

void marks_append(Marks& marks, const Marks& add, size_t offset) {
  for (const Span& s : add) {
    if (s.begin == s.end) continue;
    if (!marks.empty() && marks.back().end == s.begin + offset)
      marks.back().end = s.end + offset;
    else
      marks.push_back({s.begin + offset, s.end + offset});
  }
}

std::string to_str_marked(const Value& v, Marks& marks) {
  marks.clear();
  if (v.is_string()) {
    marks = v.marks;
    return v.text;
  }
  std::string text = to_str(v);
  if (!text.empty() && (v.is_list() || v.is_dict()) && has_marks(v))
    marks.push_back({0, text.size()});
  return text;
}

Value substring(const Value& source, size_t begin, size_t end) {
  Value v = Value::from_string(source.text.substr(begin, end - begin), source.markup);
  v.marks = marks_slice(source.marks, begin, end);
  return v;
}

void mark_derived(Value& result, bool inputs_marked) {
  if (!inputs_marked) return;
  if (result.is_string()) {
    if (result.marks.empty() && !result.text.empty())
      result.marks.push_back({0, result.text.size()});
    return;
  }
  if (result.is_list()) {
    // A fresh list of fresh strings (split, list): copy on write, the list may be shared.
    List items = *result.list;
    bool changed = false;
    for (Value& e : items) {
      if (e.is_string() && e.marks.empty() && !e.text.empty()) {
        e.marks.push_back({0, e.text.size()});
        changed = true;
      }
    }
    if (changed) result.list = std::make_shared<List>(std::move(items));
  }
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    decode_utf8(s, i);
    out.emplace_back(s, start, i - start);
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

namespace {

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = decode_utf8(s, i);
    char buf[16];
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7f)) {
      if (cp >= 0x10000) {
        uint32_t u = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (u >> 10), 0xdc00 + (u & 0x3ff));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
    } else {
      out.append(s, start, i - start);
    }
  }
  out += '"';
}

struct JsonWriter {
  int indent;
  bool has_indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  bool ensure_ascii;
  std::string out;

  void newline(int depth) {
    if (!has_indent) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
  }

  std::string key_text(const Value& k) {
    switch (k.kind) {
      case Kind::string:
        return k.text;
      case Kind::integer:
        return std::to_string(k.integer);
      case Kind::boolean:
        return k.boolean ? "true" : "false";
      case Kind::none:
        return "null";
      case Kind::floating:
        return float_repr(k.number);
      default:
        fail(ErrorCode::invalid_argument, "keys must be str, int, float, bool or None, not {}",
             type_name(k));
    }
  }

  void write(const Value& v, int depth) {
    if (depth > 512) fail(ErrorCode::resource_exhausted, "tojson: value nested too deeply");
    switch (v.kind) {
      case Kind::none:
        out += "null";
        return;
      case Kind::boolean:
        out += v.boolean ? "true" : "false";
        return;
      case Kind::integer:
        out += std::to_string(v.integer);
        return;
      case Kind::floating:
        if (std::isnan(v.number))
          out += "NaN";
        else if (std::isinf(v.number))
          out += v.number < 0 ? "-Infinity" : "Infinity";
        else
          out += float_repr(v.number);
        return;
      case Kind::string:
        json_string(v.text, ensure_ascii, out);
        return;
      case Kind::list:
        if (v.generator) break;
        write_list(*v.list, depth);
        return;
      case Kind::dict:
        if (v.namespace_ || v.loop) break;
        write_dict(*v.dict, depth);
        return;
      default:
        break;
    }
    fail(ErrorCode::invalid_argument, "Object of type {} is not JSON serializable", type_name(v));
  }

  void write_list(const List& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(depth + 1);
      write(items[i], depth + 1);
    }
    newline(depth);
    out += ']';
  }

  void write_dict(const Dict& dict, int depth) {
    if (dict.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [k, e] : dict.items) entries.emplace_back(key_text(k), &e);
    if (sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += item_sep;
      newline(depth + 1);
      json_string(entries[i].first, ensure_ascii, out);
      out += key_sep;
      write(*entries[i].second, depth + 1);
    }
    newline(depth);
    out += '}';
  }
};

}  // namespace

std::string json_dumps(const Value& v, int indent, bool has_indent, const std::string& item_sep,
                       const std::string& key_sep, bool sort_keys, bool ensure_ascii) {
  JsonWriter w{indent, has_indent, item_sep, key_sep, sort_keys, ensure_ascii, {}};
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace memra::jinja
