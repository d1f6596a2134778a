// The matcher's stack machine (internal): a Frame per active grammar node, a stack made of a top
// frame plus a linked list of the frames below it, and step(), which feeds one byte. Links below
// the top are immutable, so a stack is copied by copying its top frame and one pointer; links are
// bump-allocated from a LinkArena that a token-mask scan rewinds per trie depth, so stepping never
// touches the heap in the hot loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/grammar_nodes.h"

namespace memra::structured {

// One active node. Field meaning depends on node->kind (see grammar_matcher.cpp).
struct Frame {
  const GrammarNode* node = nullptr;
  uint64_t mask = 0;  // object: properties already written
  uint32_t a = 0;     // literal/sequence position, choice range begin, item count, ...
  uint32_t b = 0;     // choice range end, \u escape value, ...
  uint16_t pos = 0;   // byte position inside a key or separator; UTF-8 next-byte bounds
  uint8_t phase = 0;  // per-kind state
  uint8_t depth = 0;  // JSON containers open around (and including) this frame
  uint8_t ws = 0;     // whitespace bytes in a row (objects and arrays)
};

struct Link {
  Frame frame;
  const Link* below;
};

// Chunked bump allocator: pointers stay valid until rewind() below them.
class LinkArena {
 public:
  size_t mark() const { return size_; }
  void rewind(size_t mark) { size_ = mark; }
  const Link* make(const Frame& frame, const Link* below) {
    const size_t chunk = size_ >> kChunkBits;
    if (chunk == chunks_.size())
      chunks_.push_back(std::make_unique<Link[]>(size_t{1} << kChunkBits));
    Link& link = chunks_[chunk][size_ & ((size_t{1} << kChunkBits) - 1)];
    ++size_;
    link.frame = frame;
    link.below = below;
    return &link;
  }

 private:
  static constexpr size_t kChunkBits = 10;
  std::vector<std::unique_ptr<Link[]>> chunks_;
  size_t size_ = 0;
};

// A whole stack: `top` is valid unless `empty` (the grammar has been matched completely).
struct Cursor {
  Frame top;
  const Link* below = nullptr;
  bool empty = false;
};

// The stack before any byte: the root's fresh frame.
Cursor cursor_start(const Grammar& grammar);
// Feeds one byte. On false the cursor is left in an unspecified state: step a copy.
bool cursor_step(Cursor& cursor, uint8_t byte, LinkArena& arena, const GrammarLimits& limits);
// Every frame on the stack may end here (the text so far is complete).
bool cursor_accepting(const Cursor& cursor);

// Conversions between a cursor and a plain frame vector (bottom first), the committed form.
std::vector<Frame> cursor_frames(const Cursor& cursor);
Cursor cursor_from_frames(const std::vector<Frame>& frames, LinkArena& arena);
// Byte string identifying a stack exactly (the token-mask cache key).
std::string frames_key(const std::vector<Frame>& frames);

}  // namespace memra::structured
