// Terminal bar / log lines for downloads (hub_progress.h).
#include "hub/hub_progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/log.h"

namespace memra::hub {

namespace {
constexpr uint64_t kQuietBelow = 16u << 20;
}  // namespace

HubProgress::HubProgress(bool bars_allowed) : tty_(bars_allowed && ::isatty(2) != 0) {}

void HubProgress::operator()(const std::string& file, uint64_t done, uint64_t total) {
  const Clock::time_point now = Clock::now();
  if (file != file_) {
    file_ = file;
    start_ = last_ = now;
    start_bytes_ = done;
    next_percent_ = 10;
  }
  const bool end = done >= total;
  const int percent = total > 0 ? static_cast<int>(done * 100 / total) : 100;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? double(done - start_bytes_) / secs / 1048576.0 : 0.0;
  if (tty_) {
    if (!end && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 24;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r\033[K%s [%s%s] %3d%% %.1f/%.1f MiB %.1f MiB/s", file.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 percent, done / 1048576.0, total / 1048576.0, rate);
    if (end) std::fprintf(stderr, "\n");
    std::fflush(stderr);
    return;
  }
  // Small files (config, tokenizer) get no lines of their own: the start and summary suffice.
  if (total < kQuietBelow) return;
  if (!end && percent < next_percent_ && now - last_ < std::chrono::seconds(30)) return;
  last_ = now;
  while (next_percent_ <= percent) next_percent_ += 10;
  MEMRA_LOG_INFO("downloading {}: {}% ({:.1f}/{:.1f} MiB, {:.1f} MiB/s)", file, percent,
                 done / 1048576.0, total / 1048576.0, rate);
}

}  // namespace memra::hub
