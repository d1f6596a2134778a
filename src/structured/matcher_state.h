// GrammarMatcher's committed state (internal): the stack as a plain frame vector, bottom first.
// A matcher is copied by copying this vector (a few dozen bytes per open JSON level); token-mask
// scans turn it into a linked Cursor once and step copies of that instead.
#pragma once

#include <vector>

#include "structured/grammar.h"
#include "structured/matcher_core.h"

namespace memra::structured {

struct GrammarMatcher::State {
  std::vector<Frame> frames;
};

}  // namespace memra::structured
