// Python's unbounded int for the Jinja engine: an int that fits 64 bits is a plain Value; one
// past them holds a BigInt (GMP's mpz, kept inside jinja_int.cpp). Arithmetic, ordering,
// printing and conversions as CPython does them, within kMaxIntBits (a bound of ours: Python
// has none, but a template's 2 ** 10 ** 10 must not take the memory) and CPython's
// 4,300-digit limit on printing an int in decimal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lib/tokenizers/jinja_value.h"

namespace trainer::tokenizers::jinja {

class Interpreter;

// Ints past this many bits are refused as a bound of Limits (kLimit), naming what grew.
constexpr int64_t kMaxIntBits = int64_t{1} << 20;
// CPython's sys.int_info.default_max_str_digits: str() of a longer int is a ValueError.
constexpr size_t kMaxIntStrDigits = 4300;

// a op b on two ints (bools count as 0 and 1), op one of + - * // %, the result a big int where
// it passes 64 bits; // and % floor as Python's (a zero divisor is the caller's to refuse).
Value int_arithmetic(Interpreter& in, std::string_view op, const Value& a, const Value& b);
// a ** b for ints, b >= 0.
Value int_power(Interpreter& in, const Value& a, const Value& b);
// -a and abs(a) of an int.
Value int_negate(const Value& a);
Value int_abs(const Value& a);
// a / b of two ints, correctly rounded as CPython's true division (b != 0); a quotient past a
// float's range fails as Python's OverflowError.
double int_true_divide(Interpreter& in, const Value& a, const Value& b);
// -1, 0 or 1 as a <=> b for two numbers (ints of any size, bools, floats), compared exactly as
// Python compares an int with a float; nullopt when one is a NaN (every comparison false).
std::optional<int> number_compare(const Value& a, const Value& b);
// float(a) correctly rounded; std::invalid_argument "int too large to convert to float" past
// the largest float (Python's OverflowError).
double int_to_float(const Value& a);
// A number as a float where Python converts an int for a float's arithmetic: an int past a
// float's range is std::invalid_argument (Python's OverflowError).
inline double to_float(const Value& v) { return v.big() ? int_to_float(v) : v.as_float(); }
// round(x, ndigits) of a float for ndigits < 0, as CPython: x's exact value rounded to a multiple
// of 10**-ndigits, ties to even, then to the nearest float (a zero keeps x's sign).
double float_round_tens(double x, int64_t ndigits);
// str(a) in base 10 (std::invalid_argument past kMaxIntStrDigits, CPython's ValueError), or in
// base 2, 8 or 16 (lower case, without a prefix, no limit).
std::string int_to_string(const Value& a, int base = 10);
// int(f) of a finite float: truncated toward zero, exact.
Value int_from_float(double f);
// The digits of `text` in `base` (2-36; an optional sign, no prefix, no underscores or space):
// nullopt when they are not an int.
std::optional<Value> int_from_digits(const std::string& text, int base);
// round(a, ndigits) for ndigits < 0: to a multiple of 10**-ndigits, ties to even (Python's).
Value int_round(const Value& a, int64_t ndigits);
// int.bit_length() (ones false) or int.bit_count() (ones true) of an int.
int64_t int_bits(const Value& a, bool ones);

}  // namespace trainer::tokenizers::jinja
