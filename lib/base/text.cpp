// Text helpers for what the user reads.
#include "lib/base/text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace trainer::base {

std::string thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string timedelta(double seconds) {
  auto whole = static_cast<int64_t>(seconds);
  int hundredths = static_cast<int>((seconds - static_cast<double>(whole)) * 100);
  return fmt::format("{}:{:02d}:{:02d}.{:02d}", whole / 3600, (whole / 60) % 60, whole % 60,
                     hundredths);
}

std::string clock_time(double seconds) {
  auto whole = static_cast<int64_t>(std::max(0.0, seconds));
  if (whole >= 3600) {
    return fmt::format("{}:{:02d}:{:02d}", whole / 3600, (whole / 60) % 60, whole % 60);
  }
  return fmt::format("{:02d}:{:02d}", whole / 60, whole % 60);
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, name.size() / 2) + 1;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", value);  // shortest round-trip form, like Python's repr
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace trainer::base
