// JSON schema -> grammar nodes. Supports the subset that can be enforced byte by byte without
// lookahead (docs/SERVING.md lists it) and refuses everything else by keyword and path, so a
// request never gets output that only might match its schema. Objects with declared properties
// generate only those properties (a valid subset of what the schema allows even when
// additionalProperties is absent or true).
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "structured/grammar_builder_impl.h"

namespace memra::structured {

namespace {

using nlohmann::json;

constexpr int kMaxSchemaNesting = 64;  // schema objects inside schema objects (stack bound)
constexpr size_t kMaxKeyBytes = 4096;  // one property name, escaped (the matcher counts in 16 bits)

bool known_type(const std::string& type) {
  return type == "string" || type == "number" || type == "integer" || type == "boolean" ||
         type == "null" || type == "object" || type == "array";
}

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> kSet = {"title",    "description", "default",  "examples",
                                             "$schema",  "$id",         "$comment", "deprecated",
                                             "readOnly", "writeOnly",   "strict"};
  return kSet;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> kSet = {
      "type",  "properties", "required",   "additionalProperties",
      "items", "minItems",   "maxItems",   "enum",
      "const", "anyOf",      "oneOf",      "nullable",
      "$ref",  "$defs",      "definitions"};
  return kSet;
}

std::string show(const std::string& path) {
  return path.empty() ? "the top level" : path;
}

std::string join(const std::string& path, const std::string& part) {
  return path.empty() ? part : path + "." + part;
}

bool has(const json& s, const char* key) {
  return s.contains(key);
}

bool matches_type(const json& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    // floor, not a cast to an integer type: 1e300 is an integer too, and the cast would be UB.
    const double d = value.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  return false;
}

bool accepts_null(const GrammarNode* node) {
  if (node->kind == NodeKind::choice) {
    return std::find(node->keys.begin(), node->keys.end(), "null") != node->keys.end();
  }
  if (node->kind == NodeKind::union_) {
    return std::any_of(node->items.begin(), node->items.end(), accepts_null);
  }
  return false;
}

class SchemaCompiler {
 public:
  SchemaCompiler(BuilderState& impl, const json& root) : impl_(impl), root_(root) {}

  GrammarNode* compile(const json& s, const std::string& path) {
    if (++nesting_ > kMaxSchemaNesting) {
      fail(ErrorCode::invalid_argument, "JSON schema at {} is nested more than {} levels deep",
           show(path), kMaxSchemaNesting);
    }
    GrammarNode* node = compile_unnested(s, path);
    --nesting_;
    return node;
  }

 private:
  GrammarNode* compile_unnested(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return impl_.any_json_value();
      fail(ErrorCode::invalid_argument, "JSON schema false at {} admits no value", show(path));
    }
    if (!s.is_object()) {
      fail(ErrorCode::invalid_argument, "JSON schema at {} must be an object or a boolean",
           show(path));
    }
    for (const auto& [key, value] : s.items()) {
      if (annotation_keywords().count(key) == 0 && supported_keywords().count(key) == 0) {
        fail(ErrorCode::unsupported,
             "JSON schema keyword '{}' at {} is not supported by constrained decoding", key,
             show(path));
      }
    }
    if (has(s, "$ref")) {
      refuse_siblings(s, path, "$ref", {});
      return resolve_ref(s["$ref"], path);
    }
    GrammarNode* node = compile_base(s, path);
    if (has(s, "nullable")) {
      if (!s["nullable"].is_boolean()) {
        fail(ErrorCode::invalid_argument, "'nullable' at {} must be a boolean", show(path));
      }
      if (s["nullable"].get<bool>() && !accepts_null(node)) {
        node = make_union({node, impl_.null()}, path);
      }
    }
    return node;
  }

  // Keywords next to `what` (a $ref, enum/const, anyOf/oneOf) other than annotations and `allowed`
  // would add constraints this compiler does not combine; refuse them by name.
  void refuse_siblings(const json& s, const std::string& path, const char* what,
                       const std::set<std::string>& allowed) {
    for (const auto& [key, value] : s.items()) {
      if (annotation_keywords().count(key) || allowed.count(key) || key == "$defs" ||
          key == "definitions" || key == what) {
        continue;
      }
      fail(ErrorCode::unsupported,
           "JSON schema keyword '{}' next to '{}' at {} is not supported by constrained decoding",
           key, what, show(path));
    }
  }

  GrammarNode* make_union(std::vector<GrammarNode*> branches, const std::string& path) {
    GrammarNode* node = impl_.make(NodeKind::union_);
    node->path = path;
    for (GrammarNode* branch : branches) {
      if (branch->kind == NodeKind::union_) {
        node->items.insert(node->items.end(), branch->items.begin(), branch->items.end());
      } else {
        node->items.push_back(branch);
      }
    }
    if (node->items.size() > static_cast<size_t>(impl_.limits.max_choices)) {
      fail(ErrorCode::invalid_argument, "JSON schema at {} has {} alternatives; the limit is {}",
           show(path), node->items.size(), impl_.limits.max_choices);
    }
    return node;
  }

  GrammarNode* resolve_ref(const json& ref_value, const std::string& path) {
    if (!ref_value.is_string()) {
      fail(ErrorCode::invalid_argument, "'$ref' at {} must be a string", show(path));
    }
    const std::string ref = ref_value.get<std::string>();
    if (ref.empty() || ref[0] != '#') {
      fail(ErrorCode::unsupported,
           "$ref '{}' at {}: only local references (#/$defs/...) are supported", ref, show(path));
    }
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    const json* target = nullptr;
    try {
      target = &root_.at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      fail(ErrorCode::invalid_argument, "$ref '{}' at {} does not resolve in this schema", ref,
           show(path));
    }
    GrammarNode* placeholder = impl_.make(NodeKind::unresolved);
    placeholder->path = path;
    refs_[ref] = placeholder;
    std::string target_path = ref.size() > 2 ? ref.substr(2) : "";
    std::replace(target_path.begin(), target_path.end(), '/', '.');
    const GrammarNode* compiled = compile(*target, target_path);
    if (compiled->kind == NodeKind::unresolved) {
      fail(ErrorCode::invalid_argument, "$ref '{}' at {} is a cycle of references", ref,
           show(path));
    }
    const int32_t id = placeholder->id;
    *placeholder = *compiled;  // recursive uses already point at the placeholder
    placeholder->id = id;
    return placeholder;
  }

  GrammarNode* compile_base(const json& s, const std::string& path) {
    if (has(s, "enum") || has(s, "const")) return compile_enum(s, path);
    if (has(s, "anyOf") || has(s, "oneOf")) return compile_any_of(s, path);
    std::vector<std::string> types = type_list(s, path);
    std::vector<GrammarNode*> branches;
    for (const std::string& type : types) branches.push_back(compile_type(s, type, path));
    return branches.size() == 1 ? branches[0] : make_union(branches, path);
  }

  std::vector<std::string> type_list(const json& s, const std::string& path) {
    std::vector<std::string> types;
    if (has(s, "type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& item : t) {
          if (!item.is_string()) {
            fail(ErrorCode::invalid_argument, "'type' at {} must list strings", show(path));
          }
          types.push_back(item.get<std::string>());
        }
      } else {
        fail(ErrorCode::invalid_argument,
             "'type' at {} must be a string or a non-empty list of strings", show(path));
      }
      for (const std::string& type : types) {
        if (!known_type(type)) {
          fail(ErrorCode::invalid_argument, "'type' at {} names an unknown type '{}'", show(path),
               type);
        }
      }
    } else {
      const bool object_keys =
          has(s, "properties") || has(s, "required") || has(s, "additionalProperties");
      const bool array_keys = has(s, "items") || has(s, "minItems") || has(s, "maxItems");
      if (object_keys) types.push_back("object");
      if (array_keys) types.push_back("array");
      if (types.empty()) types.push_back("any");
    }
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    // A number branch also writes every integer.
    const bool number = std::find(types.begin(), types.end(), "number") != types.end();
    if (number) std::erase(types, std::string("integer"));
    return types;
  }

  GrammarNode* compile_type(const json& s, const std::string& type, const std::string& path) {
    if (type == "any") return impl_.any_json_value();
    if (type == "object") return compile_object(s, path);
    if (type == "array") return compile_array(s, path);
    if (type == "boolean") return impl_.boolean();
    if (type == "null") return impl_.null();
    if (type == "string") return impl_.make(NodeKind::string);
    if (type == "number") return impl_.make(NodeKind::number);
    if (type == "integer") return impl_.make(NodeKind::integer);
    fail(ErrorCode::invalid_argument, "'type' at {} names an unknown type '{}'", show(path), type);
  }

  GrammarNode* compile_any_of(const json& s, const std::string& path) {
    if (has(s, "anyOf") && has(s, "oneOf")) {
      fail(ErrorCode::unsupported, "'anyOf' together with 'oneOf' at {} is not supported",
           show(path));
    }
    const char* keyword = has(s, "anyOf") ? "anyOf" : "oneOf";
    refuse_siblings(s, path, keyword, {"nullable"});
    const json& list = s[keyword];
    if (!list.is_array() || list.empty()) {
      fail(ErrorCode::invalid_argument, "'{}' at {} must be a non-empty array of schemas", keyword,
           show(path));
    }
    // Branches with disjoint first bytes never both match, so oneOf and anyOf coincide here.
    std::vector<GrammarNode*> branches;
    for (size_t i = 0; i < list.size(); ++i) {
      branches.push_back(compile(list[i], join(path, fmt::format("{}[{}]", keyword, i))));
    }
    return branches.size() == 1 ? branches[0] : make_union(branches, join(path, keyword));
  }

  GrammarNode* compile_enum(const json& s, const std::string& path) {
    refuse_siblings(s, path, has(s, "enum") ? "enum" : "const", {"type", "nullable", "const"});
    std::vector<json> values;
    if (has(s, "enum")) {
      const json& list = s["enum"];
      if (!list.is_array() || list.empty()) {
        fail(ErrorCode::invalid_argument, "'enum' at {} must be a non-empty array", show(path));
      }
      for (const json& v : list) {
        if (!has(s, "const") || v == s["const"]) values.push_back(v);
      }
    } else {
      values.push_back(s["const"]);
    }
    if (has(s, "type")) {
      const std::vector<std::string> types = type_list(s, path);
      std::erase_if(values, [&](const json& v) {
        return std::none_of(types.begin(), types.end(),
                            [&](const std::string& t) { return matches_type(v, t); });
      });
    }
    if (values.empty()) {
      fail(ErrorCode::invalid_argument, "no enum/const value at {} matches its type", show(path));
    }
    std::vector<std::string> keys;
    for (const json& v : values) {
      try {
        keys.push_back(v.dump());
      } catch (const json::exception&) {
        fail(ErrorCode::invalid_argument, "enum value at {} is not valid UTF-8", show(path));
      }
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (keys.size() > static_cast<size_t>(impl_.limits.max_choices)) {
      fail(ErrorCode::invalid_argument, "enum at {} has {} values; the limit is {}", show(path),
           keys.size(), impl_.limits.max_choices);
    }
    GrammarNode* node = impl_.make(NodeKind::choice);
    node->next.assign(keys.size(), nullptr);
    node->keys = std::move(keys);
    return node;
  }

  GrammarNode* compile_object(const json& s, const std::string& path);
  GrammarNode* compile_array(const json& s, const std::string& path);
  uint32_t item_count(const json& s, const char* key, uint32_t absent, const std::string& path);

  BuilderState& impl_;
  const json& root_;
  std::map<std::string, GrammarNode*> refs_;
  int nesting_ = 0;
};

GrammarNode* SchemaCompiler::compile_object(const json& s, const std::string& path) {
  GrammarNode* node = impl_.make(NodeKind::object);
  node->path = path;
  const json empty = json::object();
  const json& props = has(s, "properties") ? s["properties"] : empty;
  if (!props.is_object()) {
    fail(ErrorCode::invalid_argument, "'properties' at {} must be an object", show(path));
  }
  const size_t limit = std::min<size_t>(64, static_cast<size_t>(impl_.limits.max_choices));
  if (props.size() > limit) {
    fail(ErrorCode::invalid_argument, "object at {} declares {} properties; the limit is {}",
         show(path), props.size(), limit);
  }
  for (const auto& [name, sub] : props.items()) {
    ObjectProperty prop;
    prop.key_text = json(name).dump().substr(1);  // escaped key and closing quote
    if (prop.key_text.size() > kMaxKeyBytes) {
      fail(ErrorCode::invalid_argument, "a property name at {} is longer than {} bytes", show(path),
           kMaxKeyBytes);
    }
    prop.value = compile(sub, join(join(path, "properties"), name));
    node->properties.push_back(std::move(prop));
  }
  std::sort(node->properties.begin(), node->properties.end(),
            [](const auto& a, const auto& b) { return a.key_text < b.key_text; });
  const json additional = has(s, "additionalProperties") ? s["additionalProperties"] : json(true);
  if (!additional.is_boolean() && !additional.is_object()) {
    fail(ErrorCode::invalid_argument, "'additionalProperties' at {} must be a boolean or a schema",
         show(path));
  }
  const bool closed = additional.is_boolean() && !additional.get<bool>();
  if (has(s, "required")) {
    const json& required = s["required"];
    if (!required.is_array()) {
      fail(ErrorCode::invalid_argument, "'required' at {} must be an array of strings", show(path));
    }
    for (const json& name : required) {
      if (!name.is_string()) {
        fail(ErrorCode::invalid_argument, "'required' at {} must be an array of strings",
             show(path));
      }
      const std::string key_text = json(name).dump().substr(1);
      auto it = std::find_if(node->properties.begin(), node->properties.end(),
                             [&](const ObjectProperty& p) { return p.key_text == key_text; });
      if (it == node->properties.end()) {
        fail(closed ? ErrorCode::invalid_argument : ErrorCode::unsupported,
             "required property '{}' at {} is not declared in 'properties' (constrained decoding "
             "writes only declared properties)",
             name.get<std::string>(), show(path));
      }
      it->required = true;
      node->required_mask |= uint64_t{1} << (it - node->properties.begin());
    }
  }
  // Free keys only without declared properties; with them, only declared keys are written.
  if (node->properties.empty() && !closed) {
    node->additional = additional.is_object()
                           ? compile(additional, join(path, "additionalProperties"))
                           : impl_.any_json_value();
  }
  return node;
}

uint32_t SchemaCompiler::item_count(const json& s, const char* key, uint32_t absent,
                                    const std::string& path) {
  if (!has(s, key)) return absent;
  const json& v = s[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    fail(ErrorCode::invalid_argument, "'{}' at {} must be a non-negative integer", key, show(path));
  }
  return static_cast<uint32_t>(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX - 1));
}

GrammarNode* SchemaCompiler::compile_array(const json& s, const std::string& path) {
  GrammarNode* node = impl_.make(NodeKind::array);
  node->path = path;
  node->min = item_count(s, "minItems", 0, path);
  node->max = item_count(s, "maxItems", UINT32_MAX, path);
  if (node->min > node->max) {
    fail(ErrorCode::invalid_argument, "'minItems' at {} is larger than 'maxItems'", show(path));
  }
  const json items = has(s, "items") ? s["items"] : json(true);
  if (items.is_array()) {
    fail(ErrorCode::unsupported,
         "JSON schema keyword 'items' as an array (tuple form) at {} is not supported by "
         "constrained decoding",
         show(path));
  }
  if (items.is_boolean() && !items.get<bool>()) {
    node->max = 0;  // items: false allows only the empty array
    if (node->min > 0) {
      fail(ErrorCode::invalid_argument, "array at {} needs items but 'items' is false", show(path));
    }
    node->item = impl_.any_json_value();
  } else {
    node->item = compile(items, join(path, "items"));
  }
  return node;
}

}  // namespace

GrammarNode* compile_json_schema(BuilderState& impl, const nlohmann::json& schema) {
  SchemaCompiler compiler(impl, schema);
  try {
    return compiler.compile(schema, "");
  } catch (const json::exception& e) {  // e.g. a name or value that is not valid UTF-8
    fail(ErrorCode::invalid_argument, "JSON schema cannot be used: {}", e.what());
  }
}

}  // namespace memra::structured
