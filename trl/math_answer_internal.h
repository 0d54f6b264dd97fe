// What the files of math_verify's parse and verify (trl/math_*.cpp) share with one another.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "trl/math_answer.h"

namespace trainer::trl::math {

// ---------------------------------------------------------------------------------------------
// Python's text: str.isspace, str.strip, len, int (math_regex.cpp).

bool py_isspace(char32_t c);
// The code point at text[at] and its length.
char32_t code_point(std::string_view text, size_t at, size_t& length);
std::string py_strip(std::string_view text);
size_t py_len(std::string_view text);
// Python's int(text) for an optional sign and ASCII digits (with "_" between digits refused:
// none reach here), or nullopt.
std::optional<int64_t> py_int(std::string_view text);

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

void replace_all(std::string& text, std::string_view from, std::string_view to);

// ---------------------------------------------------------------------------------------------
// Python's re on ICU (math_regex.cpp).

// Raised when a match runs past ICU's time limit (math_verify's parse times out), or where
// math_verify's extraction raises: its parse then returns [].
struct RegexTimeout {};
struct ParseAbort {};

// A text as ICU reads it: UTF-16, with each unit's byte offset in the UTF-8 text.
class IcuText {
 public:
  explicit IcuText(std::string_view utf8);
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

// A Python pattern compiled by ICU: the pattern translated (\s as Python's whitespace, a brace
// that opens no quantifier literal, named groups numbered in order), `.` and `$` seeing only \n as
// a line end.
class PyRegex {
 public:
  PyRegex(std::string_view python_pattern, bool dotall);

  // Python's finditer.
  std::vector<Match> finditer(const IcuText& text) const;
  bool search(std::string_view text) const;
  // re.sub(pattern, replace, text).
  std::string sub(std::string_view text,
                  const std::function<std::string(const Match&, std::string_view)>& replace) const;
  // re.sub with "\1" (the first group, or "" where it took no part).
  std::string sub_group1(std::string_view text) const;
  // re.split(pattern, text) for a pattern without groups.
  std::vector<std::string> split(std::string_view text) const;

  static std::string group(const Match& m, size_t k, std::string_view text);

  const std::vector<std::string>& names() const { return names_; }

 private:
  // ICU's steps (about a millisecond each); past them, as past math_verify's timeout, parse
  // gives nothing.
  static constexpr int32_t kTimeLimit = 5000;
  std::unique_ptr<icu::RegexPattern> regex_;
  std::vector<std::string> names_;
};

// ---------------------------------------------------------------------------------------------
// latex2sympy2_extended's normalize_latex (math_latex.cpp).

enum class Boxed { kAll, kLast, kNone };

struct NormalizationConfig {
  bool basic_latex = true;
  bool units = false;
  bool malformed_operators = false;
  bool nits = false;
  Boxed boxed = Boxed::kAll;
};

std::string normalize_latex(std::string text, const NormalizationConfig& config);

// latex2sympy's split of a text at its = signs (not those of <=, >=, != or \=).
std::vector<std::string> split_equation(std::string_view text);

// ---------------------------------------------------------------------------------------------
// Numbers (named, not anonymous: MathValue holds one; math_number.cpp).
namespace numbers {

struct Overflow {};

__int128 gcd128(__int128 a, __int128 b);

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

// Mul(n, UnevaluatedExpr(1/100)): n percent.
Number percent_of(const Number& n);
// a + b, a * b, a / b as doit evaluates them (a / b is a * b**-1).
Number combine(const Number& a, const Number& b, char op);
Number negate(const Number& a);
Number power(const Number& base, const Number& exponent);
// sympy's Number(text) for digits with an optional sign and decimal part (Integer or Float).
Number number_of(std::string_view text);

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

using ValuePtr = std::shared_ptr<const MathValue>;

// ---------------------------------------------------------------------------------------------
// latex2sympy's and parse_expr's numbers (math_parse.cpp), and the values latex2sympy builds
// (math_value.cpp).

struct NotANumber {};  // sympy would build something else: the value is the text
struct Malformed {};   // latex2sympy raises: no value

// latex2sympy on a normalized text as a number of the forms math_answer.h names; NotANumber
// where sympy would build something else, Malformed where latex2sympy raises, Overflow past
// 64-bit parts.
Number parse_latex_number(std::string_view text);

// sympy's parse_expr(text, evaluate=False) on a plain expression of math_verify's expr pattern
// (digits, . + - * / ** ( ) and spaces); throws as parse_latex_number does.
Number parse_plain_expression(std::string_view text);

ValuePtr number_value(const Number& n);
// A text: its canonical text, and the Symbol's name when latex2sympy makes one of it.
ValuePtr text_value(std::string_view text);

// parse_latex_cached: latex2sympy, then (when it raises) the last of three or more equated parts.
ValuePtr parse_latex(const std::string& latex);

// ---------------------------------------------------------------------------------------------
// Extraction (math_extract.cpp): parse with a solution's defaults and with TRL's configuration
// for a completion; RegexTimeout (and for a solution ParseAbort) where parse gives [].

MathAnswer extract_solution(std::string_view text);
MathAnswer extract_completion(std::string_view text);

}  // namespace trainer::trl::math
