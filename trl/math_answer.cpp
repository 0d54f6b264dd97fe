// math_verify's parse and verify (math_answer.h): the entry points, sympy_expr_eq's comparisons.
#include "trl/math_answer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

namespace {

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
    return extract_solution(text);
  } catch (const RegexTimeout&) {
    return {};
  } catch (const ParseAbort&) {
    return {};
  }
}

MathAnswer parse_completion(std::string_view text) {
  try {
    return extract_completion(text);
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
