// Text helpers for what the user reads.
#include "lib/base/text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/utf8.h"

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

double round_to(double value, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

bool starts_with(std::string_view text, std::string_view start) {
  return text.size() >= start.size() && text.compare(0, start.size(), start) == 0;
}

bool ends_with(std::string_view text, std::string_view end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

std::string trimmed(std::string_view text, std::string_view blanks) {
  size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(blanks);
  return std::string(text.substr(begin, end - begin + 1));
}

std::vector<std::string> comma_list(std::string_view text) {
  std::vector<std::string> items;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = trimmed(text.substr(start, end - start));
    if (!item.empty()) items.push_back(std::move(item));
    start = end + 1;
  }
  return items;
}

std::string shown_text(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t length = c < 0x80 ? 1 : utf8_sequence_length(text, i);
    if (c < 0x20 || c == 0x7f || length == 0) {
      out += fmt::format("\\x{:02x}", c);  // a control character, or a byte that is not UTF-8
    } else {
      out.append(text.substr(i, length));
      i += length - 1;
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

std::string dims_text(const std::vector<int64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

}  // namespace trainer::base
