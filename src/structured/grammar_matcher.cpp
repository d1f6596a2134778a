// GrammarMatcher: the public byte-level matcher over the stack machine in matcher_core.cpp.
// advance() is all-or-nothing: it steps a copy and commits only when every byte was accepted.
#include "core/error.h"
#include "structured/matcher_state.h"

namespace memra::structured {

namespace {

// Scratch links for one call; rewound on entry, so a thread reuses its chunks.
LinkArena& scratch_arena() {
  thread_local LinkArena arena;
  arena.rewind(0);
  return arena;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), state_(std::make_unique<State>()) {
  if (!grammar_) fail(ErrorCode::internal, "GrammarMatcher needs a grammar");
  state_->frames = cursor_frames(cursor_start(*grammar_));
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : grammar_(other.grammar_), state_(std::make_unique<State>(*other.state_)) {}

GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& other) {
  if (this != &other) {
    grammar_ = other.grammar_;
    *state_ = *other.state_;
  }
  return *this;
}

GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::advance(std::string_view bytes) {
  LinkArena& arena = scratch_arena();
  Cursor cursor = cursor_from_frames(state_->frames, arena);
  for (char c : bytes) {
    if (!cursor_step(cursor, static_cast<uint8_t>(c), arena, grammar_->limits())) return false;
  }
  state_->frames = cursor_frames(cursor);
  return true;
}

bool GrammarMatcher::accepting() const {
  LinkArena& arena = scratch_arena();
  return cursor_accepting(cursor_from_frames(state_->frames, arena));
}

bool GrammarMatcher::finished() const {
  if (state_->frames.empty()) return true;
  LinkArena& arena = scratch_arena();
  const Cursor cursor = cursor_from_frames(state_->frames, arena);
  if (!cursor_accepting(cursor)) return false;
  // Complete, and no byte at all can follow (e.g. a number at max_number_bytes at the top).
  const size_t mark = arena.mark();
  for (int byte = 0; byte < 256; ++byte) {
    Cursor copy = cursor;
    arena.rewind(mark);
    if (cursor_step(copy, static_cast<uint8_t>(byte), arena, grammar_->limits())) return false;
  }
  return true;
}

}  // namespace memra::structured
