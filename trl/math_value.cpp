// What latex2sympy builds of a normalized text (math_answer.h): numbers, equations, sets, texts.
#include <cctype>

#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

ValuePtr number_value(const Number& n) {
  auto v = std::make_shared<MathValue>();
  v->kind = MathValue::Kind::kNumber;
  v->number = n;
  return v;
}

namespace {

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

}  // namespace

ValuePtr text_value(std::string_view text) {
  auto v = std::make_shared<MathValue>();
  v->kind = MathValue::Kind::kText;
  v->text = canonical_text(text);
  v->symbol = symbol_of(text);
  return v;
}

namespace {

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
    return number_value(parse_latex_number(text));
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
  const std::vector<std::string> parts = split_equation(t);
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

}  // namespace

// parse_latex_cached: latex2sympy, then (when it raises) the last of three or more equated parts.
ValuePtr parse_latex(const std::string& latex) {
  if (ValuePtr v = latex_value(latex)) return v;
  if (latex.find(',') == std::string::npos && latex.find(';') == std::string::npos) {
    const std::vector<std::string> parts = split_equation(latex);
    if (parts.size() > 2) return latex_value(parts.back());
  }
  return nullptr;
}

}  // namespace trainer::trl::math
