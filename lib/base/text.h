// Text helpers for what the user reads: numbers with thousands separators, durations as
// Transformers prints them, and the nearest known name for a misspelt one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer::base {

// 60000 -> "60,000".
std::string thousands(int64_t value);

// Seconds as Python's timedelta with hundredths, as Transformers' metrics print runtimes:
// 62.345 -> "0:01:02.34".
std::string timedelta(double seconds);

// Seconds as tqdm prints elapsed and remaining time: "01:02", or "1:01:02" past an hour.
std::string clock_time(double seconds);

// The candidate closest to `name` by edit distance, or "" when none is reasonably close.
std::string nearest(const std::string& name, const std::vector<std::string>& candidates);

// The text up to its first newline (LibTorch's errors carry a C++ backtrace after it).
std::string first_line(const std::string& text);

// A double as Python's repr would print it (shortest form that reads back the same).
std::string python_float(double value);

}  // namespace trainer::base
