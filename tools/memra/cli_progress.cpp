// Progress lines on stderr; see cli_progress.h.
#include "cli_progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace memra::cli {

ProgressPrinter::ProgressPrinter(std::string verb)
    : verb_(std::move(verb)), tty_(isatty(fileno(stderr)) != 0) {}

void ProgressPrinter::operator()(size_t done, size_t total, uint64_t written, uint64_t all) {
  const double frac = all > 0 ? double(written) / double(all) : 1.0;
  const int percent = static_cast<int>(frac * 100.0);
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r%s [%s%s] %3d%%  %zu/%zu tensors  %.1f/%.1f MiB", verb_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 percent, done, total, written / 1048576.0, all / 1048576.0);
    if (done == total) std::fprintf(stderr, "\n");
  } else if (percent >= next_percent_ || done == total) {
    std::fprintf(stderr, "%s: %d%% (%zu/%zu tensors, %.1f MiB)\n", verb_.c_str(), percent, done,
                 total, written / 1048576.0);
    while (next_percent_ <= percent) next_percent_ += 25;
  }
  std::fflush(stderr);
}

}  // namespace memra::cli
