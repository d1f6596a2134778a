// Minimal leveled logging to stderr. MEMRA_LOG_LEVEL=debug|info|warn|error sets the threshold.
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace memra {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

LogLevel log_threshold();
void log_set_threshold(LogLevel level);
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_threshold()) return;
  log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

#define MEMRA_LOG_DEBUG(...) ::memra::log_at(::memra::LogLevel::debug, __VA_ARGS__)
#define MEMRA_LOG_INFO(...) ::memra::log_at(::memra::LogLevel::info, __VA_ARGS__)
#define MEMRA_LOG_WARN(...) ::memra::log_at(::memra::LogLevel::warn, __VA_ARGS__)
#define MEMRA_LOG_ERROR(...) ::memra::log_at(::memra::LogLevel::error, __VA_ARGS__)

}  // namespace memra
