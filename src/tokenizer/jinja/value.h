// Runtime values of the Jinja interpreter, modelled on the Python objects jinja2 works with:
// None, bool, int (64-bit here; overflow is an error), float, str (UTF-8, lengths and slices in
// code points), list/tuple, dict (insertion-ordered), callables, namespaces and Undefined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::jinja {

class Interpreter;
struct Value;

enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, callable };

using List = std::vector<Value>;

struct Dict;

// Keyword arguments keep call order, as Python passes them.
using Kwargs = std::vector<std::pair<std::string, Value>>;

// A byte range [begin, end) of a string.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const Span&) const = default;
};
// The bytes of a string that came from the client (strings of the render context other than the
// server's own variables), sorted, disjoint and not adjacent. The chat path tokenizes them with
// special-token matching off; see ChatTemplate::render_marked.
using Marks = std::vector<Span>;

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, List& args, Kwargs& kwargs)> call;
};

struct Value {
  Kind kind = Kind::undefined;
  bool boolean = false;
  bool markup = false;      // a markupsafe.Markup string: `+` with plain text escapes that text
  bool tuple = false;       // a list that prints as a Python tuple
  bool namespace_ = false;  // a dict created by namespace(): attribute assignment allowed
  bool loop = false;        // a dict that is the `loop` object (attributes only)
  bool generator = false;   // a list from map/select/reject: a Python generator in jinja2, which
                            // tojson and length refuse (other uses behave as the list)
  int nest = 0;             // list nesting depth (bounded so deep values cannot overflow the stack)
  int64_t integer = 0;
  double number = 0;
  std::string text;  // str contents; for Undefined, the name that was missing
  std::string hint;  // for Undefined: an error to raise when it is used (sandbox refusals)
  Marks marks;       // str: which bytes of `text` are the client's
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Callable> callable;

  static Value none();
  static Value undefined(std::string name = {}, std::string hint = {});
  static Value from_bool(bool b);
  static Value from_int(int64_t i);
  static Value from_float(double d);
  static Value from_string(std::string s, bool markup = false);
  static Value from_list(List items, bool tuple = false);
  static Value from_dict(std::shared_ptr<Dict> dict);
  static Value from_callable(std::string name,
                             std::function<Value(Interpreter&, List&, Kwargs&)> call);
  // `client`: every string in it (dict keys too) is marked as the client's.
  static Value from_json(const nlohmann::ordered_json& json, bool client = false);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_number() const {
    return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean;
  }
  bool is_integral() const { return kind == Kind::integer || kind == Kind::boolean; }
  bool is_list() const { return kind == Kind::list; }
  bool is_dict() const { return kind == Kind::dict; }
  int64_t as_int() const { return kind == Kind::boolean ? (boolean ? 1 : 0) : integer; }
  double as_double() const;
};

// Containers nest at most this deep; deeper values (or cycles through namespaces) are refused.
constexpr int kMaxNest = 200;

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int nest = 1;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value value);
};

// Nesting depth of a value: 0 for scalars.
int nest_of(const Value& v);

// Python type name, for error messages ('str', 'int', 'list', ...).
const char* type_name(const Value& v);
// Python truthiness.
bool truthy(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python <, raising TypeError-like errors on incomparable types.
bool less(const Value& a, const Value& b);
// str(v) as jinja2 prints it (Undefined prints as '').
std::string to_str(const Value& v);
// repr(v) as Python writes it, used for containers.
std::string repr(const Value& v);
// Python float repr: shortest round-trip digits, '1.0', '1e+16', 'inf', 'nan'.
std::string float_repr(double d);
// markupsafe.escape on text.
std::string html_escape(const std::string& s);
// Converts to JSON for tojson; refuses (like json.dumps) what is not serializable.
std::string json_dumps(const Value& v, int indent, bool has_indent, const std::string& item_sep,
                       const std::string& key_sep, bool sort_keys, bool ensure_ascii);

// Client-text marks (Value::marks). Operations that build a string from parts keep the parts'
// marks byte for byte (concatenation, printing, slicing, strip, join); any other operation whose
// inputs held client text marks its whole result (mark_derived), so client bytes never lose their
// mark, at worst some template bytes gain one.
//
// Whether any string in `v` (list items, dict keys and values, nested) holds client text.
bool has_marks(const Value& v);
// Marks of bytes [begin, end) of `marks`, shifted to start at 0.
Marks marks_slice(const Marks& marks, size_t begin, size_t end);
// Appends `add` (marks of a string appended at byte offset `offset`), merging adjacent spans.
void marks_append(Marks& marks, const Marks& add, size_t offset);
// str(v) with its marks: a string's own; any other value's text is wholly the client's when it
// holds client text (repr of a list of messages, a number needs none).
std::string to_str_marked(const Value& v, Marks& marks);
// `v` made from a substring [begin, end) of `source` (same markup flag), keeping its marks.
Value substring(const Value& source, size_t begin, size_t end);
// A string result built from inputs that held client text becomes the client's as a whole; so do
// the unmarked strings of a list result made from a marked string (split, list). Results that
// carry marks already (an element handed back) are left as they are.
void mark_derived(Value& result, bool inputs_marked);

// UTF-8 helpers: Python str indexes code points.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace memra::jinja
