// The one way to print a warning: "trainer: warning: <line>" on stderr, flushed at once. A
// warning is something the user should know that does not stop the run; the caller decides
// which processes print it (usually the main process only).
#pragma once

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace trainer::base {

inline void warn(const std::string& line) {
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
