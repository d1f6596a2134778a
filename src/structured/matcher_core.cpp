// The byte-level pushdown matcher: one feed function per node kind, and the step loop that pushes,
// pops and re-feeds. A frame that pushes a child first advances its own phase to "after the
// child", so a finished child simply pops. A frame that may end (a number, an enum whose value is
// a prefix of another, a repeat past its minimum) pops and hands on a byte it cannot take.
// Every state reachable by accepted bytes can still be completed (no dead ends: e.g. a \u escape
// that could only become a lone low surrogate is refused at its second hex digit), so a token
// mask never strands generation; the one exception is a schema that requires nesting deeper than
// limits.max_depth, which no text within the limit satisfies.
#include <algorithm>

#include "core/error.h"
#include "structured/matcher_feed.h"

namespace memra::structured {

namespace {

// Bound on push/pop transitions for one byte; a well-formed grammar needs a handful.
constexpr int kMaxTransitions = 1024;

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// One run of whitespace between JSON tokens: an optional line break first ("\n"), then spaces
// and tabs, limits.max_whitespace_run bytes in all. That is every layout pretty printers write
// (minus "\r"), and it stops a model from spending its tokens on blank lines: Gemma 3 270M
// sampled at temperature 0.8 filled 128 tokens with "\n\n" and " " when any whitespace was
// allowed.
Feed feed_whitespace(uint8_t& run, uint8_t byte, const GrammarLimits& limits) {
  if (run >= limits.max_whitespace_run || byte == '\r' || (byte == '\n' && run != 0))
    return Feed::reject;
  ++run;
  return Feed::consumed;
}

bool is_container(const GrammarNode* node) {
  return node->kind == NodeKind::object || node->kind == NodeKind::array;
}

const GrammarNode* key_string_node() {
  static const GrammarNode* node = [] {
    auto* n = new GrammarNode();  // lives for the process: shared by every free-key object
    n->kind = NodeKind::string;
    n->first.set('"');
    return n;
  }();
  return node;
}

bool start_frame(const GrammarNode* node, uint8_t base_depth, const GrammarLimits& limits,
                 Frame& out) {
  out = Frame{};
  out.node = node;
  out.depth = base_depth;
  if (is_container(node)) {
    if (base_depth + 1 > limits.max_depth) return false;
    out.depth = static_cast<uint8_t>(base_depth + 1);
  }
  if (node->kind == NodeKind::choice) out.b = static_cast<uint32_t>(node->keys.size());
  return true;
}

// ---- literal, sequence, choice, repeat, union: a = position / range begin, b = range end.

Feed feed_literal(Frame& f, uint8_t byte) {
  const std::string& text = f.node->text;
  if (static_cast<uint8_t>(text[f.a]) != byte) return Feed::reject;
  return ++f.a == text.size() ? Feed::done : Feed::consumed;
}

Feed feed_sequence(Frame& f, const GrammarNode*& child) {
  if (f.a == f.node->items.size()) return Feed::pop_refeed;
  child = f.node->items[f.a++];
  return Feed::push;
}

// Choice frame: keys [a, b) share the first `mask` bytes already written; the sorted order keeps
// the keys continuing with any one byte contiguous, and a complete key first in its range.
bool choice_can_end(const Frame& f) {
  const GrammarNode* n = f.node;
  return f.mask > 0 && n->keys[f.a].size() == f.mask && n->next[f.a] == nullptr;
}

Feed feed_choice(Frame& f, uint8_t byte, const GrammarNode*& child) {
  const std::vector<std::string>& keys = f.node->keys;
  const size_t pos = f.mask;
  uint32_t lo = f.b, hi = f.b;
  for (uint32_t k = f.a; k < f.b; ++k) {
    if (keys[k].size() > pos && static_cast<uint8_t>(keys[k][pos]) == byte) {
      if (lo == f.b) lo = k;
      hi = k + 1;
    } else if (lo != f.b) {
      break;
    }
  }
  if (lo == f.b) return choice_can_end(f) ? Feed::pop_refeed : Feed::reject;
  f.a = lo;
  f.b = hi;
  f.mask = pos + 1;
  if (keys[lo].size() == pos + 1 && hi - lo == 1) {
    child = f.node->next[lo];
    return child ? Feed::become : Feed::done;
  }
  return Feed::consumed;
}

enum RepeatPhase : uint8_t { kNeedItem, kAfterItem, kSeparator };

Feed feed_repeat(Frame& f, uint8_t byte, const GrammarNode*& child) {
  const GrammarNode* n = f.node;
  const std::string& sep = n->text;
  switch (f.phase) {
    case kNeedItem:
      ++f.a;
      f.phase = kAfterItem;
      child = n->item;
      return Feed::push;
    case kAfterItem:
      if (f.a < n->max) {
        if (sep.empty() && n->item->first.test(byte)) {
          ++f.a;
          child = n->item;
          return Feed::push;
        }
        if (!sep.empty() && static_cast<uint8_t>(sep[0]) == byte) {
          f.phase = sep.size() == 1 ? kNeedItem : kSeparator;
          f.b = 1;
          return Feed::consumed;
        }
      }
      return f.a >= n->min ? Feed::pop_refeed : Feed::reject;
    default:
      if (static_cast<uint8_t>(sep[f.b]) != byte) return Feed::reject;
      if (++f.b == sep.size()) f.phase = kNeedItem;
      return Feed::consumed;
  }
}

Feed feed_union(Frame& f, uint8_t byte, const GrammarNode*& child) {
  const uint8_t branch = f.node->union_table[byte];
  if (branch == 0xff) return Feed::reject;
  child = f.node->items[branch];
  return Feed::replace;
}

// ---- JSON objects: mask = declared properties written; while matching a key, [a, b) is the
// range of declared keys (sorted) sharing the `pos` bytes written; after it, a = the property.

enum ObjectPhase : uint8_t {
  kObjOpen,
  kObjAfterOpen,
  kObjAfterComma,
  kObjKey,
  kObjColon,
  kObjValue,
  kObjAfterValue
};

bool object_free_keys(const GrammarNode* n) {
  return n->properties.empty() && n->additional != nullptr;
}

Feed object_start_key(Frame& f, const GrammarNode*& child) {
  const GrammarNode* n = f.node;
  f.phase = kObjColon;
  if (object_free_keys(n)) {
    child = key_string_node();
    return Feed::push;  // the string frame takes the opening quote
  }
  if (n->properties.empty()) return Feed::reject;
  f.phase = kObjKey;
  f.a = 0;
  f.b = static_cast<uint32_t>(n->properties.size());
  f.pos = 0;
  return Feed::consumed;
}

Feed object_key_byte(Frame& f, uint8_t byte) {
  const std::vector<ObjectProperty>& props = f.node->properties;
  const size_t pos = f.pos;
  uint32_t lo = f.b, hi = f.b;
  bool unused = false;
  for (uint32_t k = f.a; k < f.b; ++k) {
    const std::string& key = props[k].key_text;
    if (key.size() > pos && static_cast<uint8_t>(key[pos]) == byte) {
      if (lo == f.b) lo = k;
      hi = k + 1;
      unused = unused || ((f.mask >> k) & 1) == 0;
    } else if (lo != f.b) {
      break;
    }
  }
  if (!unused) return Feed::reject;
  f.a = lo;
  f.b = hi;
  f.pos = static_cast<uint16_t>(pos + 1);
  // Keys end with their closing quote, so a complete key is the only one left in its range.
  if (props[lo].key_text.size() == pos + 1) {
    f.mask |= uint64_t{1} << lo;
    f.phase = kObjColon;
  }
  return Feed::consumed;
}

Feed feed_object(Frame& f, uint8_t byte, const GrammarLimits& limits, const GrammarNode*& child) {
  const GrammarNode* n = f.node;
  if (f.phase != kObjOpen && f.phase != kObjKey && is_ws(byte))
    return feed_whitespace(f.ws, byte, limits);
  f.ws = 0;
  const size_t n_props = n->properties.size();
  const uint64_t all = n_props == 64 ? ~uint64_t{0} : (uint64_t{1} << n_props) - 1;
  switch (f.phase) {
    case kObjOpen:
      if (byte != '{') return Feed::reject;
      f.phase = kObjAfterOpen;
      return Feed::consumed;
    case kObjAfterOpen:
      if (byte == '}') return n->required_mask == 0 ? Feed::done : Feed::reject;
      return byte == '"' ? object_start_key(f, child) : Feed::reject;
    case kObjAfterComma:
      return byte == '"' ? object_start_key(f, child) : Feed::reject;
    case kObjKey:
      return object_key_byte(f, byte);
    case kObjColon:
      if (byte != ':') return Feed::reject;
      f.phase = kObjValue;
      return Feed::consumed;
    case kObjValue:
      f.phase = kObjAfterValue;
      child = object_free_keys(n) ? n->additional : n->properties[f.a].value;
      f.a = f.b = f.pos = 0;  // key matching is over; equal stacks then cache equal masks
      return Feed::push;
    default:  // kObjAfterValue
      if (byte == ',') {
        if (!object_free_keys(n) && f.mask == all) return Feed::reject;
        f.phase = kObjAfterComma;
        return Feed::consumed;
      }
      if (byte == '}') {
        return (f.mask & n->required_mask) == n->required_mask ? Feed::done : Feed::reject;
      }
      return Feed::reject;
  }
}

// ---- JSON arrays: a = items started.

enum ArrayPhase : uint8_t { kArrOpen, kArrAfterOpen, kArrAfterComma, kArrAfterValue };

Feed feed_array(Frame& f, uint8_t byte, const GrammarLimits& limits, const GrammarNode*& child) {
  const GrammarNode* n = f.node;
  if (f.phase != kArrOpen && is_ws(byte)) return feed_whitespace(f.ws, byte, limits);
  f.ws = 0;
  switch (f.phase) {
    case kArrOpen:
      if (byte != '[') return Feed::reject;
      f.phase = kArrAfterOpen;
      return Feed::consumed;
    case kArrAfterOpen:
      if (byte == ']') return n->min == 0 ? Feed::done : Feed::reject;
      if (n->max == 0) return Feed::reject;
      [[fallthrough]];
    case kArrAfterComma:
      ++f.a;
      // Without maxItems, every count past minItems behaves the same: keep one, so the stacks
      // of successive items are equal and their token masks come from the cache.
      if (n->max == UINT32_MAX && f.a > n->min) f.a = std::max<uint32_t>(n->min, 1);
      f.phase = kArrAfterValue;
      child = n->item;
      return Feed::push;
    default:  // kArrAfterValue
      if (byte == ',') {
        if (f.a >= n->max) return Feed::reject;
        f.phase = kArrAfterComma;
        return Feed::consumed;
      }
      if (byte == ']') return f.a >= n->min ? Feed::done : Feed::reject;
      return Feed::reject;
  }
}

Feed feed_frame(Frame& f, uint8_t byte, const GrammarLimits& limits, const GrammarNode*& child) {
  switch (f.node->kind) {
    case NodeKind::literal:
      return feed_literal(f, byte);
    case NodeKind::sequence:
      return feed_sequence(f, child);
    case NodeKind::choice:
      return feed_choice(f, byte, child);
    case NodeKind::repeat:
      return feed_repeat(f, byte, child);
    case NodeKind::string:
      return feed_string(f, byte);
    case NodeKind::number:
    case NodeKind::integer:
      return feed_number(f, byte, limits);
    case NodeKind::object:
      return feed_object(f, byte, limits, child);
    case NodeKind::array:
      return feed_array(f, byte, limits, child);
    case NodeKind::union_:
      return feed_union(f, byte, child);
    case NodeKind::unresolved:
      break;
  }
  return Feed::reject;
}

// A frame with nothing left to match (popped eagerly so finished() sees an empty stack).
bool frame_done(const Frame& f) {
  const GrammarNode* n = f.node;
  if (n->kind == NodeKind::sequence) return f.a == n->items.size();
  if (n->kind == NodeKind::repeat) return f.phase == kAfterItem && f.a == n->max;
  return false;
}

bool frame_can_end(const Frame& f) {
  const GrammarNode* n = f.node;
  switch (n->kind) {
    case NodeKind::sequence:
      return f.a == n->items.size();
    case NodeKind::choice:
      return choice_can_end(f);
    case NodeKind::repeat:
      return f.phase == kAfterItem && f.a >= n->min;
    case NodeKind::number:
    case NodeKind::integer:
      return number_can_end(f.phase);
    default:
      return false;
  }
}

void pop(Cursor& c) {
  if (c.below == nullptr) {
    c.empty = true;
    return;
  }
  c.top = c.below->frame;
  c.below = c.below->below;
}

void settle(Cursor& c) {
  while (!c.empty && frame_done(c.top)) pop(c);
}

}  // namespace

Cursor cursor_start(const Grammar& grammar) {
  Cursor c;
  if (!start_frame(grammar.root(), 0, grammar.limits(), c.top)) {
    fail(ErrorCode::internal, "grammar root deeper than max_depth");
  }
  return c;
}

bool cursor_step(Cursor& c, uint8_t byte, LinkArena& arena, const GrammarLimits& limits) {
  for (int i = 0; i < kMaxTransitions; ++i) {
    if (c.empty) return false;
    const GrammarNode* child = nullptr;
    switch (feed_frame(c.top, byte, limits, child)) {
      case Feed::consumed:
        return true;
      case Feed::done:
        pop(c);
        settle(c);
        return true;
      case Feed::reject:
        return false;
      case Feed::pop_refeed:
        pop(c);
        break;
      case Feed::push: {
        const uint8_t base = c.top.depth;
        c.below = arena.make(c.top, c.below);
        if (!start_frame(child, base, limits, c.top)) return false;
        break;
      }
      case Feed::replace:
        if (!start_frame(child, c.top.depth, limits, c.top)) return false;
        break;
      case Feed::become:
        return start_frame(child, c.top.depth, limits, c.top);
    }
  }
  return false;
}

bool cursor_accepting(const Cursor& c) {
  if (c.empty) return true;
  if (!frame_can_end(c.top)) return false;
  for (const Link* link = c.below; link; link = link->below) {
    if (!frame_can_end(link->frame)) return false;
  }
  return true;
}

std::vector<Frame> cursor_frames(const Cursor& c) {
  std::vector<Frame> frames;
  if (c.empty) return frames;
  frames.push_back(c.top);
  for (const Link* link = c.below; link; link = link->below) frames.push_back(link->frame);
  return {frames.rbegin(), frames.rend()};
}

Cursor cursor_from_frames(const std::vector<Frame>& frames, LinkArena& arena) {
  Cursor c;
  if (frames.empty()) {
    c.empty = true;
    return c;
  }
  for (size_t i = 0; i + 1 < frames.size(); ++i) c.below = arena.make(frames[i], c.below);
  c.top = frames.back();
  return c;
}

std::string frames_key(const std::vector<Frame>& frames) {
  std::string key;
  key.reserve(frames.size() * 30);
  auto put = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (const Frame& f : frames) {
    put(f.node);
    put(f.mask);
    put(f.a);
    put(f.b);
    put(f.pos);
    put(f.phase);
    put(f.depth);
    put(f.ws);
  }
  return key;
}

}  // namespace memra::structured
