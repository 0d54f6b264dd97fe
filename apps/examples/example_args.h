// Strict numbers from the examples' command lines: the whole text must be an integer (or a
// number) in range, else one InputError naming the option, the value and what is allowed.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "lib/base/errors.h"

namespace trainer::examples {

// An integer in [min, max]; `allowed` says what is allowed, for the error.
inline int64_t integer_arg(const std::string& name, const std::string& text, int64_t min,
                           int64_t max, const std::string& allowed) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    throw InputError(fmt::format("{} {} is not allowed ({})", name, text, allowed));
  }
  return value;
}

// A number of examples to keep: -1 for all, else >= 1.
inline int64_t sample_count_arg(const std::string& name, const std::string& text) {
  int64_t n = integer_arg(name, text, -1, INT64_MAX, "an integer >= 1, or -1 for all");
  if (n == 0)
    throw InputError(fmt::format("{} 0 is not allowed (an integer >= 1, or -1 for all)", name));
  return n;
}

// A finite number greater than `above`.
inline double number_arg(const std::string& name, const std::string& text, double above) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(value > above) || value > 1e12) {
    throw InputError(
        fmt::format("{} {} is not allowed (a number above {} and up to 1e12)", name, text, above));
  }
  return value;
}

}  // namespace trainer::examples
