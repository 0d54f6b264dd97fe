// math_verify's extraction (math_answer.h): its patterns by priority and their matches' values.
#include <algorithm>
#include <utility>

#include "lib/base/utf8.h"
#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

namespace {

// LatexExtractionConfig()'s (a solution's) and TRL's NormalizationConfig(units=True).
constexpr NormalizationConfig kSolutionNormalization{true, true, true, true, Boxed::kAll};
constexpr NormalizationConfig kCompletionNormalization{true, true, false, false, Boxed::kAll};

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
      return {number_value(parse_plain_expression(e)), *expr};
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

}  // namespace

MathAnswer extract_solution(std::string_view text) {
  return extract(text, solution_patterns(), kSolutionNormalization, false);
}

MathAnswer extract_completion(std::string_view text) {
  return extract(text, completion_patterns(), kCompletionNormalization, true);
}

}  // namespace trainer::trl::math
