// jinja2's number filters as filters.py defines them: int (a string in a base, else through
// float), float (Python's float() of a string) and round (Python's round, an int staying an int).
#include <cmath>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

using K = Value::Kind;

// Python's int(text, base) on a string: white space around, underscores between digits, a sign,
// the base's prefix (0x, 0o, 0b; base 0 takes it from the prefix).
namespace {

std::optional<Value> parse_int(const std::string& text, int64_t base) {
  std::string s = py_strip(text, Value::none(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  size_t at = s.empty() || (s[0] != '-' && s[0] != '+') ? 0 : 1;
  const bool negative = at == 1 && s[0] == '-';
  auto prefix = [&](char letter) {
    return s.size() > at + 1 && s[at] == '0' && std::tolower(s[at + 1]) == letter;
  };
  if (base == 0) base = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 10;
  if ((base == 16 && prefix('x')) || (base == 8 && prefix('o')) || (base == 2 && prefix('b')))
    at += 2;
  if (base < 2 || base > 36 || at >= s.size()) return std::nullopt;
  // CPython refuses longer decimal text (a ValueError, which the filter takes as not an int).
  if (base == 10 && s.size() - at > kMaxIntStrDigits) return std::nullopt;
  const std::string digits = (negative ? "-" : "") + s.substr(at);
  if (s[at] == '-' || s[at] == '+') return std::nullopt;
  return int_from_digits(digits, static_cast<int>(base));
}

// Python's float(text): white space around, underscores between digits, inf and nan.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, Value::none(), true, true);
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '_' && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1])))
      s.erase(i, 1);
  }
  if (s.empty() || s.find_first_of("xX") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (*end != 0) return std::nullopt;
  return f;
}

}  // namespace

// jinja2's int filter: int(value) (a string in `base`), else int(float(value)), else default.
Value filter_int(Interpreter& in, const Value& v, CallArgs& a) {
  const Value fallback = argument(a, 0, "default", Value::integer(0));
  const int64_t base = argument(a, 1, "base", Value::integer(10)).as_int();
  auto from_float = [&](double f) {
    if (std::isnan(f)) return fallback;  // int(nan) is a ValueError, which the filter catches
    if (std::isinf(f)) in.fail("cannot convert float infinity to integer");  // OverflowError
    return int_from_float(f);
  };
  if (v.is_int()) return v.kind() == K::kBool ? Value::integer(v.as_int()) : v;
  if (v.kind() == K::kFloat) return from_float(v.as_float());
  if (!v.is_string()) return fallback;
  if (auto i = parse_int(v.str(), base)) return *i;
  if (auto f = parse_float(v.str())) return from_float(*f);
  return fallback;
}

Value filter_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value fallback = argument(a, 0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.big() ? int_to_float(v) : v.as_float());
  if (!v.is_string()) return fallback;
  const auto f = parse_float(v.str());
  return f ? Value::number(*f) : fallback;
}

// jinja2's round: Python's round(value, precision) ("common": an int stays an int; a float is
// rounded from its exact binary value, half to even), or math.ceil / math.floor of the scaled
// value, a float.
Value filter_round(Interpreter& in, const Value& v, CallArgs& a) {
  const int64_t precision =
      std::clamp<int64_t>(argument(a, 0, "precision", Value::integer(0)).as_int(), -340, 340);
  const std::string method = soft_str(argument(a, 1, "method", Value::string("common")));
  if (!v.is_number()) in.fail(fmt::format("round needs a number, not {}", v.type_name()));
  if (method != "common" && method != "ceil" && method != "floor")
    in.fail("method must be 'common', 'ceil' or 'floor'");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method != "common") {
    // math.ceil/floor(value * 10 ** precision) / 10 ** precision: the int it makes (never -0),
    // divided as Python divides an int by an int (precision >= 0) or by a float.
    // An int times 10 ** precision is exact, and so is its division back: float(value).
    if (v.is_int() && precision >= 0) return Value::number(to_float(v));
    const double x = to_float(v) * scale;
    if (!std::isfinite(x))
      in.fail(std::isnan(x) ? "cannot convert float NaN to integer"
                            : "cannot convert float infinity to integer");
    const Value whole = int_from_float(method == "ceil" ? std::ceil(x) : std::floor(x));
    if (precision < 0) return Value::number(whole.as_float() / scale);
    return Value::number(int_true_divide(
        in, whole, binary_operator(in, "**", Value::integer(10), Value::integer(precision))));
  }
  if (v.is_int()) {
    if (precision >= 0) return v.kind() == K::kBool ? Value::integer(v.as_int()) : v;
    return int_round(v, precision);
  }
  const double x = v.as_float();
  if (!std::isfinite(x)) return v;
  if (precision >= 0) {
    // printf rounds the exact binary value to `precision` decimals (ties to even), as Python.
    char text[700];
    std::snprintf(text, sizeof text, "%.*f", static_cast<int>(std::min<int64_t>(precision, 330)),
                  x);
    return Value::number(std::strtod(text, nullptr));
  }
  return Value::number(float_round_tens(x, precision));
}

}  // namespace trainer::tokenizers::jinja
