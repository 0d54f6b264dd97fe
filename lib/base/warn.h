// The one way to print a warning: "trainer: warning: <line>" on stderr, flushed at once. A
// warning is something the user should know that does not stop the run; the caller decides
// which processes print it (usually the main process only). The process's log level (Python's
// logging levels, as Transformers' log_level sets them) silences warnings above warning, and lets
// info() lines through at info and debug.
#pragma once

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace trainer::base {

// Python's logging levels.
inline constexpr int kLogDebug = 10;
inline constexpr int kLogInfo = 20;
inline constexpr int kLogWarning = 30;
inline constexpr int kLogError = 40;
inline constexpr int kLogCritical = 50;

// This process's log level: warning until set_log_level.
inline std::atomic<int>& log_level() {
  static std::atomic<int> level{kLogWarning};
  return level;
}
inline void set_log_level(int level) { log_level() = level; }

// "trainer: info: <line>" on stderr at log level info or debug; nothing otherwise.
inline void info(const std::string& line) {
  if (log_level() > kLogInfo) return;
  std::fprintf(stderr, "trainer: info: %s\n", line.c_str());
  std::fflush(stderr);
}

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (log_level() > kLogInfo) return;
  info(fmt::format(format, std::forward<Args>(args)...));
}

inline void warn(const std::string& line) {
  if (log_level() > kLogWarning) return;
  std::fprintf(stderr, "trainer: warning: %s\n", line.c_str());
  std::fflush(stderr);
}

template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  warn(fmt::format(format, std::forward<Args>(args)...));
}

// warn() once per process for each distinct line: for what is found again each time the same
// thing is built (a trained adapter loaded again for the sample at the end of the run).
inline void warn_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(line).second) warn(line);
}

}  // namespace trainer::base
