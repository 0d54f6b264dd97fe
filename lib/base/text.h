// Text helpers for what the user reads: numbers with thousands separators, durations as
// Transformers prints them, and the nearest known name for a misspelt one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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

// `value` rounded to `digits` decimals, as Transformers rounds the logged loss and speeds.
double round_to(double value, int digits);

// C++20's starts_with and ends_with, for C++17.
bool starts_with(std::string_view text, std::string_view start);
bool ends_with(std::string_view text, std::string_view end);

// `text` without the leading and trailing characters of `blanks`.
std::string trimmed(std::string_view text, std::string_view blanks = " \t");

// The items of a comma-separated list ("a, b,,c" -> a, b, c): each trimmed, empty ones left out.
std::vector<std::string> comma_list(std::string_view text);

// Text from a file as an error line quotes it: its first `max_bytes` bytes, control characters
// and bytes that are not UTF-8 as \xNN, and "..." when it was cut.
std::string shown_text(std::string_view text, size_t max_bytes = 40);

// A shape as messages print it: "[1, 28, 28]" ("[]" for a scalar).
std::string shape_text(const std::vector<int64_t>& dims);
// A shape as file formats name it: "1x28x28".
std::string dims_text(const std::vector<int64_t>& dims);

}  // namespace trainer::base
