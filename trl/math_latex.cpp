// latex2sympy2_extended's normalize_latex, step by step, for math_verify's parse (math_answer.h).
#include <utility>

#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

namespace {

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

}  // namespace

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

std::vector<std::string> split_equation(std::string_view text) {
  return regexes().equation_split.split(text);
}

}  // namespace trainer::trl::math
