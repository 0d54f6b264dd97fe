// math_verify's parse and verify for TRL's accuracy rewards (math_answer.h says what is covered):
// Python's regular expressions on ICU's, latex2sympy2_extended's normalization step by step, the
// numbers latex2sympy and parse_expr build, and sympy_expr_eq's comparisons of them.
#include "trl/math_answer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "lib/base/utf8.h"

namespace trainer::trl::math {

namespace {

// ---------------------------------------------------------------------------------------------
// Python's text: str.isspace, str.strip, len.

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

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

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

// Raised when a match runs past ICU's time limit (math_verify's parse times out), or where
// math_verify's extraction raises: its parse then returns [].
struct RegexTimeout {};
struct ParseAbort {};

// A text as ICU reads it: UTF-16, with each unit's byte offset in the UTF-8 text.
class IcuText {
 public:
  explicit IcuText(std::string_view utf8) {
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
  const icu::UnicodeString& unicode() const { return text_; }
  size_t byte(int32_t unit) const { return offsets_[static_cast<size_t>(unit)]; }

 private:
  icu::UnicodeString text_;
  std::vector<size_t> offsets_;
};

struct Span {
  size_t begin = 0, end = 0;
};

struct Match {
  Span whole;
  std::vector<std::optional<Span>> groups;  // group k + 1 at k
};

class PyRegex {
 public:
  PyRegex(std::string_view python_pattern, bool dotall) {
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

  // Python's finditer.
  std::vector<Match> finditer(const IcuText& text) const {
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
      throw std::runtime_error(std::string("math_answer: ICU regex failed: ") +
                               u_errorName(status));
    }
    return out;
  }

  bool search(std::string_view text) const {
    const IcuText icu_text(text);
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> matcher(regex_->matcher(icu_text.unicode(), status));
    if (U_SUCCESS(status)) matcher->setTimeLimit(kTimeLimit, status);
    const bool found = U_SUCCESS(status) && matcher->find(status);
    if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW) throw RegexTimeout{};
    return found;
  }

  // re.sub(pattern, replace, text).
  std::string sub(std::string_view text,
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

  // re.sub with "\1" (the first group, or "" where it took no part).
  std::string sub_group1(std::string_view text) const {
    return sub(text, [](const Match& m, std::string_view t) { return group(m, 0, t); });
  }

  // re.split(pattern, text) for a pattern without groups.
  std::vector<std::string> split(std::string_view text) const {
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

  static std::string group(const Match& m, size_t k, std::string_view text) {
    if (k >= m.groups.size() || !m.groups[k]) return "";
    return std::string(text.substr(m.groups[k]->begin, m.groups[k]->end - m.groups[k]->begin));
  }

  const std::vector<std::string>& names() const { return names_; }

 private:
  // ICU's steps (about a millisecond each); past them, as past math_verify's timeout, parse
  // gives nothing.
  static constexpr int32_t kTimeLimit = 5000;
  std::unique_ptr<icu::RegexPattern> regex_;
  std::vector<std::string> names_;
};

// ---------------------------------------------------------------------------------------------
// latex2sympy2_extended's normalize_latex.

enum class Boxed { kAll, kLast, kNone };

struct NormalizationConfig {
  bool basic_latex = true;
  bool units = false;
  bool malformed_operators = false;
  bool nits = false;
  Boxed boxed = Boxed::kAll;
};

// LatexExtractionConfig()'s (a solution's) and TRL's NormalizationConfig(units=True).
constexpr NormalizationConfig kSolutionNormalization{true, true, true, true, Boxed::kAll};
constexpr NormalizationConfig kCompletionNormalization{true, true, false, false, Boxed::kAll};

// The unit words normalize_latex drops from the end of an answer (latex2sympy2_extended 1.11.0's
// list, in its order, "integer" "point" joined as Python joins them), as the alternatives of its
// regular expression (so "q ." holds any character where it has the dot).
constexpr std::string_view kUnits =
    "integerpoint|feet|sue|digit|pound|meal|edge|student|children ticket|multiple|east|"
    "degree|mph|kmph|ft|m square| m east|sq m|deg|mile|q .|monkey|prime|ratio|profit of rs|"
    "rd|o|gm|p . m|lb|tile|per|dm|lt|gain|ab|way|west|a .|b .|c .|d .|e .|f .|g .|h .|t|h|"
    "no change|men|soldier|pie|bc|excess|st|inches|noon|cent|by|gal|kmh|c|acre|rise|a . m|th|"
    "π r 2|sq|mark|l|toy|coin|sq . m|gallon|° f|profit|minw|yr|women|am|pm|hr|cu cm|square|"
    "v â € ™|are|rupee|rounds|cubic|cc|mtr|s|ohm|number|kmph|day|hour|minute|min|second|man|"
    "woman|sec|cube|mt|sq inch|mp|∏ cm ³|hectare|more|sec|unit|cu . m|cm 2|rs .|rs|kg|g|"
    "month|km|m|cm|mm|apple|liter|loss|yard|pure|year|increase|decrease|d|less|Surface|litre|"
    "pi sq m|s .|metre|meter|inch";

// normalize_latex's replacements (to_replace_patterns): each group's name, pattern, replacement.
struct Replacement {
  const char* name;
  const char* pattern;
  const char* with;
};
constexpr Replacement kReplacements[] = {
    {"math", R"(\\math(?:rm|it|bf))", R"(\text)"},
    {"text", R"(\\text(?:normal|bf|it|rm))", R"(\text)"},
    {"frac", R"(\\(?:d|t|c)frac)", R"(\frac)"},
    {"decimal_space", R"(\s\.)", R"( 0.)"},
    {"decimal_brace", R"(\{\.)", R"({0.)"},
    {"approx", R"(\~\=)", R"(\approx)"},
    {"comma", R"(\s*\{\s*,\s*\})", R"(,)"},
    {"and_or", R"((?<![a-zA-Z])(,?\s*(?:and|or))(?![a-zA-Z]))", R"(,)"},
    {"and_or_text", R"((,?\s*\\text{\s*(?:and|or)\s*}))", R"(,)"},
    {"backslash_space", R"((?<!\\)\\\s)", R"( )"},
    {"infinity", R"(infinity)", R"(\infty)"},
    {"dot", R"(,?(\\ldots))", R"( )"},
    {"percentage", R"(\s*\bpercentage\b)", R"(\%)"},
    {"percentage_in_text", R"(\\text{percentage})", R"(%)"},
    {"percent", R"(\s*\bpercent\b)", R"(\%)"},
    {"percent_in_text", R"(\\text{percent})", R"(%)"},
    {"pct", R"(\s*\bpct\b)", R"(\%)"},
    {"pct_in_text", R"(\\text{pct})", R"(%)"},
    {"inf", R"(((?<!\\)inf(?!inity)))", R"(\infty)"},
    {"sqrt", R"( sqrt)", R"(\sqrt)"},
};

struct NormalizationRegexes {
  PyRegex left{R"(\\m?left(\\\{|\{|\\\||\||\[|\(|\\rbracl|\\lgroup|\\lbrace|\\lbrack|\\vert|)"
               R"(\\lvert|\\lceil|\\lfloor|\\vert|\\lvert|\\langle|\\llcorner|\\ulcorner))",
               false};
  PyRegex right{R"(\\m?right(\\\}|\}|\\\||\||\]|\)|\\rbrack|\\rgroup|\\rbrace|\\rbrack|\\vert|)"
                R"(\\rvert|\\rceil|\\rfloor|\\vert|\\rvert|\\rangle|\\lrcorner|\\urcorner))",
                false};
  PyRegex permutation{R"(\(([a-zA-Z0-9+\-*/\\ ]+?)\)_{([a-zA-Z0-9+\-*/\\ ]+?)})", false};
  PyRegex to_remove{R"(\\mathrm\{th\}|\\!\s*|\\text\s*\{\s*\}|\\text\s*\{\s*\}|\\\$|\$|)"
                    R"((?<!\\)["']|\\displaystyle)",
                    false};
  PyRegex to_replace{replacement_pattern(), false};
  PyRegex command_slash_fix{R"(\\\\(?=[a-zA-Z]))", false};
  PyRegex unit_superscript{R"((\\(?:text|mbox){.*?})(\^\d|\{\^\d\})?$)", false};
  PyRegex units{units_pattern(), false};
  PyRegex valid_separator{R"(\b(and|or)\b|,|;)", false};
  PyRegex equation_split{R"((?<!\\|\<|\!|\>)=)", false};
  std::vector<std::pair<PyRegex, std::function<std::string(const Match&, std::string_view)>>>
      malformed;

  NormalizationRegexes() {
    using M = const Match&;
    using T = std::string_view;
    auto g = [](M m, size_t k, T t) { return PyRegex::group(m, k, t); };
    malformed.emplace_back(PyRegex(R"(\^\s?\((.*?)\))", false),
                           [g](M m, T t) { return "^{" + g(m, 0, t) + "}"; });
    malformed.emplace_back(PyRegex(R"(sqrt\s?\((.*?)\))", false),
                           [g](M m, T t) { return "\\sqrt{" + g(m, 0, t) + "}"; });
    auto frac = [g](M m, T t) { return "\\frac{" + g(m, 0, t) + "}{" + g(m, 1, t) + "}"; };
    malformed.emplace_back(PyRegex(R"(\\frac\s?(\d)\s?(\d+))", false), frac);
    malformed.emplace_back(PyRegex(R"(\\log_\s?(\d)\s?(\d+))", false), [g](M m, T t) {
      return "\\log_{" + g(m, 0, t) + "}{" + g(m, 1, t) + "}";
    });
    malformed.emplace_back(PyRegex(R"(\\frac\s?{(.*?)}\s?(\d))", false), frac);
    malformed.emplace_back(PyRegex(R"(\\frac\s?(\d)\s?{(.*?)})", false), frac);
    malformed.emplace_back(PyRegex(R"(\\sqrt\s?(\d))", false),
                           [g](M m, T t) { return "\\sqrt{" + g(m, 0, t) + "}"; });
  }

  static std::string replacement_pattern() {
    std::string pattern;
    for (const Replacement& r : kReplacements) {
      if (!pattern.empty()) pattern += '|';
      pattern += std::string("(?P<") + r.name + ">" + r.pattern + ")";
    }
    return pattern;
  }

  static std::string units_pattern() {
    return R"((\d|\}|\s)\s*(?:(?:)" + std::string(kUnits) + R"()(?:s|es)?)\s*$)";
  }
};

const NormalizationRegexes& regexes() {
  static const NormalizationRegexes r;
  return r;
}

// extract_boxed_content: the \boxed{...} or \fbox{...} contents from the right; "last" keeps
// those close to the last (joined by commas), "all" every one.
std::string extract_boxed_content(std::string_view text, Boxed mode) {
  std::vector<std::string> results;
  size_t current = text.size();
  std::optional<size_t> last_boxed_start;
  size_t max_pos = text.size();
  auto rfind = [&](std::string_view needle) -> std::optional<size_t> {
    if (current < needle.size()) return std::nullopt;
    const size_t at = text.substr(0, current).rfind(needle);
    if (at == std::string_view::npos) return std::nullopt;
    return at;
  };
  while (true) {
    const std::optional<size_t> boxed = rfind("\\boxed");
    const std::optional<size_t> fbox = rfind("\\fbox");
    if (!boxed && !fbox) break;
    const bool is_boxed = boxed && (!fbox || *boxed > *fbox);
    const size_t start = is_boxed ? *boxed : *fbox;
    size_t next = start + (is_boxed ? 6 : 5);
    while (next < max_pos) {
      size_t length;
      if (!py_isspace(code_point(text, next, length))) break;
      next += length;
    }
    if (next >= max_pos) break;
    if (text[next] != '{') {
      if (results.empty()) results.emplace_back(text.substr(next));
      break;
    }
    // find_content_boundaries
    std::optional<size_t> close;
    int open = 1;
    for (size_t i = next; i + 1 < max_pos;) {
      ++i;
      if (text[i] == '{') {
        ++open;
      } else if (text[i] == '}') {
        if (--open == 0) {
          close = i;
          break;
        }
      }
    }
    if (!close) {
      if (results.empty()) results.emplace_back(text.substr(next));
      break;
    }
    const std::string content = py_strip(text.substr(next + 1, *close - next - 1));
    if (mode == Boxed::kLast && last_boxed_start) {
      // should_extract_boxed
      const std::string_view between = text.substr(*close + 1, *last_boxed_start - *close - 1);
      const std::string previous = results.empty() ? "" : results.back();
      const bool near = py_len(between) < 10;
      const bool separated =
          content != previous && py_len(between) < 70 && regexes().valid_separator.search(between);
      if (!near && !separated) break;
    }
    if (results.empty() || results.back() != content) results.push_back(content);
    last_boxed_start = start;
    max_pos = start;
    current = start;
  }
  if (results.empty()) return std::string(text);
  std::string joined;
  for (auto it = results.rbegin(); it != results.rend(); ++it) {
    if (!joined.empty()) joined += ',';
    joined += *it;
  }
  return joined;
}

// str.lstrip(): Python's whitespace.
std::string lstrip(const std::string& text) {
  size_t b = 0;
  while (b < text.size()) {
    size_t length;
    if (!py_isspace(code_point(text, b, length))) break;
    b += length;
  }
  return text.substr(b);
}

// _fix_sqrt: \sqrt3 as \sqrt{3}.
std::string fix_sqrt(const std::string& text) {
  if (text.find("\\sqrt") == std::string::npos) return text;
  std::vector<std::string> splits;
  for (size_t at = 0;;) {
    const size_t next = text.find("\\sqrt", at);
    splits.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 5;
  }
  std::string out = splits[0];
  for (size_t k = 1; k < splits.size(); ++k) {
    const std::string split = lstrip(splits[k]);
    if (!split.empty() && split[0] != '{' && split[0] != '[') {
      size_t length;
      code_point(split, 0, length);
      out += "\\sqrt{" + split.substr(0, length) + "}" + split.substr(length);
    } else {
      out += "\\sqrt" + split;
    }
  }
  return out;
}

// _fix_fracs: \frac12 as \frac{1}{2}, \frac1{2} as \frac{1}{2}.
std::string fix_fracs(const std::string& text) {
  std::vector<std::string> substrs;
  for (size_t at = 0;;) {
    const size_t next = text.find("\\frac", at);
    substrs.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 5;
  }
  std::string out = substrs[0];
  for (size_t k = 1; k < substrs.size(); ++k) {
    const std::string substr = lstrip(substrs[k]);
    out += "\\frac";
    if (!substr.empty() && substr[0] == '{') {
      out += substr;
      continue;
    }
    // Python indexes code points.
    size_t la = 0, lb = 0;
    if (!substr.empty()) code_point(substr, 0, la);
    if (py_len(substr) < 2) return text;
    code_point(substr, la, lb);
    const std::string a = substr.substr(0, la), b = substr.substr(la, lb);
    const std::string post = substr.substr(la + lb);
    if (b != "{") {
      out += "{" + a + "}{" + b + "}" + post;
    } else {
      out += "{" + a + "}" + b + post;
    }
  }
  return out;
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

// _fix_a_slash_b: "2/3" as \frac{2}{3} when it is exactly "{int}/{int}".
std::string fix_a_slash_b(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos) return text;
  const std::optional<int64_t> a = py_int(text.substr(0, slash));
  const std::optional<int64_t> b = py_int(text.substr(slash + 1));
  if (!a || !b) return text;
  if (text != std::to_string(*a) + "/" + std::to_string(*b)) return text;
  return "\\frac{" + std::to_string(*a) + "}{" + std::to_string(*b) + "}";
}

std::string normalize_latex(std::string text, const NormalizationConfig& config) {
  const NormalizationRegexes& r = regexes();
  if (config.boxed != Boxed::kNone) text = extract_boxed_content(text, config.boxed);
  if (config.basic_latex) {
    replace_all(text, "\\mathrm{T}", "T");
    replace_all(text, "\\mathrm{d}", "d");
    replace_all(text, "{\\rm d}", "d");
    replace_all(text, "\\left[\\begin{matrix}", "\\begin{bmatrix}");
    replace_all(text, "\\end{matrix}\\right]", "\\end{bmatrix}");
    text = r.left.sub_group1(text);
    text = r.right.sub_group1(text);
    text = r.permutation.sub(text, [](const Match& m, std::string_view t) {
      const std::string a = PyRegex::group(m, 0, t), b = PyRegex::group(m, 1, t);
      return "\\frac{(" + a + ")!}{((" + a + ")-(" + b + "))!}";
    });
    text = r.to_remove.sub(text, [](const Match&, std::string_view) { return std::string(); });
    text = r.to_replace.sub(text, [&r](const Match& m, std::string_view) {
      // lastgroup: the named group that matched (the alternatives' groups are the named ones).
      for (size_t k = 0; k < m.groups.size(); ++k) {
        if (!m.groups[k] || r.to_replace.names()[k].empty()) continue;
        for (const Replacement& rep : kReplacements) {
          if (r.to_replace.names()[k] == rep.name) return std::string(rep.with);
        }
      }
      return std::string();
    });
    replace_all(text, "\n", " ");
    replace_all(text, "\t", " ");
    if (text.find("matrix") == std::string::npos) {
      text = r.command_slash_fix.sub(
          text, [](const Match&, std::string_view) { return std::string("\\"); });
    }
  }
  if (config.units) {
    std::string stripped =
        py_strip(r.unit_superscript.sub(text, [](const Match&, std::string_view) { return ""; }));
    if (!stripped.empty() && stripped != text) text = stripped;
    for (int k = 0; k < 2; ++k) {
      std::string without = r.units.sub_group1(text);
      if (!without.empty() && without != text) text = without;
    }
  }
  if (config.nits) {
    if (!text.empty() && text[0] == '.') text = "0" + text;
    if (text == "0.5") text = "\\frac{1}{2}";
  }
  if (config.malformed_operators) {
    for (const auto& [regex, replace] : r.malformed) text = regex.sub(text, replace);
    replace_all(text, " sqrt", "\\sqrt");
    text = fix_sqrt(text);
    text = fix_fracs(text);
    text = fix_a_slash_b(text);
  }
  return py_strip(text);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Numbers (named, not anonymous: MathValue holds one).
namespace numbers {

struct Overflow {};

__int128 gcd128(__int128 a, __int128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    const __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// An exact rational of 64-bit parts; past them, Overflow.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;

  static Rational of(__int128 num, __int128 den) {
    if (den == 0) throw Overflow{};
    if (den < 0) num = -num, den = -den;
    const __int128 g = gcd128(num, den);
    if (g > 1) num /= g, den /= g;
    constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
    if (num > kMax || num < -kMax || den > kMax) throw Overflow{};
    return {static_cast<int64_t>(num), static_cast<int64_t>(den)};
  }
  bool is_integer() const { return den == 1; }
  double to_double() const { return static_cast<double>(num) / static_cast<double>(den); }
  Rational operator+(const Rational& o) const {
    return of(static_cast<__int128>(num) * o.den + static_cast<__int128>(o.num) * den,
              static_cast<__int128>(den) * o.den);
  }
  Rational operator-() const { return of(-static_cast<__int128>(num), den); }
  Rational operator-(const Rational& o) const { return *this + -o; }
  Rational operator*(const Rational& o) const {
    return of(static_cast<__int128>(num) * o.num, static_cast<__int128>(den) * o.den);
  }
  Rational operator/(const Rational& o) const {
    return of(static_cast<__int128>(num) * o.den, static_cast<__int128>(den) * o.num);
  }
  bool operator==(const Rational& o) const { return num == o.num && den == o.den; }
};

// A number as latex2sympy or parse_expr builds it: an atom (sympy's Integer, Rational or Float),
// a percentage (Mul(x, UnevaluatedExpr(1/100)) of an atom), or an unevaluated expression (Add,
// Mul, Pow) of them, which verify evaluates (doit): exactly without a Float, else as sympy's
// Floats do, a double per step.
struct Number {
  enum class Form { kAtom, kPercent, kExpression };
  Form form = Form::kAtom;
  bool is_float = false;     // a Float in it (kAtom: a Float; kPercent: of a Float)
  bool has_percent = false;  // an UnevaluatedExpr(1/100) in it (kPercent, or an expression of one)
  Rational exact;            // its value without a Float (kPercent: the number before / 100)
  double approx = 0;         // its value (kPercent: before / 100)
  std::optional<Rational> decimal;  // a Float atom's decimal as written ("0.5" is 1/2), exactly

  static Number integer(int64_t v) {
    Number n;
    n.exact = {v, 1};
    n.approx = static_cast<double>(v);
    return n;
  }
  static Number rational(const Rational& r) {
    Number n;
    n.exact = r;
    n.approx = r.to_double();
    return n;
  }
  static Number floating(double v) {
    Number n;
    n.is_float = true;
    n.approx = v;
    return n;
  }

  bool is_atom_integer() const { return form == Form::kAtom && !is_float && exact.is_integer(); }
  bool is_atom_rational() const { return form == Form::kAtom && !is_float; }
  // Its value after doit: exact (when no Float) and as a double (a Float percentage times the
  // double nearest 1/100, as sympy multiplies).
  Rational exact_value() const { return form == Form::kPercent ? exact / Rational{100, 1} : exact; }
  double value() const {
    if (form != Form::kPercent) return approx;
    return is_float ? approx * 0.01 : exact_value().to_double();
  }
};

Number percent_of(const Number& n) {
  Number p = n;
  p.has_percent = true;
  p.decimal.reset();
  if (n.form == Number::Form::kAtom) {
    p.form = Number::Form::kPercent;
    return p;
  }
  // Mul(expr, UnevaluatedExpr(1/100)): an expression whose value is the percentage.
  p.form = Number::Form::kExpression;
  if (!n.is_float) p.exact = n.exact_value() / Rational{100, 1};
  p.approx = n.is_float ? n.value() * 0.01 : p.exact.to_double();
  return p;
}

// a + b, a * b, a / b as doit evaluates them (a / b is a * b**-1).
Number combine(const Number& a, const Number& b, char op) {
  Number n;
  n.form = Number::Form::kExpression;
  n.is_float = a.is_float || b.is_float;
  n.has_percent = a.has_percent || b.has_percent;
  if (!n.is_float) {
    const Rational p = a.exact_value(), q = b.exact_value();
    if (op == '/' && q.num == 0) throw Overflow{};  // zoo: not a number we compare
    n.exact = op == '+' ? p + q : op == '*' ? p * q : p / q;
    n.approx = n.exact.to_double();
    return n;
  }
  const double x = a.value(), y = b.value();
  if (op == '/' && y == 0) throw Overflow{};
  n.approx = op == '+' ? x + y : op == '*' ? x * y : x * (1.0 / y);
  return n;
}

Number negate(const Number& a) {
  if (a.form == Number::Form::kAtom) {
    Number n = a;
    if (!a.is_float) n.exact = -a.exact;
    if (a.decimal) n.decimal = -*a.decimal;
    n.approx = -a.approx;
    return n;
  }
  return combine(Number::integer(-1), a, '*');
}

Number power(const Number& base, const Number& exponent) {
  Number n;
  n.form = Number::Form::kExpression;
  n.has_percent = base.has_percent || exponent.has_percent;
  if (exponent.is_float) {
    // A Float exponent (parse_expr's 10**6.): evaluated as a Float.
    n.is_float = true;
    n.approx = std::pow(base.value(), exponent.value());
    if (!std::isfinite(n.approx)) throw Overflow{};
    return n;
  }
  if (!exponent.exact_value().is_integer()) throw Overflow{};
  const int64_t e = exponent.exact_value().num;
  if (e > 64 || e < -64) throw Overflow{};
  n.is_float = base.is_float;
  if (!base.is_float) {
    const Rational b = base.exact_value();
    if (b.num == 0 && e < 0) throw Overflow{};
    Rational r{1, 1};
    for (int64_t k = 0; k < (e < 0 ? -e : e); ++k) r = r * b;
    n.exact = e < 0 ? Rational{1, 1} / r : r;
    n.approx = n.exact.to_double();
  } else {
    n.approx = std::pow(base.value(), static_cast<double>(e));
  }
  return n;
}

// sympy's Number(text) for digits with an optional sign and decimal part (Integer or Float).
Number number_of(std::string_view text) {
  const size_t point = text.find('.');
  if (point != std::string_view::npos) {
    Number n = Number::floating(std::strtod(std::string(text).c_str(), nullptr));
    // The decimal as written, when it fits: what Float.round(6) rounds (its digits are within
    // the Float's precision, which grows with them).
    std::string digits(text.substr(0, point));
    digits += text.substr(point + 1);
    if (const std::optional<int64_t> m = py_int(digits)) {
      const size_t places = text.size() - point - 1;
      if (places <= 18) {
        int64_t scale = 1;
        for (size_t k = 0; k < places; ++k) scale *= 10;
        n.decimal = Rational::of(*m, scale);
      }
    }
    return n;
  }
  const std::optional<int64_t> v = py_int(text);
  if (!v) throw Overflow{};
  return Number::integer(*v);
}

}  // namespace numbers

using namespace numbers;

struct MathValue {
  enum class Kind { kNumber, kEquation, kText };
  Kind kind = Kind::kText;
  Number number;                           // kNumber
  std::string text;                        // kText: its canonical text; kEquation: left side's
  std::optional<std::string> symbol;       // kText: the name of the one Symbol it is
  bool assignment = false;                 // kEquation: the left side only symbols
  std::shared_ptr<const MathValue> right;  // kEquation: the last right side
};

namespace {

using ValuePtr = std::shared_ptr<const MathValue>;

ValuePtr number_value(const Number& n) {
  auto v = std::make_shared<MathValue>();
  v->kind = MathValue::Kind::kNumber;
  v->number = n;
  return v;
}

// A LaTeX text as sympy's equality sees it for what is not a number: spaces and spacing commands
// dropped (a space kept where it ends a command before a letter), letters lowercased outside
// command names (latex2sympy lowercases symbols).
std::string canonical_text(std::string_view text) {
  std::string t = py_strip(text);
  if (!t.empty() && t[0] == '+') t.erase(0, 1);  // a unary plus changes nothing
  for (const char* spacing : {"\\qquad", "\\quad", "\\,", "\\;", "\\:", "\\!"}) {
    replace_all(t, spacing, " ");
  }
  std::string out;
  bool in_command = false;
  bool space = false;
  for (size_t i = 0; i < t.size();) {
    size_t length;
    const char32_t c = code_point(t, i, length);
    if (py_isspace(c)) {
      space = true;
      in_command = false;
      i += length;
      continue;
    }
    if (space && !out.empty() && is_letter(static_cast<char>(c < 128 ? c : 0))) {
      // "\pi r" is not "\pir".
      size_t k = out.size();
      while (k > 0 && is_letter(out[k - 1])) --k;
      if (k > 0 && out[k - 1] == '\\' && k < out.size()) out += ' ';
    }
    space = false;
    const char ch = c < 128 ? static_cast<char>(c) : 0;
    if (ch == '\\') {
      in_command = true;
      out += ch;
    } else if (is_letter(ch)) {
      out += in_command ? ch : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else {
      in_command = false;
      out.append(t, i, length);
    }
    i += length;
  }
  return out;
}

// The name of the Symbol latex2sympy makes of `text` when it makes one: \text{...} (its text
// without spaces, lowercased, "(A)" as "a"), or one letter (but e and i, sympy's E and I).
std::optional<std::string> symbol_of(std::string_view text) {
  const std::string t = py_strip(text);
  std::string name;
  if (t.rfind("\\text{", 0) == 0 && t.back() == '}' && t.find('}') == t.size() - 1 &&
      t.find('{', 6) == std::string::npos) {
    for (const char c : t.substr(6, t.size() - 7)) {
      if (c == '\\' || c == '$') return std::nullopt;
      if (c != ' ') name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  } else {
    for (const char c : t) {
      if (c != ' ') name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (name.size() == 3 && name[0] == '(' && name[2] == ')') name = name.substr(1, 1);
    if (name.size() != 1 || !is_letter(name[0]) || name == "e" || name == "i") return std::nullopt;
  }
  if (name.size() > 2 && name.front() == '(' && name.back() == ')' &&
      name.find_first_of("()", 1) == name.size() - 1) {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty()) return std::nullopt;
  return name;
}

ValuePtr text_value(std::string_view text) {
  auto v = std::make_shared<MathValue>();
  v->kind = MathValue::Kind::kText;
  v->text = canonical_text(text);
  v->symbol = symbol_of(text);
  return v;
}

// latex2sympy on a normalized text: a number of the forms math_answer.h names, a text (what
// sympy would build otherwise, taken to parse), or nothing (what latex2sympy refuses).
struct NotANumber {};  // sympy would build something else: the value is the text
struct Malformed {};   // latex2sympy raises: no value

class LatexNumberParser {
 public:
  explicit LatexNumberParser(std::string_view text) : s_(text) {}

  Number parse_whole() {
    Number n = additive();
    skip_spaces();
    if (at_ < s_.size()) {
      if (s_[at_] == ')' || s_[at_] == ']' || s_[at_] == '}') throw Malformed{};
      throw NotANumber{};
    }
    return n;
  }

 private:
  std::string_view s_;
  size_t at_ = 0;

  bool starts(std::string_view word) const { return s_.substr(at_, word.size()) == word; }
  // A command `word` (not the start of a longer command name).
  bool command(std::string_view word) const {
    if (!starts(word)) return false;
    const size_t end = at_ + word.size();
    return end >= s_.size() || !is_letter(s_[end]) || !is_letter(word.back());
  }

  void skip_spaces() {
    while (at_ < s_.size()) {
      if (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r') {
        ++at_;
      } else if (command("\\,") || command("\\;") || command("\\:")) {
        at_ += 2;
      } else if (command("\\qquad")) {
        at_ += 6;
      } else if (command("\\quad")) {
        at_ += 5;
      } else {
        break;
      }
    }
  }

  bool end() {
    skip_spaces();
    return at_ >= s_.size();
  }

  // mp's operators and additive's, where they stop a list of juxtaposed factors.
  bool at_operator() {
    skip_spaces();
    if (at_ >= s_.size()) return true;
    const char c = s_[at_];
    if (c == '+' || c == '-' || c == '*' || c == '/' || c == ':' || c == ')' || c == ']' ||
        c == '}' || c == '=') {
      return true;
    }
    return command("\\cdot") || command("\\times") || command("\\div");
  }

  Number additive() {
    Number left = multiplicative();
    while (!end()) {
      const char c = s_[at_];
      if (c != '+' && c != '-') break;
      ++at_;
      if (end()) throw Malformed{};
      Number right = multiplicative();
      if (c == '-') {
        // convert_add: a Number is negated, anything else multiplied by -1.
        right = right.form == Number::Form::kAtom ? negate(right)
                                                  : combine(Number::integer(-1), right, '*');
      }
      left = combine(left, right, '+');
    }
    return left;
  }

  Number multiplicative() {
    Number left = unary();
    while (!end()) {
      char op = 0;
      if (s_[at_] == '*') {
        op = '*', at_ += 1;
      } else if (command("\\cdot")) {
        op = '*', at_ += 5;
      } else if (command("\\times")) {
        op = '*', at_ += 6;
      } else if (s_[at_] == '/' || s_[at_] == ':') {
        op = '/', at_ += 1;
      } else if (command("\\div")) {
        op = '/', at_ += 4;
      } else {
        break;
      }
      if (end()) throw Malformed{};
      const Number right = unary();
      if (op == '/' && left.is_atom_integer() && right.is_atom_integer()) {
        if (right.exact.num == 0) throw NotANumber{};  // zoo
        left = Number::rational(left.exact / right.exact);
      } else {
        left = combine(left, right, op);
      }
    }
    return left;
  }

  Number unary() {
    if (end()) throw Malformed{};
    if (s_[at_] == '+') {
      ++at_;
      return unary();
    }
    if (s_[at_] == '-') {
      ++at_;
      return negate(unary());
    }
    std::vector<Number> items;
    while (!at_operator()) items.push_back(exponentiated());
    if (items.empty()) throw Malformed{};
    // convert_postfix_list, from the right: an Integer before a positive Rational is a mixed
    // fraction (2 \frac{1}{2} is 5/2, "2 3" is 5), anything else a product.
    Number right = items.back();
    for (size_t k = items.size() - 1; k-- > 0;) {
      const Number& left = items[k];
      if (left.is_atom_integer() && right.is_atom_rational() && right.exact.num > 0) {
        const Rational l = left.exact, r = right.exact;
        right = Number::rational(left.exact.num < 0 ? l - r : l + r);
      } else {
        right = combine(left, right, '*');
      }
    }
    return right;
  }

  Number exponentiated() {
    Number base = component();
    while (true) {
      skip_spaces();
      if (at_ >= s_.size() || s_[at_] != '^') break;
      ++at_;
      skip_spaces();
      if (command("\\circ")) {
        at_ += 5;
        continue;
      }
      if (starts("{")) {
        const size_t save = at_;
        ++at_;
        skip_spaces();
        if (command("\\circ")) {
          at_ += 5;
          skip_spaces();
          if (starts("}")) {
            ++at_;
            continue;
          }
        }
        at_ = save + 1;
        const Number exponent = additive();
        skip_spaces();
        if (!starts("}")) throw Malformed{};
        ++at_;
        base = power(base, exponent);
        continue;
      }
      if (at_ < s_.size() && is_digit(s_[at_])) {
        base = power(base, Number::integer(s_[at_] - '0'));
        ++at_;
        continue;
      }
      throw NotANumber{};
    }
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == '!') throw NotANumber{};
    return base;
  }

  Number braced() {
    skip_spaces();
    if (!starts("{")) throw NotANumber{};
    ++at_;
    Number n = additive();
    skip_spaces();
    if (!starts("}")) throw Malformed{};
    ++at_;
    return n;
  }

  Number component() {
    skip_spaces();
    if (at_ >= s_.size()) throw Malformed{};
    const char c = s_[at_];
    if (c == '(' || c == '[') {
      ++at_;
      Number n = additive();
      skip_spaces();
      if (at_ >= s_.size()) throw Malformed{};
      if (s_[at_] != (c == '(' ? ')' : ']')) throw NotANumber{};
      ++at_;
      return n;
    }
    if (command("\\frac")) {
      at_ += 5;
      const Number top = braced();
      const Number bottom = braced();
      if (top.is_atom_integer() && bottom.is_atom_integer()) {
        if (bottom.exact.num == 0) throw NotANumber{};
        return Number::rational(top.exact / bottom.exact);
      }
      return combine(top, bottom, '/');
    }
    if (is_digit(c) || c == '.') return number();
    if (c == '%' || starts("\\%")) throw Malformed{};  // a percent sign after no number
    throw NotANumber{};
  }

  // NUMBER, or PERCENT_NUMBER: a number then "\%" or "%".
  Number number() {
    const size_t begin = at_;
    while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      const size_t fraction = at_;
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
      if (at_ == fraction) throw Malformed{};  // "5.": latex2sympy refuses it
    }
    if (at_ < s_.size() && (is_letter(s_[at_]) || s_[at_] == ',')) throw NotANumber{};
    std::string digits(s_.substr(begin, at_ - begin));
    if (digits.find('.') == std::string::npos) {
      while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
    }
    const Number n = number_of(digits);
    const size_t save = at_;
    skip_spaces();
    if (starts("\\%")) {
      at_ += 2;
      return percent_of(n);
    }
    if (starts("%")) {
      at_ += 1;
      return percent_of(n);
    }
    at_ = save;
    return n;
  }
};

// Python's \s* -?\d{1,3}(,\d{3})+(\.\d+)? \s* over the whole text (latex2sympy's numbers with
// thousands separators).
bool is_comma_number(std::string_view text) {
  const std::string t = py_strip(text);
  size_t i = 0;
  if (i < t.size() && t[i] == '-') ++i;
  const size_t lead = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  if (i - lead < 1 || i - lead > 3) return false;
  int groups = 0;
  while (i < t.size() && t[i] == ',') {
    for (size_t k = 1; k <= 3; ++k) {
      if (i + k >= t.size() || !is_digit(t[i + k])) return false;
    }
    i += 4;
    ++groups;
  }
  if (groups == 0) return false;
  if (i < t.size() && t[i] == '.') {
    const size_t fraction = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == fraction) return false;
  }
  return i == t.size();
}

// latex2sympy's convert_number for those.
Number convert_comma_number(std::string text) {
  if (text.find(',') != std::string::npos && !text.empty() && text[0] == '0') {
    replace_all(text, ",", ".");
  }
  std::string digits;
  for (const char c : text) {
    if (c != ',' && c != ' ') digits += c;
  }
  while (!digits.empty() && digits[0] == '0') digits.erase(0, 1);
  if (digits.empty()) digits = "0";
  return number_of(digits);
}

// Whether `text` holds the command \name (not the start of a longer command name).
bool has_command(std::string_view text, std::string_view name) {
  for (size_t at = text.find('\\'); at != std::string_view::npos; at = text.find('\\', at + 1)) {
    if (text.substr(at + 1, name.size()) != name) continue;
    const size_t end = at + 1 + name.size();
    if (end >= text.size() || !is_letter(text[end])) return true;
  }
  return false;
}

// The depth-0 positions of `what` in `text` (outside (), [], {}).
std::vector<size_t> top_level(std::string_view text, char what) {
  std::vector<size_t> at;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      // An escaped character ("\;", "\,") separates nothing; \{ \} nest as braces.
      if (text[i + 1] == '{' || text[i + 1] == '}') depth += text[i + 1] == '{' ? 1 : -1;
      ++i;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    } else if (depth == 0 && c == what) {
      at.push_back(i);
    }
  }
  return at;
}

bool balanced(std::string_view text) {
  int braces = 0, others = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      ++i;
      continue;
    }
    if (c == '{') ++braces;
    if (c == '}' && --braces < 0) return false;
    if (c == '(' || c == '[') ++others;
    if (c == ')' || c == ']') --others;
  }
  // Intervals pair ( with ]: only their count is checked.
  return braces == 0 && others == 0;
}

// Whether the brace (or \\{) that opens `text` closes at its end.
bool encloses(std::string_view text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) c = text[++i];
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) return i + 1 == text.size();
  }
  return false;
}

// Whether a left side is only symbols (latex2sympy's is_expr_of_only_symbols of what it builds):
// letters but e and i (E and I), Greek letters but \pi, \text{word}, each with a subscript.
bool only_symbols(std::string_view text) {
  size_t i = 0, symbols = 0;
  auto skip = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  static const char* kGreek[] = {"alpha", "beta",  "gamma",  "delta", "epsilon", "zeta",  "eta",
                                 "theta", "kappa", "lambda", "mu",    "nu",      "xi",    "rho",
                                 "sigma", "tau",   "phi",    "chi",   "psi",     "omega", "Gamma",
                                 "Delta", "Theta", "Lambda", "Sigma", "Phi",     "Psi",   "Omega"};
  skip();
  while (i < text.size()) {
    if (is_letter(text[i])) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
      if (c == 'e' || c == 'i') return false;
      ++i;
    } else if (text[i] == '\\') {
      size_t k = i + 1;
      while (k < text.size() && is_letter(text[k])) ++k;
      const std::string_view name = text.substr(i + 1, k - i - 1);
      if (name == "text") {
        if (k >= text.size() || text[k] != '{') return false;
        const size_t close = text.find('}', k);
        if (close == std::string_view::npos || close == k + 1) return false;
        for (size_t j = k + 1; j < close; ++j) {
          if (!is_letter(text[j]) && text[j] != ' ') return false;
        }
        i = close + 1;
      } else {
        bool greek = false;
        for (const char* g : kGreek) greek = greek || name == g;
        if (!greek) return false;
        i = k;
      }
    } else {
      return false;
    }
    ++symbols;
    if (i < text.size() && text[i] == '_') {
      ++i;
      if (i < text.size() && text[i] == '{') {
        const size_t close = text.find('}', i);
        if (close == std::string_view::npos) return false;
        i = close + 1;
      } else if (i < text.size() && (is_letter(text[i]) || is_digit(text[i]))) {
        ++i;
      } else {
        return false;
      }
    }
    skip();
  }
  return symbols > 0;
}

// The result of latex2sympy on a normalized text: a value, or nullptr when it raises.
ValuePtr latex_value(std::string_view text);

ValuePtr expression_value(std::string_view text) {
  if (py_strip(text).empty()) return nullptr;
  try {
    return number_value(LatexNumberParser(text).parse_whole());
  } catch (const Malformed&) {
    return nullptr;
  } catch (const NotANumber&) {
    return text_value(text);
  } catch (const Overflow&) {
    return text_value(text);
  }
}

ValuePtr latex_value(std::string_view text) {
  const std::string t = py_strip(text);
  if (t.empty() || !balanced(t)) return nullptr;
  for (const unsigned char c : t) {
    if (c >= 0x80) return nullptr;  // latex2sympy's lexer has no token for it
  }
  if (!top_level(t, ',').empty() || !top_level(t, ';').empty()) {
    if (is_comma_number(t)) {
      try {
        return number_value(convert_comma_number(t));
      } catch (const Overflow&) {
        return text_value(t);
      }
    }
    return text_value(t);  // a set, a tuple, an interval
  }
  if (t[0] == '{' || t.rfind("\\{", 0) == 0) {
    // A set: of one element, equal to it (sympy_compare_sets wraps a value in a FiniteSet);
    // of more, a text.
    const size_t open = t[0] == '{' ? 1 : 2;
    const std::string_view close = t[0] == '{' ? "}" : "\\}";
    if (t.size() >= open + close.size() &&
        t.compare(t.size() - close.size(), close.size(), close) == 0) {
      const std::string inner = t.substr(open, t.size() - open - close.size());
      if (balanced(inner) && encloses(t)) {
        if (top_level(inner, ',').empty() && top_level(inner, ';').empty()) {
          return py_strip(inner).empty() ? text_value(t) : latex_value(inner);
        }
        return text_value(t);
      }
    }
    return text_value(t);
  }
  if (t.find('<') != std::string::npos || t.find('>') != std::string::npos) return text_value(t);
  for (const char* relation : {"le", "leq", "ge", "geq", "ne", "neq", "approx", "in", "sim", "lt",
                               "gt", "notin", "subset", "subseteq", "cup", "cap", "setminus"}) {
    if (has_command(t, relation)) return text_value(t);
  }
  const std::vector<std::string> parts = regexes().equation_split.split(t);
  if (parts.size() == 1) return expression_value(t);
  std::vector<ValuePtr> values;
  for (const std::string& part : parts) {
    values.push_back(latex_value(part));
    if (!values.back()) return nullptr;
  }
  auto v = std::make_shared<MathValue>();
  v->kind = MathValue::Kind::kEquation;
  v->text = canonical_text(parts.front());
  v->assignment = only_symbols(py_strip(parts.front()));
  v->right = values.back();
  return v;
}

// parse_latex_cached: latex2sympy, then (when it raises) the last of three or more equated parts.
ValuePtr parse_latex(const std::string& latex) {
  if (ValuePtr v = latex_value(latex)) return v;
  if (latex.find(',') == std::string::npos && latex.find(';') == std::string::npos) {
    const std::vector<std::string> parts = regexes().equation_split.split(latex);
    if (parts.size() > 2) return latex_value(parts.back());
  }
  return nullptr;
}

// sympy's parse_expr(text, evaluate=False) on a plain expression of math_verify's expr pattern
// (digits, . + - * / ^ ( ) and spaces, ^ read as **).
class PlainExpressionParser {
 public:
  explicit PlainExpressionParser(std::string_view text) : s_(text) {}

  Number parse_whole() {
    Number n = sum();
    skip();
    if (at_ < s_.size()) throw Malformed{};
    return n;
  }

 private:
  std::string_view s_;
  size_t at_ = 0;

  void skip() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' ||
                               s_[at_] == '\r' || s_[at_] == '\f' || s_[at_] == '\v')) {
      ++at_;
    }
  }
  bool take(std::string_view op) {
    skip();
    if (s_.substr(at_, op.size()) != op) return false;
    at_ += op.size();
    return true;
  }

  Number sum() {
    Number left = product();
    while (true) {
      if (take("+")) {
        left = combine(left, product(), '+');
      } else if (take("-")) {
        left = combine(left, negate_expr(product()), '+');
      } else {
        return left;
      }
    }
  }
  static Number negate_expr(const Number& n) {
    return n.form == Number::Form::kAtom ? negate(n) : combine(Number::integer(-1), n, '*');
  }
  Number product() {
    Number left = factor();
    while (true) {
      skip();
      if (s_.substr(at_, 2) == "//") throw NotANumber{};  // floor: not built here
      if (take("*")) {
        left = combine(left, factor(), '*');
      } else if (take("/")) {
        left = combine(left, factor(), '/');
      } else {
        return left;
      }
    }
  }
  Number factor() {
    if (take("+")) return factor();
    if (take("-")) return negate_expr(factor());
    Number base = atom();
    skip();
    if (s_.substr(at_, 2) == "**") {
      at_ += 2;
      return power(base, factor());
    }
    return base;
  }
  Number atom() {
    skip();
    if (take("(")) {
      Number n = sum();
      if (!take(")")) throw Malformed{};
      return n;
    }
    const size_t begin = at_;
    while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    const size_t whole = at_ - begin;
    bool decimal = false;
    if (at_ < s_.size() && s_[at_] == '.') {
      decimal = true;
      ++at_;
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    }
    if (at_ == begin || (decimal && at_ == begin + 1)) throw Malformed{};
    const std::string_view token = s_.substr(begin, at_ - begin);
    // Python refuses leading zeros in an integer ("007"); a second "." ends in a syntax error.
    if (!decimal && whole > 1 && token[0] == '0') throw Malformed{};
    if (at_ < s_.size() && (s_[at_] == '.' || is_digit(s_[at_]))) throw Malformed{};
    return number_of(token);
  }
};

// ---------------------------------------------------------------------------------------------
// Extraction: math_verify's patterns, as lazy_latex_regex and lazy_expr_regex build them.

enum class Target { kLatex, kExpr };

struct Pattern {
  PyRegex regex;
  int priority;
  Target target;
};

std::string latex_env_pattern(const std::string& prefix, bool boxed) {
  const std::string percent =
      "(?P<" + prefix + "percent>(?:\\\\?%|[Pp]ercent|[Pp]ercentage|[Pp]ct))";
  std::string display_dollar = R"((?:[^$]|\$(?!\$)))";
  std::string display_bracket = R"((?:[^\\]|\\(?!\])))";
  std::string inline_dollar = R"((?:\\[$]|[^\n$]))";
  std::string inline_parenthesis = R"((?:[^\\\n]|\\(?!\))))";
  std::string inline_bracket = R"([^\n\]\[])";
  for (std::string* content :
       {&display_dollar, &display_bracket, &inline_dollar, &inline_parenthesis, &inline_bracket}) {
    const std::string c = *content;
    *content = boxed ? c + "*?\\\\boxed{" + c + "+?}" + c + "*?" : c + "+?";
  }
  std::vector<std::string> patterns = {
      R"((?<!\\)\$\$(?P<)" + prefix + "latexDisplayDollar>" + display_dollar + R"()(?<!\\)\$\$)",
      R"((?<!\\)\\\[(?P<)" + prefix + "latexDisplayBracket>" + display_bracket + R"()(?<!\\)\\\])",
      R"((?<!\\|\d)\$(?P<)" + prefix + "latexInlineDollar>" + inline_dollar + R"()(?<!\\)\$)",
      R"((?<!\\)\\\((?P<)" + prefix + "latexInlineParenthesis>" + inline_parenthesis +
          R"()(?<!\\)\\\))",
      R"(\s\[(?P<)" + prefix + "latexInlineBracket>" + inline_bracket + R"()\]\s)",
  };
  if (!boxed) {
    const std::string simple = R"(-?\d+(?:[.,]\d+)?)";
    patterns.push_back("(?P<" + prefix + "latexFraction>-?\\\\frac{" + simple + "}{" + simple +
                       "})");
  }
  std::string alternatives;
  for (const std::string& p : patterns) {
    if (!alternatives.empty()) alternatives += '|';
    alternatives += p;
  }
  return "(?:(?:" + alternatives + ")\\s*" + percent + "?)";
}

std::vector<std::pair<std::string, int>> latex_patterns(bool anchorless, int boxed_priority) {
  std::string next;
  for (int i = 1; i <= 5; ++i) {
    next += R"((?:\s*(?:,?and|,?or|,)\s*)" +
            latex_env_pattern("next" + std::to_string(i) + "_", false) + ")?";
  }
  const std::string envs = "(?:" + latex_env_pattern("first_", false) + next + ")";
  std::vector<std::pair<std::string, int>> out = {
      {R"((?i:final answer is)\:?\s*)" + envs + R"(\.?\s?I hope)", 0},
      {R"((?i:final answer.{0,100}?)\s+is\:?\s*)" + envs, 50},
      {R"((?i:answer):.{0,50}?)" + envs, 100},
      {R"((?i:answer).{0,50}?)" + envs, 200},
  };
  if (anchorless) out.emplace_back(envs, 300);
  if (boxed_priority >= 0) {
    std::string boxed = latex_env_pattern("first_", true);
    for (int i = 1; i <= 5; ++i) {
      boxed += R"(\s*(?:\s*(?:,?and|,?or|,)\s*)" +
               latex_env_pattern("next" + std::to_string(i) + "_", true) + ")?";
    }
    out.emplace_back(boxed, boxed_priority);
    out.emplace_back(R"((?P<first_latexBoxed>\\boxed{.+}))", boxed_priority);
  }
  return out;
}

std::vector<std::pair<std::string, int>> expr_patterns() {
  const std::string number =
      R"((?<!\d)(?:(?P<integer1>-?[1-9]\d{0,2}(?:[ ,]\d{3})+)(?P<decimal1>\.\d+)?|)"
      R"((?P<integer2>-?\d+)(?P<decimal2>[.,]\d+)|(?P<decimal3>\.\d+)|(?P<integer3>-?\d+)))"
      R"((?P<percent>\s*(?:%|[Pp]ercent|\s*[Pp]ercentage|\s*[Pp]ct))?)";
  const std::string operators = R"(\+\-\*×\/\^\(\)÷)";
  const std::string all = R"([\d\.\s)" + operators + "]";
  const std::string expr =
      R"((?P<expr>-?\(?-?\d)" + all + "*[" + operators + "]" + all + R"(+\)?))";
  const std::string currency =
      R"([\$€£¥₹₽₪₩₫฿₡₢₣₤₥₦₧₨₩₪₫₭₮₯₰₱₲₳₴₵₶₷₸₹₺₻₼₽₾₿])";
  const std::string prefix = R"((?:^|\s|\=)(?:\*\*)?)";
  const std::string suffix = R"((?:\*\*)?(?:\.|,|:|\s|\)|\$|$))";
  const std::string with_anchors = "(?:" + prefix + expr + suffix + ")";
  const std::string number_with_anchors = "(?:" + prefix + currency + "?" + number + ")";
  const std::string either = "(?:" + with_anchors + "|" + number_with_anchors + ")";
  return {
      {R"((?i:final answer is)\:?\s*)" + either + R"(\.?\s?I hope)", 0},
      {R"((?i:final answer.{0,100}?)\s+is\:?)" + either, 50},
      {R"((?i:answer):(?:.{0,100}=\s*|.{0,50}?))" + either + R"((?!\s*=))", 100},
      {R"((?i:answer)(?:.{0,100}=\s*|.{0,50}?))" + either + R"((?!\s*=))", 200},
      {with_anchors, 300},
      {number_with_anchors, 300},
  };
}

// The patterns of the targets in order, sorted by priority (stably, as Python's sorted).
std::vector<Pattern> compile(
    const std::vector<std::pair<Target, std::vector<std::pair<std::string, int>>>>& targets) {
  std::vector<Pattern> out;
  for (const auto& [target, patterns] : targets) {
    for (const auto& [pattern, priority] : patterns) {
      out.push_back(Pattern{PyRegex(pattern, target == Target::kLatex), priority, target});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Pattern& a, const Pattern& b) { return a.priority < b.priority; });
  return out;
}

const std::vector<Pattern>& solution_patterns() {
  static const std::vector<Pattern> patterns =
      compile({{Target::kLatex, latex_patterns(true, 50)}, {Target::kExpr, expr_patterns()}});
  return patterns;
}

const std::vector<Pattern>& completion_patterns() {
  static const std::vector<Pattern> patterns =
      compile({{Target::kLatex, latex_patterns(false, 0)}});
  return patterns;
}

struct Extracted {
  ValuePtr value;
  std::string fallback;
};

std::optional<std::string> named(const Pattern& p, const Match& m, std::string_view name,
                                 std::string_view text) {
  const std::vector<std::string>& names = p.regex.names();
  for (size_t k = 0; k < names.size(); ++k) {
    if (names[k] == name) {
      if (!m.groups[k]) return std::nullopt;
      return PyRegex::group(m, k, text);
    }
  }
  return std::nullopt;
}

ValuePtr percent_value(const ValuePtr& v) {
  if (!v) return v;
  if (v->kind == MathValue::Kind::kNumber) {
    return number_value(percent_of(v->number));
  }
  auto p = std::make_shared<MathValue>(*v);
  p->kind = MathValue::Kind::kText;
  p->text = (v->kind == MathValue::Kind::kText ? v->text : "(" + v->text + ")") + "%";
  return p;
}

// extract_latex.
Extracted extract_latex(const Pattern& p, const Match& m, std::string_view text,
                        const NormalizationConfig& config) {
  const std::vector<std::string>& names = p.regex.names();
  std::vector<std::pair<std::string, std::string>> groups;  // (value, name)
  for (int i = 0; i <= 5; ++i) {
    const std::string prefix = i == 0 ? "first_latex" : "next" + std::to_string(i) + "_latex";
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].rfind(prefix, 0) != 0 || !m.groups[k]) continue;
      std::string value = PyRegex::group(m, k, text);
      if (value.empty()) continue;
      groups.emplace_back(std::move(value), names[k]);
      break;
    }
  }
  if (groups.empty()) return {};
  std::vector<ValuePtr> values;
  std::vector<std::string> strings;
  for (const auto& [latex, name] : groups) {
    const std::string prefix = name.substr(0, name.find('_'));
    const std::string group_name = name.substr(name.find('_') + 1);
    const std::optional<std::string> percent = named(p, m, prefix + "_percent", text);
    NormalizationConfig c = config;
    if (group_name == "latexBoxed") c.boxed = Boxed::kLast;
    const std::string normalized = normalize_latex(latex, c);
    strings.push_back(normalized);
    ValuePtr v = parse_latex(normalized);
    if (v && percent && !percent->empty()) v = percent_value(v);
    values.push_back(v);
  }
  if (values.size() > 1 &&
      std::all_of(values.begin(), values.end(), [](const ValuePtr& v) { return v != nullptr; })) {
    // A FiniteSet of them: compared as its text.
    std::string joined;
    for (const ValuePtr& v : values) {
      joined += (joined.empty() ? "" : ",") +
                (v->kind == MathValue::Kind::kNumber ? std::to_string(v->number.value()) : v->text);
    }
    auto set = std::make_shared<MathValue>();
    set->kind = MathValue::Kind::kText;
    set->text = "{" + joined + "}";
    std::string fallback;
    for (const std::string& s : strings) fallback += (fallback.empty() ? "" : " and ") + s;
    return {set, fallback};
  }
  return {values[0], strings[0]};
}

// extract_expr.
Extracted extract_expr(const Pattern& p, const Match& m, std::string_view text) {
  std::string integer, decimal;
  for (const char* name : {"integer1", "integer2", "integer3"}) {
    const std::optional<std::string> g = named(p, m, name, text);
    if (g && !g->empty()) {
      integer = *g;
      break;
    }
  }
  for (const char* name : {"decimal1", "decimal2", "decimal3"}) {
    const std::optional<std::string> g = named(p, m, name, text);
    if (g && !g->empty()) {
      decimal = *g;
      break;
    }
  }
  const std::optional<std::string> percent = named(p, m, "percent", text);
  if (!integer.empty() || !decimal.empty()) {
    std::string digits;
    for (const char c : integer) {
      if (c != ',' && c != ' ') digits += c;
    }
    while (!digits.empty() && digits[0] == '0') digits.erase(0, 1);
    if (digits.empty()) digits = "0";
    replace_all(decimal, ",", ".");
    const std::string number = digits + decimal;
    // sympy's Number("-007") raises (Python refuses the literal 007) and the parse with it.
    if (decimal.empty() && number.size() > 2 && number[0] == '-' && number[1] == '0' &&
        number.find_first_not_of('0', 1) != std::string::npos) {
      throw ParseAbort{};
    }
    try {
      Number n = number_of(number);
      if (percent && !percent->empty()) n = percent_of(n);
      return {number_value(n), number};
    } catch (const Overflow&) {
      return {text_value(number), number};
    }
  }
  const std::optional<std::string> expr = named(p, m, "expr", text);
  if (expr && !expr->empty()) {
    std::string e = *expr;
    replace_all(e, "\n", " ");
    replace_all(e, "^", "**");
    try {
      return {number_value(PlainExpressionParser(e).parse_whole()), *expr};
    } catch (const Malformed&) {
      return {nullptr, *expr};
    } catch (const NotANumber&) {
      return {text_value(e), *expr};
    } catch (const Overflow&) {
      return {text_value(e), *expr};
    }
  }
  return {nullptr, expr.value_or("")};
}

// extract_target_from_pred: the priorities in order; in each, the matches from the rightmost
// end (the leftmost start first among equal ends).
MathAnswer extract(std::string_view raw, const std::vector<Pattern>& patterns,
                   const NormalizationConfig& config, bool first_match) {
  const std::string text =
      base::is_valid_utf8(raw) ? std::string(raw) : base::replace_invalid_utf8(raw);
  const IcuText icu_text(text);
  MathAnswer answer;
  std::vector<std::string> fallbacks;
  bool match_found = false;
  for (size_t begin = 0; begin < patterns.size();) {
    size_t end = begin;
    while (end < patterns.size() && patterns[end].priority == patterns[begin].priority) ++end;
    std::vector<std::pair<Match, const Pattern*>> matches;
    for (size_t k = begin; k < end; ++k) {
      for (Match& m : patterns[k].regex.finditer(icu_text))
        matches.emplace_back(std::move(m), &patterns[k]);
    }
    std::stable_sort(matches.begin(), matches.end(), [](const auto& a, const auto& b) {
      if (a.first.whole.end != b.first.whole.end) return a.first.whole.end > b.first.whole.end;
      return a.first.whole.begin < b.first.whole.begin;
    });
    for (const auto& [m, p] : matches) {
      const Extracted e = p->target == Target::kLatex ? extract_latex(*p, m, text, config)
                                                      : extract_expr(*p, m, text);
      match_found = true;
      if (!e.fallback.empty()) fallbacks.push_back(e.fallback);
      if (e.value) {
        answer.value = e.value;
        break;
      }
      if (first_match) break;
    }
    if (answer.value || (match_found && first_match)) break;
    begin = end;
  }
  if (!fallbacks.empty()) answer.fallback = fallbacks.front();
  return answer;
}

// ---------------------------------------------------------------------------------------------
// verify: sympy_expr_eq on the values, string equality on the fallbacks.

// sympy's Expr.round(6) as equality sees it: an Integer stays itself; anything else becomes
// Float(rv, allow): its value rounded to 6 decimals (rv) at `allow` significant digits, one more
// than its digits before the point plus 6 (so -0.1 and a -0.0999999 rounded to it are Floats of
// different precisions, which sympy holds unequal). A Float is kept as its binary mantissa and
// exponent, compared as sympy compares them.
struct Rounded {
  bool integer = false;  // an Integer: `mantissa` is its value
  __int128 mantissa = 0;
  int exponent = 0;
  bool operator==(const Rounded& o) const {
    return integer == o.integer && mantissa == o.mantissa && exponent == o.exponent;
  }
};

__int128 pow10(int k) {
  __int128 p = 1;
  for (int i = 0; i < k; ++i) p *= 10;
  return p;
}

// round(n / d), half to even (d > 0).
__int128 divide_half_even(__int128 n, __int128 d) {
  const bool negative = n < 0;
  if (negative) n = -n;
  __int128 q = n / d;
  const __int128 r = n % d;
  if (r * 2 > d || (r * 2 == d && q % 2 != 0)) ++q;
  return negative ? -q : q;
}

// mpmath's from_rational(num, den, prec) rounded half to even, normalized (odd mantissa).
Rounded binary_float(__int128 num, __int128 den, int prec) {
  Rounded r;
  if (num == 0) return r;
  const bool negative = num < 0;
  if (negative) num = -num;
  const __int128 low = static_cast<__int128>(1) << (prec - 1);
  const __int128 high = static_cast<__int128>(1) << prec;
  int e = 0;
  // Scale num/den by 2^-e into [2^(prec-1), 2^prec).
  while (num / den >= high) den *= 2, ++e;
  while (num / den < low) num *= 2, --e;
  __int128 m = divide_half_even(num, den);
  if (m == high) m /= 2, ++e;
  while (m % 2 == 0) m /= 2, ++e;
  r.mantissa = negative ? -m : m;
  r.exponent = e;
  return r;
}

// _mag: the i with 0.1 <= |x| / 10^i < 1.
int magnitude(const Number& n) {
  if (!n.is_float) {
    Rational r = n.exact_value();
    __int128 num = r.num < 0 ? -static_cast<__int128>(r.num) : r.num;
    const __int128 den = r.den;
    int mag = 0;
    while (num >= den * pow10(mag) && mag < 30) ++mag;
    if (mag > 0) return mag;
    while (num * pow10(-mag + 1) < den && mag > -30) --mag;
    return mag;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.14e", std::fabs(n.value()));
  return std::atoi(std::strchr(buffer, 'e') + 1) + 1;
}

// The significant digits sympy gives a Float (15, or more when its decimal was written with more).
int float_dps(const Number& n) {
  if (n.form != Number::Form::kAtom || !n.decimal) return 15;
  int digits = 0;
  for (int64_t v = n.decimal->num < 0 ? -n.decimal->num : n.decimal->num; v > 0; v /= 10) ++digits;
  return std::max(15, digits);
}

std::optional<Rounded> round6(const Number& n) {
  if (!n.is_float && n.exact_value().is_integer()) {
    return Rounded{true, static_cast<__int128>(n.exact_value().num), 0};
  }
  const double v = n.value();
  if (!std::isfinite(v) || std::fabs(v) >= 1e20) return std::nullopt;
  // rv in millionths: exact for a Rational and a Float's written decimal; for a computed Float
  // from its 16 significant digits (the 15 known ones kept, the 16th rounding them with sympy's
  // tie rule), then to 6 decimals half to even.
  __int128 micros = 0;
  if (!n.is_float) {
    const Rational r = n.exact_value();
    micros = divide_half_even(static_cast<__int128>(r.num) * 1000000, r.den);
  } else if (n.form == Number::Form::kAtom && n.decimal) {
    micros = divide_half_even(static_cast<__int128>(n.decimal->num) * 1000000, n.decimal->den);
  } else if (v != 0) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.15e", std::fabs(v));
    __int128 xi = 0;
    int last = 0, digits = 0;
    const char* c = buffer;
    for (; *c != 'e'; ++c) {
      if (*c == '.') continue;
      if (digits++ < 15) {
        xi = xi * 10 + (*c - '0');
      } else {
        last = *c - '0';
      }
    }
    if (last > 5) {
      xi += 1;
    } else if (last == 5) {
      xi += xi % 2 != 0 ? 1 : -1;
    }
    const int shift = std::atoi(c + 1) - 8;  // xi * 10^shift millionths
    if (shift >= 0) {
      micros = xi * pow10(shift);
    } else {
      micros = -shift >= 30 ? 0 : divide_half_even(xi, pow10(-shift));
    }
    if (v < 0) micros = -micros;
  }
  if (micros % 1000000 == 0) {
    // An integral rv: Float(str(rv), dps), exact.
    return binary_float(micros / 1000000, 1, 120);
  }
  int allow = magnitude(n) + 6;
  if (n.is_float) allow = std::min(allow, float_dps(n));
  // Float.round's "if not allow and rv > self: allow += 1".
  if (allow == 0) {
    const bool above =
        n.is_float
            ? static_cast<long double>(micros) / 1e6L > static_cast<long double>(v)
            : micros * n.exact_value().den > static_cast<__int128>(n.exact_value().num) * 1000000;
    if (above) ++allow;
  }
  const int prec = std::max(1, static_cast<int>(std::lround((allow + 1) * 3.3219280948873626)));
  return binary_float(micros, 1000000, std::min(prec, 80));
}

bool exactly_equal(const Number& a, const Number& b) {
  if (!a.is_float && !b.is_float) return a.exact_value() == b.exact_value();
  return a.value() == b.value();
}

// sympy_numeric_eq, then sympy_symbolic_eq, on two numbers.
bool numbers_equal(const Number& a, const Number& b) {
  using Form = Number::Form;
  const bool atom_a = a.form != Form::kExpression, atom_b = b.form != Form::kExpression;
  if (atom_a || atom_b) {
    const bool float_a = atom_a && a.is_float, float_b = atom_b && b.is_float;
    if (float_a || float_b) {
      const std::optional<Rounded> x = round6(a), y = round6(b);
      if (x && y && *x == *y) return true;
    } else if (atom_a && atom_b && a.exact.is_integer() && b.exact.is_integer()) {
      // Integers, or percentages of them: the numbers before / 100 compared.
      if (a.exact == b.exact) return true;
    } else if (!a.is_float && !b.is_float && a.exact_value() == b.exact_value()) {
      return true;  // doit's values equal
    }
  } else if (!a.has_percent && !b.has_percent) {
    // (a - b).evalf(n=15, chop=True) == 0 (an UnevaluatedExpr stays unevaluated there).
    if (!a.is_float && !b.is_float) return a.exact_value() == b.exact_value();
    const double x = a.value(), y = b.value();
    if (std::fabs(x - y) <= 1e-15 * std::max(std::fabs(x), std::fabs(y))) return true;
  }
  // simplify(a - b).is_zero: exact; with a Float, the doubles equal.
  return exactly_equal(a, b);
}

bool values_equal(const MathValue& gold_in, const MathValue& pred_in) {
  using Kind = MathValue::Kind;
  const MathValue* gold = &gold_in;
  const MathValue* pred = &pred_in;
  const bool gold_equation = gold->kind == Kind::kEquation;
  const bool pred_equation = pred->kind == Kind::kEquation;
  if (pred_equation && !gold_equation) {
    pred = pred->right.get();
  } else if (gold_equation && gold->assignment && !pred_equation) {
    gold = gold->right.get();
  }
  if (gold->symbol || pred->symbol) {
    // sympy_compare_symbols: two Symbols by name, a Symbol and anything else by str().
    const MathValue* other = gold->symbol ? pred : gold;
    const std::string& name = gold->symbol ? *gold->symbol : *pred->symbol;
    if (other->symbol) return *other->symbol == name || gold->text == pred->text;
    if (other->kind == Kind::kNumber && other->number.is_atom_rational()) {
      const Rational r = other->number.exact;
      return name == std::to_string(r.num) + (r.den == 1 ? "" : "/" + std::to_string(r.den));
    }
    return other->kind == Kind::kText && gold->text == pred->text;
  }
  if (gold->kind != pred->kind) return false;
  switch (gold->kind) {
    case Kind::kNumber:
      return numbers_equal(gold->number, pred->number);
    case Kind::kText:
      return gold->text == pred->text;
    case Kind::kEquation:
      return gold->text == pred->text && values_equal(*gold->right, *pred->right);
  }
  return false;
}

std::string describe_number(const Number& n) {
  char buffer[64];
  std::string inner;
  if (n.is_float) {
    std::snprintf(buffer, sizeof buffer, "%.15g (float)", n.approx);
    inner = buffer;
  } else {
    inner =
        std::to_string(n.exact.num) + (n.exact.den == 1 ? "" : "/" + std::to_string(n.exact.den));
  }
  switch (n.form) {
    case Number::Form::kAtom:
      return inner;
    case Number::Form::kPercent:
      return inner + "%";
    case Number::Form::kExpression:
      return "expression = " + inner;
  }
  return inner;
}

std::string describe_value(const MathValue& v) {
  switch (v.kind) {
    case MathValue::Kind::kNumber:
      return describe_number(v.number);
    case MathValue::Kind::kText:
      return "text " + v.text + (v.symbol ? " (symbol " + *v.symbol + ")" : "");
    case MathValue::Kind::kEquation:
      return v.text + " = " + describe_value(*v.right) + (v.assignment ? " (assignment)" : "");
  }
  return "";
}

}  // namespace

std::string MathAnswer::describe() const {
  std::string out = value ? describe_value(*value) : "none";
  if (fallback) out += " [" + *fallback + "]";
  return out;
}

MathAnswer parse_solution(std::string_view text) {
  try {
    return extract(text, solution_patterns(), kSolutionNormalization, false);
  } catch (const RegexTimeout&) {
    return {};
  } catch (const ParseAbort&) {
    return {};
  }
}

MathAnswer parse_completion(std::string_view text) {
  try {
    return extract(text, completion_patterns(), kCompletionNormalization, true);
  } catch (const RegexTimeout&) {
    return {};
  }
}

bool verify(const MathAnswer& gold, const MathAnswer& answer) {
  if (gold.value && answer.value && values_equal(*gold.value, *answer.value)) return true;
  if (gold.fallback && answer.fallback) {
    const std::string g = py_strip(*gold.fallback), a = py_strip(*answer.fallback);
    if (!g.empty() && !a.empty() && g == a) return true;
  }
  return false;
}

}  // namespace trainer::trl::math
