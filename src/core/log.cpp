// Log sink: one line per message on stderr with a UTC timestamp, serialized by a mutex.
#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace memra {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("MEMRA_LOG_LEVEL");
  if (env == nullptr) return LogLevel::info;
  const std::string v(env);
  if (v == "debug") return LogLevel::debug;
  if (v == "warn") return LogLevel::warn;
  if (v == "error") return LogLevel::error;
  return LogLevel::info;
}

std::atomic<LogLevel>& threshold() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

}  // namespace

LogLevel log_threshold() {
  return threshold().load(std::memory_order_relaxed);
}
void log_set_threshold(LogLevel level) {
  threshold().store(level, std::memory_order_relaxed);
}

void log_write(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "%s %-5s %.*s\n", stamp, level_tag(level), static_cast<int>(message.size()),
               message.data());
}

}  // namespace memra
