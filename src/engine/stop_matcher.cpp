// StopMatcher: the earliest stop string in the held text wins (ties: the longest); otherwise the
// longest tail that is a prefix of some stop string stays held.
#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace memra {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::push(const std::string& text) {
  Result out;
  if (stopped_) return out;
  held_ += text;
  if (stops_.empty()) {
    out.text = std::move(held_);
    held_.clear();
    return out;
  }
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > best_stop->size())) {
      best = at;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    out.text = held_.substr(0, best);
    out.stopped = true;
    out.matched = *best_stop;
    stopped_ = true;
    held_.clear();
    return out;
  }
  // Hold the longest suffix of held_ that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace memra
