// StopMatcher: stop strings split across pushes are caught, text that could still become a stop
// string is held back, and the stop string itself is never emitted.
#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace memra {
namespace {

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello").text, "hello");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MatchesAcrossPushes) {
  StopMatcher m({"END"});
  auto r = m.push("abc E");
  EXPECT_EQ(r.text, "abc ");  // "E" may start "END": held
  EXPECT_FALSE(r.stopped);
  r = m.push("N");
  EXPECT_EQ(r.text, "");
  r = m.push("Dxyz");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.matched, "END");
  EXPECT_EQ(m.push("more").text, "");  // nothing after a stop
}

TEST(StopMatcher, ReleasesHeldTextWhenItCannotMatch) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("xE").text, "x");
  EXPECT_EQ(m.push("Nd").text, "ENd");
  EXPECT_EQ(m.push("E").text, "");
  EXPECT_EQ(m.flush(), "E");
}

TEST(StopMatcher, EarliestMatchWins) {
  StopMatcher m({"cd", "bcdx", "b"});
  auto r = m.push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.matched, "b");
}

TEST(StopMatcher, StopInsideOneChunk) {
  StopMatcher m({"\n\n"});
  auto r = m.push("line one\n\nline two");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "line one");
}

TEST(StopMatcher, MultibyteStopString) {
  StopMatcher m({"é!"});
  EXPECT_EQ(m.push("caf\xc3").text, "caf");  // first byte of é could start the stop
  auto r = m.push("\xa9!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

}  // namespace
}  // namespace memra
