// Download progress: a bar redrawn in place on a terminal (stderr), or progress lines in the log
// (every 10% and at least every 30 s, for files of 16 MiB and more) when stderr is not a terminal
// or HF_HUB_DISABLE_PROGRESS_BARS is set, so a server's log shows how far a first-run download is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace memra::hub {

// Called with the file's name, bytes present and the file's size; done == total once at the end.
using ProgressFn = std::function<void(const std::string& file, uint64_t done, uint64_t total)>;

class HubProgress {
 public:
  explicit HubProgress(bool bars_allowed);
  void operator()(const std::string& file, uint64_t done, uint64_t total);

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  std::string file_;
  Clock::time_point start_, last_;
  uint64_t start_bytes_ = 0;
  int next_percent_ = 10;
};

}  // namespace memra::hub
