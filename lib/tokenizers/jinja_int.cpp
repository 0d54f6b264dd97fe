// Python's unbounded int for the Jinja engine on GMP's mpz (Debian's libgmp-dev): arithmetic
// with the floor division and rounding CPython uses, exact comparison with floats, correctly
// rounded conversion to float, printing within CPython's 4,300-digit limit.
#include "lib/tokenizers/jinja_int.h"

#include <gmp.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "lib/base/text.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

struct BigInt {
  BigInt() { mpz_init(z); }
  ~BigInt() { mpz_clear(z); }
  BigInt(const BigInt&) = delete;
  BigInt& operator=(const BigInt&) = delete;
  mpz_t z;
};

namespace {

// A working value: an int's value copied into an mpz (a bool's 0 or 1).
struct Z {
  Z() { mpz_init(z); }
  explicit Z(const Value& v) {
    if (const BigInt* big = v.big()) {
      mpz_init_set(z, big->z);
    } else {
      mpz_init_set_si(z, v.as_int());
    }
  }
  ~Z() { mpz_clear(z); }
  Z(const Z&) = delete;
  Z& operator=(const Z&) = delete;
  int64_t bits() const { return static_cast<int64_t>(mpz_sizeinbase(z, 2)); }
  mpz_t z;
};

// The Value of z: a plain int where it fits 64 bits (z is left as it was or emptied).
Value make(Z& value) {
  if (mpz_fits_slong_p(value.z)) return Value::integer(mpz_get_si(value.z));
  auto big = std::make_shared<BigInt>();
  mpz_swap(big->z, value.z);
  const int64_t saturated = mpz_sgn(big->z) > 0 ? INT64_MAX : INT64_MIN;
  return Value::big_integer(std::move(big), saturated);
}

// An int as a message shows it: its digits, or its size where they would be long.
std::string describe(const Value& v) {
  const BigInt* big = v.big();
  if (!big || mpz_sizeinbase(big->z, 10) <= 24) return int_to_string(v);
  return fmt::format("an int of {} bits",
                     base::thousands(static_cast<int64_t>(mpz_sizeinbase(big->z, 2))));
}

// `what` is called only for the message of a refusal: the checks that pass format nothing.
template <typename What>
void check_bits(const Interpreter& in, double bits, const What& what) {
  if (bits > static_cast<double>(kMaxIntBits)) {
    in.fail(fmt::format("{} passes {} bits (an integer that large is refused)", what(),
                        base::thousands(kMaxIntBits)),
            TemplateError::Kind::kLimit);
  }
}

// a op b on two int64s where the result fits one (Python's floor for // and %): the common case,
// without GMP.
std::optional<int64_t> small_arithmetic(std::string_view op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op == "+") return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "-") return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "*") return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b, m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) {
    --q;
    m += b;
  }
  return op == "//" ? q : m;
}

// Correctly rounded (glibc's strtod of the hexadecimal digits is); an infinity past the range.
double to_double(const mpz_t z) {
  if (mpz_sizeinbase(z, 2) <= 53) return mpz_get_d(z);
  std::unique_ptr<char, void (*)(void*)> hex(mpz_get_str(nullptr, 16, z), std::free);
  std::string text = hex.get();
  text.insert(text[0] == '-' ? 1 : 0, "0x");
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace

double Value::big_as_float() const { return to_double(big()->z); }

Value int_arithmetic(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
  if (!a.big() && !b.big()) {
    if (auto r = small_arithmetic(op, a.as_int(), b.as_int())) return Value::integer(*r);
  }
  Z x(a), y(b), r;
  if (op == "+") {
    mpz_add(r.z, x.z, y.z);
  } else if (op == "-") {
    mpz_sub(r.z, x.z, y.z);
  } else if (op == "*") {
    check_bits(in, static_cast<double>(x.bits() + y.bits()),
               [&] { return fmt::format("{} * {}", describe(a), describe(b)); });
    mpz_mul(r.z, x.z, y.z);
  } else if (op == "//") {
    mpz_fdiv_q(r.z, x.z, y.z);
  } else {
    mpz_fdiv_r(r.z, x.z, y.z);
  }
  check_bits(in, static_cast<double>(r.bits()),
             [&] { return fmt::format("{} {} {}", describe(a), op, describe(b)); });
  return make(r);
}

Value int_power(Interpreter& in, const Value& a, const Value& b) {
  Z x(a), e(b), r;
  if (mpz_cmpabs_ui(x.z, 1) <= 0) {  // 0, 1 and -1 stay small whatever the exponent
    if (mpz_sgn(x.z) == 0) return Value::integer(mpz_sgn(e.z) == 0 ? 1 : 0);
    if (mpz_sgn(x.z) > 0 || mpz_even_p(e.z)) return Value::integer(1);
    return Value::integer(-1);
  }
  long exponent_of_two = 0;
  const double mantissa = std::fabs(mpz_get_d_2exp(&exponent_of_two, x.z));
  const double log2_base = static_cast<double>(exponent_of_two) + std::log2(mantissa);
  check_bits(in, mpz_get_d(e.z) * log2_base,
             [&] { return fmt::format("{} ** {}", describe(a), describe(b)); });
  mpz_pow_ui(r.z, x.z, mpz_get_ui(e.z));
  return make(r);
}

Value int_negate(const Value& a) {
  Z x(a);
  mpz_neg(x.z, x.z);
  return make(x);
}

Value int_abs(const Value& a) {
  Z x(a);
  mpz_abs(x.z, x.z);
  return make(x);
}

double int_true_divide(Interpreter& in, const Value& a, const Value& b) {
  Z x(a), y(b);
  const bool negative = (mpz_sgn(x.z) < 0) != (mpz_sgn(y.z) < 0);
  mpz_abs(x.z, x.z);
  mpz_abs(y.z, y.z);
  if (x.bits() <= 53 && y.bits() <= 53) {  // both exact in a double: one rounding, as CPython
    const double q = mpz_get_d(x.z) / mpz_get_d(y.z);
    return negative ? -q : q;
  }
  if (mpz_sgn(x.z) == 0) return negative ? -0.0 : 0.0;
  // q = floor(x * 2**shift / y) with 55 to 56 bits, its last bit set when the division was
  // inexact: one rounding to 53 bits then gives the correctly rounded quotient.
  const int64_t shift = 55 - x.bits() + y.bits();
  if (shift >= 0) {
    mpz_mul_2exp(x.z, x.z, static_cast<mp_bitcnt_t>(shift));
  } else {
    mpz_mul_2exp(y.z, y.z, static_cast<mp_bitcnt_t>(-shift));
  }
  Z q, remainder;
  mpz_fdiv_qr(q.z, remainder.z, x.z, y.z);
  if (mpz_sgn(remainder.z) != 0) mpz_setbit(q.z, 0);
  const double result = std::ldexp(static_cast<double>(mpz_get_ui(q.z)),
                                   static_cast<int>(std::clamp<int64_t>(-shift, -100000, 100000)));
  if (std::isinf(result)) in.fail("integer division result too large for a float");
  return negative ? -result : result;
}

std::optional<int> number_compare(const Value& a, const Value& b) {
  const bool a_float = a.kind() == Value::Kind::kFloat, b_float = b.kind() == Value::Kind::kFloat;
  auto sign = [](auto d) { return d < 0 ? -1 : d > 0 ? 1 : 0; };
  if (a_float && b_float) {
    const double x = a.as_float(), y = b.as_float();
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a_float || b_float) {  // an int and a float, exactly
    const double f = a_float ? a.as_float() : b.as_float();
    const Value& i = a_float ? b : a;
    if (std::isnan(f)) return std::nullopt;
    int c;  // int <=> float
    if (!i.big() && std::abs(i.as_int()) < (int64_t{1} << 53)) {
      const auto d = static_cast<double>(i.as_int());
      c = d < f ? -1 : d > f ? 1 : 0;
    } else if (std::isinf(f)) {
      c = f > 0 ? -1 : 1;
    } else {
      Z z(i);
      c = sign(mpz_cmp_d(z.z, f));
    }
    return a_float ? -c : c;
  }
  if (!a.big() && !b.big()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  Z x(a), y(b);
  return sign(mpz_cmp(x.z, y.z));
}

double int_to_float(const Value& a) {
  const double f = a.as_float();
  if (std::isinf(f)) throw std::invalid_argument("int too large to convert to float");
  return f;
}

std::string int_to_string(const Value& a, int base) {
  if (!a.big() && base == 10) return std::to_string(a.as_int());
  Z x(a);
  std::unique_ptr<char, void (*)(void*)> text(mpz_get_str(nullptr, base, x.z), std::free);
  std::string out = text.get();
  if (base == 10 && out.size() - (out[0] == '-' ? 1 : 0) > kMaxIntStrDigits) {
    throw std::invalid_argument(
        fmt::format("Exceeds the limit ({} digits) for integer string conversion; use "
                    "sys.set_int_max_str_digits() to increase the limit",
                    kMaxIntStrDigits));
  }
  return out;
}

Value int_from_float(double f) {
  if (std::fabs(f) < 9.2e18) return Value::integer(static_cast<int64_t>(f));
  Z z;
  mpz_set_d(z.z, f);
  return make(z);
}

std::optional<Value> int_from_digits(const std::string& text, int base) {
  size_t at = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (at >= text.size() || base < 2 || base > 36) return std::nullopt;
  for (size_t i = at; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(text[i])));
    const int digit = std::isdigit(c) ? c - '0' : std::isalpha(c) ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
  }
  Z z;
  if (mpz_set_str(z.z, text.c_str() + at, base) != 0) return std::nullopt;
  if (text[0] == '-') mpz_neg(z.z, z.z);
  return make(z);
}

Value int_round(const Value& a, int64_t ndigits) {
  Z x(a);
  // 10**-ndigits past twice |a| rounds it to 0 (ties included).
  if (ndigits < -kMaxIntBits || -ndigits > static_cast<int64_t>(mpz_sizeinbase(x.z, 10)) + 1)
    return Value::integer(0);
  Z m, q, r;
  mpz_ui_pow_ui(m.z, 10, static_cast<unsigned long>(-ndigits));
  mpz_fdiv_qr(q.z, r.z, x.z, m.z);
  mpz_mul_2exp(r.z, r.z, 1);
  const int c = mpz_cmp(r.z, m.z);
  if (c > 0 || (c == 0 && mpz_odd_p(q.z))) mpz_add_ui(q.z, q.z, 1);
  mpz_mul(q.z, q.z, m.z);
  return make(q);
}

double float_round_tens(double x, int64_t ndigits) {
  if (!std::isfinite(x) || ndigits >= 0) return x;
  if (ndigits < -400) return std::copysign(0.0, x);  // 10**400 passes twice any float
  mpq_t q;
  mpq_init(q);
  mpq_set_d(q, x);  // exact
  Z p, quotient, remainder, denominator;
  mpz_ui_pow_ui(p.z, 10, static_cast<unsigned long>(-ndigits));
  mpz_mul(denominator.z, mpq_denref(q), p.z);
  mpz_fdiv_qr(quotient.z, remainder.z, mpq_numref(q), denominator.z);
  mpq_clear(q);
  mpz_mul_2exp(remainder.z, remainder.z, 1);
  const int c = mpz_cmp(remainder.z, denominator.z);
  if (c > 0 || (c == 0 && mpz_odd_p(quotient.z))) mpz_add_ui(quotient.z, quotient.z, 1);
  mpz_mul(quotient.z, quotient.z, p.z);
  const double rounded = to_double(quotient.z);
  return rounded == 0 ? std::copysign(0.0, x) : rounded;
}

int64_t int_bits(const Value& a, bool ones) {
  Z x(a);
  mpz_abs(x.z, x.z);
  if (ones) return static_cast<int64_t>(mpz_popcount(x.z));
  return mpz_sgn(x.z) == 0 ? 0 : x.bits();
}

}  // namespace trainer::tokenizers::jinja
