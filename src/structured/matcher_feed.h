// Internal to the matcher: the result of feeding one byte to a frame, and the feeders for JSON
// scalars (matcher_scalars.cpp), which need no child frames.
#pragma once

#include <cstdint>

#include "structured/matcher_core.h"

namespace memra::structured {

enum class Feed : uint8_t {
  consumed,    // byte taken, frame stays
  done,        // byte taken, frame complete: pop it
  reject,      // byte not allowed here
  pop_refeed,  // frame complete without this byte: pop it, feed the byte below
  push,        // push `child` above this frame and feed it the byte
  replace,     // replace this frame with `child` and feed it the byte (union branch)
  become,      // byte taken; replace this frame with a fresh `child` (choice continuation)
};

// JSON string frame (phase 0 expects the opening quote).
Feed feed_string(Frame& f, uint8_t byte);
// JSON number or integer frame; at most limits.max_number_bytes bytes.
Feed feed_number(Frame& f, uint8_t byte, const GrammarLimits& limits);
bool number_can_end(uint8_t phase);

}  // namespace memra::structured
