// Python's str helpers, int() and re on ICU, as math_verify's parse uses them (math_answer.h).
#include <stdexcept>
#include <utility>

#include "lib/base/utf8.h"
#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

// ---------------------------------------------------------------------------------------------
// Python's text: str.isspace, str.strip, len, int.

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// The code point at text[at] and its length.
char32_t code_point(std::string_view text, size_t at, size_t& length) {
  return base::decode_utf8(text, at, length);
}

std::string py_strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t length;
    if (!py_isspace(code_point(text, begin, length))) break;
    begin += length;
  }
  size_t end = begin;
  for (size_t i = begin; i < text.size();) {
    size_t length;
    const bool space = py_isspace(code_point(text, i, length));
    i += length;
    if (!space) end = i;
  }
  return std::string(text.substr(begin, end - begin));
}

size_t py_len(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size();) {
    size_t length;
    code_point(text, i, length);
    i += length;
    ++n;
  }
  return n;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// Python's int(text) for an optional sign and ASCII digits (with "_" between digits refused:
// none reach here), or nullopt.
std::optional<int64_t> py_int(std::string_view text) {
  std::string t = py_strip(text);
  if (t.empty()) return std::nullopt;
  size_t i = 0;
  bool negative = false;
  if (t[0] == '+' || t[0] == '-') negative = t[i++] == '-';
  if (i >= t.size()) return std::nullopt;
  int64_t value = 0;
  for (; i < t.size(); ++i) {
    if (!is_digit(t[i])) return std::nullopt;
    if (value > (std::numeric_limits<int64_t>::max() - (t[i] - '0')) / 10) return std::nullopt;
    value = value * 10 + (t[i] - '0');
  }
  return negative ? -value : value;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Python's re on ICU: the pattern translated (\s as Python's whitespace, a brace that opens no
// quantifier literal, named groups numbered in order), `.` and `$` seeing only \n as a line end.

// Python's \s on str: [ \t\n\r\f\v] and what str.isspace() holds.
constexpr std::string_view kPySpaceSet = R"(\t\n\x{0B}\f\r\x{1C}-\x{1F}\x{85}\p{Z})";

// The end of a quantifier {m}, {m,}, {m,n} or {,n} that opens at pattern[at], or npos.
size_t quantifier_end(std::string_view pattern, size_t at) {
  size_t i = at + 1;
  size_t digits = 0;
  while (i < pattern.size() && is_digit(pattern[i])) ++i, ++digits;
  if (i < pattern.size() && pattern[i] == ',') {
    ++i;
    while (i < pattern.size() && is_digit(pattern[i])) ++i, ++digits;
  }
  if (i < pattern.size() && pattern[i] == '}' && digits > 0) return i;
  return std::string_view::npos;
}

std::string icu_pattern(std::string_view py, std::vector<std::string>& names) {
  std::string out;
  bool in_set = false;
  for (size_t i = 0; i < py.size(); ++i) {
    const char c = py[i];
    if (c == '\\' && i + 1 < py.size()) {
      if (py[i + 1] == 's') {
        out += in_set ? std::string(kPySpaceSet) : "[" + std::string(kPySpaceSet) + "]";
      } else {
        out += c;
        out += py[i + 1];
      }
      ++i;
      continue;
    }
    if (in_set) {
      if (c == ']') in_set = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_set = true;
      out += c;
      // A ']' first in a set is a literal in Python.
      if (i + 1 < py.size() && py[i + 1] == '^') out += py[++i];
      if (i + 1 < py.size() && py[i + 1] == ']') {
        out += "\\]";
        ++i;
      }
      continue;
    }
    if (c == '(') {
      if (py.substr(i, 4) == "(?P<") {
        const size_t close = py.find('>', i);
        names.emplace_back(py.substr(i + 4, close - i - 4));
        out += '(';
        i = close;
        continue;
      }
      if (i + 1 >= py.size() || py[i + 1] != '?') names.emplace_back();
      out += c;
      continue;
    }
    if (c == '{') {
      const size_t end = quantifier_end(py, i);
      if (end == std::string_view::npos) {
        out += "\\{";
      } else {
        std::string quantifier(py.substr(i, end - i + 1));
        if (quantifier[1] == ',') quantifier.insert(1, "0");
        out += quantifier;
        i = end;
      }
      continue;
    }
    if (c == '}') {
      out += "\\}";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

IcuText::IcuText(std::string_view utf8) {
  offsets_.reserve(utf8.size() + 1);
  for (size_t i = 0; i < utf8.size();) {
    size_t length;
    const char32_t c = code_point(utf8, i, length);
    text_.append(static_cast<UChar32>(c));
    offsets_.push_back(i);
    if (c > 0xFFFF) offsets_.push_back(i);
    i += length;
  }
  offsets_.push_back(utf8.size());
}

PyRegex::PyRegex(std::string_view python_pattern, bool dotall) {
  const std::string pattern = icu_pattern(python_pattern, names_);
  UErrorCode status = U_ZERO_ERROR;
  UParseError error;
  const uint32_t flags = UREGEX_UNIX_LINES | (dotall ? UREGEX_DOTALL : 0);
  regex_.reset(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), flags, error, status));
  if (U_FAILURE(status)) {
    throw std::logic_error("math_answer: a pattern does not compile under ICU (" +
                           std::string(u_errorName(status)) + " at " +
                           std::to_string(error.offset) + "): " + pattern);
  }
}

std::vector<Match> PyRegex::finditer(const IcuText& text) const {
  std::vector<Match> out;
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(regex_->matcher(text.unicode(), status));
  if (U_SUCCESS(status)) matcher->setTimeLimit(kTimeLimit, status);
  while (U_SUCCESS(status) && matcher->find(status)) {
    Match m;
    m.whole = {text.byte(matcher->start(status)), text.byte(matcher->end(status))};
    for (int32_t g = 1; g <= static_cast<int32_t>(names_.size()); ++g) {
      const int32_t b = matcher->start(g, status);
      if (b < 0) {
        m.groups.emplace_back();
      } else {
        m.groups.push_back(Span{text.byte(b), text.byte(matcher->end(g, status))});
      }
    }
    out.push_back(std::move(m));
  }
  if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW) throw RegexTimeout{};
  if (U_FAILURE(status)) {
    throw std::runtime_error(std::string("math_answer: ICU regex failed: ") + u_errorName(status));
  }
  return out;
}

bool PyRegex::search(std::string_view text) const {
  const IcuText icu_text(text);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(regex_->matcher(icu_text.unicode(), status));
  if (U_SUCCESS(status)) matcher->setTimeLimit(kTimeLimit, status);
  const bool found = U_SUCCESS(status) && matcher->find(status);
  if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW) throw RegexTimeout{};
  return found;
}

std::string PyRegex::sub(
    std::string_view text,
    const std::function<std::string(const Match&, std::string_view)>& replace) const {
  const IcuText icu_text(text);
  std::string out;
  size_t at = 0;
  for (const Match& m : finditer(icu_text)) {
    out.append(text.substr(at, m.whole.begin - at));
    out += replace(m, text);
    at = m.whole.end;
  }
  out.append(text.substr(at));
  return out;
}

std::string PyRegex::sub_group1(std::string_view text) const {
  return sub(text, [](const Match& m, std::string_view t) { return group(m, 0, t); });
}

std::vector<std::string> PyRegex::split(std::string_view text) const {
  const IcuText icu_text(text);
  std::vector<std::string> parts;
  size_t at = 0;
  for (const Match& m : finditer(icu_text)) {
    parts.emplace_back(text.substr(at, m.whole.begin - at));
    at = m.whole.end;
  }
  parts.emplace_back(text.substr(at));
  return parts;
}

std::string PyRegex::group(const Match& m, size_t k, std::string_view text) {
  if (k >= m.groups.size() || !m.groups[k]) return "";
  return std::string(text.substr(m.groups[k]->begin, m.groups[k]->end - m.groups[k]->begin));
}

}  // namespace trainer::trl::math
