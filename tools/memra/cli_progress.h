// Progress of a long file write on stderr, shared by `memra convert` and `memra synth`: a bar
// redrawn in place on a terminal, a plain line per quarter otherwise (logs stay short).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memra::cli {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string verb);  // "converting", "synthesizing"
  // The gguf::Writer progress callback: tensors done / total, bytes written / total.
  void operator()(size_t done, size_t total, uint64_t written, uint64_t all);

 private:
  std::string verb_;
  bool tty_;
  int next_percent_ = 25;
};

}  // namespace memra::cli
