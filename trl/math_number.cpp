// sympy's numbers for math_answer.h: exact rationals, Floats and doit's arithmetic on them.
#include <cmath>
#include <cstdlib>

#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

namespace numbers {

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

}  // namespace trainer::trl::math
