// Stop strings on streamed text: text is held back while its tail could still grow into a stop
// string (matches may span token boundaries), and a matched stop string is never emitted.
#pragma once

#include <string>
#include <vector>

namespace memra {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;  // newly final text, safe to emit
    bool stopped = false;
    std::string matched;  // the stop string found (when stopped)
  };
  // Feeds newly decoded text. After a stop, the text before it is returned and later calls
  // return nothing.
  Result push(const std::string& text);
  // End of generation: everything still held back is final.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace memra
