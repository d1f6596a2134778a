// GrammarBuilder: the node-building primitives (literal, sequence, keyed choice, repeat, any JSON
// value) and build(), which computes every node's first-byte set, checks that union branches are
// distinguishable by their first byte, and hands the nodes to an immutable Grammar.
#include <algorithm>
#include <climits>

#include "core/error.h"
#include "structured/grammar_builder_impl.h"

namespace memra::structured {

namespace {

constexpr uint8_t kNoBranch = 0xff;

bool is_prefix(const std::string& a, const std::string& b) {
  return a.size() <= b.size() && b.compare(0, a.size(), a) == 0;
}

// First-byte sets, memoized; a node reached again while its own set is being computed is a cycle
// that consumes no byte (a $ref loop without an object or array in between).
class FirstSets {
 public:
  explicit FirstSets(size_t n) : state_(n, 0) {}

  const std::bitset<256>& of(GrammarNode* node) {
    uint8_t& st = state_[static_cast<size_t>(node->id)];
    if (st == 2) return node->first;
    if (st == 1) {
      fail(ErrorCode::invalid_argument,
           "JSON schema $ref at {} refers back to itself without an object or array in between",
           node->path.empty() ? "the top level" : node->path);
    }
    st = 1;
    node->first = compute(node);
    st = 2;
    return node->first;
  }

 private:
  std::bitset<256> compute(GrammarNode* node) {
    std::bitset<256> first;
    switch (node->kind) {
      case NodeKind::literal:
        first.set(static_cast<uint8_t>(node->text[0]));
        break;
      case NodeKind::sequence:
        first = of(mut(node->items[0]));
        break;
      case NodeKind::choice:
        for (const std::string& key : node->keys) first.set(static_cast<uint8_t>(key[0]));
        break;
      case NodeKind::repeat:
        first = of(mut(node->item));
        break;
      case NodeKind::string:
        first.set('"');
        break;
      case NodeKind::number:
      case NodeKind::integer:
        first.set('-');
        for (int c = '0'; c <= '9'; ++c) first.set(static_cast<size_t>(c));
        break;
      case NodeKind::object:
        first.set('{');
        break;
      case NodeKind::array:
        first.set('[');
        break;
      case NodeKind::union_:
        first = union_first(node);
        break;
      case NodeKind::unresolved:
        fail(ErrorCode::internal, "grammar node at {} was never resolved", node->path);
    }
    return first;
  }

  // The union's branch per first byte. Integer and number branches overlap on every byte they
  // start with; the number branch covers both, so it wins. Any other overlap would need lookahead.
  std::bitset<256> union_first(GrammarNode* node) {
    if (node->items.size() >= kNoBranch) {
      fail(ErrorCode::invalid_argument, "JSON schema at {} has {} alternatives; the limit is {}",
           node->path.empty() ? "the top level" : node->path, node->items.size(), kNoBranch - 1);
    }
    node->union_table.assign(256, kNoBranch);
    std::bitset<256> all;
    for (size_t j = 0; j < node->items.size(); ++j) {
      const std::bitset<256>& first = of(mut(node->items[j]));
      for (size_t b = 0; b < 256; ++b) {
        if (!first.test(b)) continue;
        uint8_t& slot = node->union_table[b];
        if (slot != kNoBranch) {
          const NodeKind old_kind = node->items[slot]->kind;
          const NodeKind new_kind = node->items[j]->kind;
          const bool numbers = (old_kind == NodeKind::number || old_kind == NodeKind::integer) &&
                               (new_kind == NodeKind::number || new_kind == NodeKind::integer);
          if (!numbers) {
            fail(ErrorCode::unsupported,
                 "JSON schema alternatives at {} can start with the same byte '{}'; constrained "
                 "decoding needs alternatives of different types (string, number, boolean, "
                 "null, object, array)",
                 node->path.empty() ? "the top level" : node->path, static_cast<char>(b));
          }
          if (new_kind == NodeKind::number) slot = static_cast<uint8_t>(j);
          continue;
        }
        slot = static_cast<uint8_t>(j);
      }
      all |= first;
    }
    return all;
  }

  static GrammarNode* mut(const GrammarNode* node) { return const_cast<GrammarNode*>(node); }

  std::vector<uint8_t> state_;
};

}  // namespace

Grammar::~Grammar() = default;

GrammarNode* BuilderState::make(NodeKind kind) {
  if (built) fail(ErrorCode::internal, "GrammarBuilder used after build()");
  if (nodes.size() >= static_cast<size_t>(limits.max_nodes)) {
    fail(ErrorCode::invalid_argument,
         "grammar needs more than {} nodes (the limit for one request); simplify the schema or "
         "tool definitions",
         limits.max_nodes);
  }
  auto node = std::make_unique<GrammarNode>();
  node->kind = kind;
  node->id = static_cast<int32_t>(nodes.size());
  nodes.push_back(std::move(node));
  return nodes.back().get();
}

GrammarNode* BuilderState::node(GrammarBuilder::Node handle) {
  if (handle < 0 || static_cast<size_t>(handle) >= nodes.size()) {
    fail(ErrorCode::internal, "grammar node handle {} is not from this builder", handle);
  }
  return nodes[static_cast<size_t>(handle)].get();
}

GrammarNode* BuilderState::boolean() {
  GrammarNode* node = make(NodeKind::choice);
  node->keys = {"false", "true"};
  node->next = {nullptr, nullptr};
  return node;
}

GrammarNode* BuilderState::null() {
  GrammarNode* node = make(NodeKind::choice);
  node->keys = {"null"};
  node->next = {nullptr};
  return node;
}

GrammarNode* BuilderState::any_json_value() {
  if (any_value) return any_value;
  // A cycle: objects and arrays hold any values again; depth is bounded when matching.
  any_value = make(NodeKind::union_);
  GrammarNode* object = make(NodeKind::object);
  object->additional = any_value;
  GrammarNode* array = make(NodeKind::array);
  array->item = any_value;
  array->min = 0;
  array->max = UINT32_MAX;
  any_value->items = {
      make(NodeKind::string), make(NodeKind::number), boolean(), null(), object, array};
  return any_value;
}

GrammarBuilder::GrammarBuilder(GrammarLimits limits) : impl_(std::make_unique<Impl>()) {
  if (limits.max_nodes < 1 || limits.max_depth < 1 || limits.max_depth > 200 ||
      limits.max_whitespace_run < 0 || limits.max_whitespace_run > 255 ||
      limits.max_number_bytes < 1 || limits.max_choices < 1) {
    fail(ErrorCode::invalid_argument,
         "grammar limits out of range (max_depth 1..200, max_whitespace_run 0..255, others >= 1)");
  }
  impl_->limits = limits;
}

GrammarBuilder::~GrammarBuilder() = default;

GrammarBuilder::Node GrammarBuilder::literal(std::string text) {
  if (text.empty()) fail(ErrorCode::invalid_argument, "grammar literal must not be empty");
  GrammarNode* node = impl_->make(NodeKind::literal);
  node->text = std::move(text);
  return node->id;
}

GrammarBuilder::Node GrammarBuilder::sequence(std::vector<Node> items) {
  if (items.empty()) fail(ErrorCode::invalid_argument, "grammar sequence must not be empty");
  std::vector<const GrammarNode*> resolved;
  for (Node item : items) resolved.push_back(impl_->node(item));
  if (resolved.size() == 1) return items[0];
  GrammarNode* node = impl_->make(NodeKind::sequence);
  node->items = std::move(resolved);
  return node->id;
}

GrammarBuilder::Node GrammarBuilder::keyed_choice(
    std::vector<std::pair<std::string, Node>> alternatives) {
  if (alternatives.empty()) fail(ErrorCode::invalid_argument, "keyed choice needs alternatives");
  if (alternatives.size() > static_cast<size_t>(impl_->limits.max_choices)) {
    fail(ErrorCode::invalid_argument, "keyed choice has {} alternatives; the limit is {}",
         alternatives.size(), impl_->limits.max_choices);
  }
  std::sort(alternatives.begin(), alternatives.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  GrammarNode* node = impl_->make(NodeKind::choice);
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const std::string& key = alternatives[i].first;
    if (key.empty()) fail(ErrorCode::invalid_argument, "keyed choice key must not be empty");
    // Sorted order puts a key right before the keys it is a prefix of.
    if (i > 0 && is_prefix(alternatives[i - 1].first, key)) {
      fail(ErrorCode::invalid_argument, "keyed choice key '{}' is a prefix of '{}' (or equal)",
           alternatives[i - 1].first, key);
    }
    node->keys.push_back(key);
    const Node cont = alternatives[i].second;
    node->next.push_back(cont == kEnd ? nullptr : impl_->node(cont));
  }
  return node->id;
}

GrammarBuilder::Node GrammarBuilder::repeat(Node item, std::string separator, int32_t min,
                                            int32_t max) {
  if (min < 1 || max < min) {
    fail(ErrorCode::invalid_argument, "repeat needs 1 <= min <= max (got min {}, max {})", min,
         max);
  }
  GrammarNode* resolved = impl_->node(item);
  GrammarNode* node = impl_->make(NodeKind::repeat);
  node->item = resolved;
  node->text = std::move(separator);
  node->min = static_cast<uint32_t>(min);
  node->max = static_cast<uint32_t>(max);
  return node->id;
}

GrammarBuilder::Node GrammarBuilder::json_schema(const nlohmann::json& schema) {
  return compile_json_schema(*impl_, schema)->id;
}

GrammarBuilder::Node GrammarBuilder::any_json_object() {
  GrammarNode* object = impl_->make(NodeKind::object);
  object->additional = impl_->any_json_value();
  return object->id;
}

GrammarBuilder::Node GrammarBuilder::any_json_value() {
  return impl_->any_json_value()->id;
}

std::shared_ptr<const Grammar> GrammarBuilder::build(Node root) {
  GrammarNode* root_node = impl_->node(root);
  // Only nodes reachable from the root matter (a schema that failed to compile may have left
  // unfinished nodes behind in this builder).
  FirstSets first(impl_->nodes.size());
  std::vector<bool> seen(impl_->nodes.size(), false);
  std::vector<const GrammarNode*> pending = {root_node};
  while (!pending.empty()) {
    const GrammarNode* node = pending.back();
    pending.pop_back();
    if (node == nullptr || seen[static_cast<size_t>(node->id)]) continue;
    seen[static_cast<size_t>(node->id)] = true;
    first.of(const_cast<GrammarNode*>(node));
    pending.insert(pending.end(), node->items.begin(), node->items.end());
    pending.insert(pending.end(), node->next.begin(), node->next.end());
    pending.push_back(node->item);
    pending.push_back(node->additional);
    for (const ObjectProperty& prop : node->properties) pending.push_back(prop.value);
  }
  std::shared_ptr<Grammar> grammar(new Grammar());
  grammar->root_ = root_node;
  grammar->limits_ = impl_->limits;
  grammar->nodes_ = std::move(impl_->nodes);
  impl_->built = true;
  return grammar;
}

}  // namespace memra::structured
