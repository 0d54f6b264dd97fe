// Python's str operations on UTF-8 that the filters and methods share: upper, lower and
// capitalize with ICU's full case mappings, strip, replace and splitlines as CPython does them.
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

namespace {

std::string icu_case(std::string_view s, bool upper) {
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  upper ? u.toUpper(icu::Locale::getRoot()) : u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool ascii_only(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// Whether code point c is one of `chars` (a strip's argument).
bool one_of(char32_t c, const std::vector<char32_t>& chars) {
  return std::find(chars.begin(), chars.end(), c) != chars.end();
}

}  // namespace

std::string py_upper(std::string_view s) {
  if (!ascii_only(s)) return icu_case(s, true);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string py_lower(std::string_view s) {
  if (!ascii_only(s)) return icu_case(s, false);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return "";
  const auto cps = decode(s);
  // The first character's full title-case mapping (Python's capitalize), the rest lowered.
  icu::UnicodeString head(static_cast<UChar32>(cps[0]));
  head.toTitle(nullptr, icu::Locale::getRoot(),
               U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  std::string first;
  head.toUTF8String(first);
  return first + py_lower(encode(cps, 1, cps.size()));
}

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  const auto cps = decode(s);
  std::vector<char32_t> set;
  const bool spaces = chars.is_none() || chars.is_undefined();
  if (!spaces) set = decode(chars.str());
  auto strip = [&](char32_t c) { return spaces ? is_space(c) : one_of(c, set); };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strip(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip(cps[end - 1])) --end;
  return encode(cps, begin, end);
}

std::string py_replace(Interpreter& in, std::string_view s, std::string_view old,
                       std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python puts the replacement before each character and at the end.
    const auto cps = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < cps.size()) out += encode(cps, i, i + 1);
      in.check_size(out.size(), "the string str.replace makes");
    }
    return out;
  }
  size_t at = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old, at);
    if (found == std::string_view::npos) break;
    out.append(s.substr(at, found - at));
    out.append(replacement);
    in.check_size(out.size(), "the string str.replace makes");
    at = found + old.size();
    ++done;
  }
  out.append(s.substr(at));
  in.check_size(out.size(), "the string str.replace makes");
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  const auto cps = decode(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    const size_t end = i;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(encode(cps, start, keepends ? i + 1 : end));
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(encode(cps, start, cps.size()));
  return lines;
}

}  // namespace trainer::tokenizers::jinja
