// jinja2's globals as chat templates call them: range (the sandbox's 100,000 cap), dict and
// namespace (Transformers' own: no underscore-prefixed names); and Python's printf-style
// formatting, for the format filter and the % operator.
#include <cmath>

#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

using K = Value::Kind;

namespace {

// The mapping a format takes its %(name)s arguments from: the keyword arguments, or one dict
// argument (none otherwise).
Value format_mapping(const CallArgs& a) {
  if (!a.kwargs.empty()) {
    auto d = std::make_shared<Value::Dict>();
    for (const auto& [key, value] : a.kwargs) d->set(Value::string(key), value);
    return Value::dict(std::move(d));
  }
  return a.args.size() == 1 && a.args[0].is_dict() ? a.args[0] : Value();
}

// One conversion's flags, width and precision at f[i] (i moved to its conversion character), as
// fmt's spec: right-aligned unless '-', zero-padded numbers unless '-'. Width and precision are
// each bounded by the output's bound before fmt pads to them.
std::string conversion_spec(Interpreter& in, const std::string& f, size_t& i) {
  bool left = false, plus = false, space = false, zero = false, alternate = false;
  for (; i < f.size() && std::string_view("-+ 0#").find(f[i]) != std::string_view::npos; ++i) {
    left = left || f[i] == '-';
    plus = plus || f[i] == '+';
    space = space || f[i] == ' ';
    zero = zero || f[i] == '0';
    alternate = alternate || f[i] == '#';
  }
  auto number = [&] {
    std::string digits;
    size_t n = 0;
    while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) {
      n = std::min<size_t>(n * 10 + static_cast<size_t>(f[i] - '0'), SIZE_MAX / 20);
      digits += f[i++];
    }
    in.check_size(n, "a format's width or precision");
    return digits;
  };
  const std::string width = number();
  std::string precision;
  if (i < f.size() && f[i] == '.') {
    ++i;
    precision = "." + number();
    if (precision == ".") precision = ".0";
  }
  if (i >= f.size()) in.fail("incomplete format");
  const char conv = f[i];
  const bool numeric = std::string_view("diouxXeEfFgG").find(conv) != std::string_view::npos;
  std::string spec = "{:";
  spec += left ? "<" : zero && numeric ? "" : ">";
  if (numeric) spec += plus ? "+" : space ? " " : "";
  if (alternate && numeric) spec += "#";
  if (zero && numeric && !left) spec += "0";
  spec += width;
  if (conv != 'd' && conv != 'i' && conv != 'x' && conv != 'X' && conv != 'o') spec += precision;
  return spec;
}

// An int past 64 bits under conversion d, x, X or o and fmt's `spec` (as conversion_spec makes
// it: an alignment, a sign, '#', '0', a width), which fmt itself cannot format.
std::string big_conversion(const std::string& spec, const Value& arg, char conv) {
  size_t at = 2;  // past "{:"
  const bool left = spec.compare(at, 1, "<") == 0;
  if (spec.compare(at, 1, "<") == 0 || spec.compare(at, 1, ">") == 0) ++at;
  std::string sign = arg.as_int() < 0 ? "-" : "";
  if (at < spec.size() && (spec[at] == '+' || spec[at] == ' ')) {
    if (sign.empty()) sign = spec.substr(at, 1);
    ++at;
  }
  const bool alternate = at < spec.size() && spec[at] == '#';
  at += alternate ? 1 : 0;
  const bool zero = at < spec.size() && spec[at] == '0';
  at += zero ? 1 : 0;
  const size_t width = at < spec.size() ? std::stoul(spec.substr(at)) : 0;
  std::string digits = int_to_string(int_abs(arg), conv == 'd' ? 10 : conv == 'o' ? 8 : 16);
  if (conv == 'X') digits = py_upper(digits);
  const std::string prefix = sign + (alternate && conv != 'd' ? std::string("0") + conv : "");
  const size_t length = prefix.size() + digits.size();
  if (length >= width) return prefix + digits;
  if (zero) return prefix + std::string(width - length, '0') + digits;
  const std::string pad(width - length, ' ');
  return left ? prefix + digits + pad : pad + prefix + digits;
}

// `arg` converted by conversion character f[i] under fmt's `spec`.
std::string convert(Interpreter& in, const std::string& f, size_t i, const std::string& spec,
                    const Value& arg) {
  const char conv = f[i];
  switch (conv) {
    case 's':
      return fmt::format(fmt::runtime(spec + "}"), to_str(arg));
    case 'r':
      return fmt::format(fmt::runtime(spec + "}"), repr(arg));
    case 'd':
    case 'i': {
      if (!arg.is_number())
        in.fail(
            fmt::format("%{} format: a real number is required, not {}", conv, arg.type_name()));
      const double f = arg.as_float();
      if (arg.kind() == K::kFloat && !std::isfinite(f))
        in.fail(std::isnan(f) ? "cannot convert float NaN to integer"
                              : "cannot convert float infinity to integer");
      const Value whole = arg.kind() == K::kFloat ? int_from_float(f) : arg;
      if (whole.big()) return big_conversion(spec, whole, 'd');
      return fmt::format(fmt::runtime(spec + "d}"), whole.as_int());
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
      if (!arg.is_number()) in.fail(fmt::format("must be real number, not {}", arg.type_name()));
      // Python prints a NaN without its sign.
      return fmt::format(fmt::runtime(spec + std::string(1, conv) + "}"),
                         std::isnan(arg.as_float()) ? std::fabs(arg.as_float()) : to_float(arg));
    case 'x':
    case 'X':
    case 'o':
      if (!arg.is_int()) in.fail(fmt::format("%{} format: an integer is required", conv));
      if (arg.big()) return big_conversion(spec, arg, conv);
      return fmt::format(fmt::runtime(spec + std::string(1, conv) + "}"), arg.as_int());
    case 'c': {
      if (arg.is_string()) {
        if (code_points(arg.str()) != 1) in.fail("%c requires an int or a unicode character");
        return arg.str();
      }
      if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10FFFF &&
          !(arg.as_int() >= 0xD800 && arg.as_int() <= 0xDFFF)) {
        std::string out;
        base::append_utf8(out, static_cast<char32_t>(arg.as_int()));
        return out;
      }
      in.fail("%c arg not in range(0x110000) (or a surrogate)");
    }
    default:
      in.fail(fmt::format(
          "unsupported format character {}",
          repr_string(f.substr(i, std::max<size_t>(1, base::utf8_sequence_length(f, i))))));
  }
}

}  // namespace

// Python's printf-style formatting: %s %r %d %i %f %e %g %x %o %c %% with flags, width and
// precision, the arguments a tuple's elements or a dict's keys (%(name)s).
Value python_format(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string f = soft_str(v);
  std::string out;
  size_t next = 0;
  const Value mapping = format_mapping(a);
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) in.fail("incomplete format");
    Value arg;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos || !mapping.is_dict()) in.fail("format requires a mapping");
      const std::string key = f.substr(i + 1, close - i - 1);
      const Value* found = mapping.dict().find(std::string_view(key));
      if (!found) in.fail(fmt::format("KeyError: {}", repr_string(key)));
      arg = *found;
      i = close + 1;
    }
    const std::string spec = conversion_spec(in, f, i);
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    if (arg.is_undefined() && !mapping.is_dict()) {
      if (next >= a.args.size()) in.fail("not enough arguments for format string");
      arg = a.args[next++];
    }
    try {
      out += convert(in, f, i, spec, arg);
    } catch (const fmt::format_error& e) {
      in.fail(fmt::format("bad format: {}", e.what()));
    }
    in.check_size(out.size(), "a formatted string");
  }
  if (!mapping.is_dict() && next < a.args.size())
    in.fail("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

Value find_global(std::string_view name) {
  if (name == "joiner") return Value::callable("joiner", make_joiner);
  if (name == "lipsum" || name == "cycler") {
    const std::string line =
        name == "lipsum"
            ? "jinja2's lipsum() is not supported in chat templates here (its text is random)"
            : "jinja2's cycler() is not supported in chat templates here (loop.cycle is)";
    return Value::callable(std::string(name),
                           [line](Interpreter& in, CallArgs&) -> Value { in.fail(line); });
  }
  if (name == "range") {
    return Value::callable("range", [](Interpreter& in, CallArgs& a) {
      for (const auto& arg : a.args)
        if (!arg.is_int())
          in.fail(fmt::format("'{}' object cannot be interpreted as an integer", arg.type_name()));
      if (a.args.empty() || a.args.size() > 3) in.fail("range expected 1 to 3 arguments");
      const int64_t start = a.args.size() > 1 ? a.args[0].as_int() : 0;
      const int64_t stop = a.args.size() > 1 ? a.args[1].as_int() : a.args[0].as_int();
      const int64_t step = a.args.size() > 2 ? a.args[2].as_int() : 1;
      if (step == 0) in.fail("range() arg 3 must not be zero");
      const long double n = std::ceil((static_cast<long double>(stop) - start) / step);
      if (n > 100000)
        in.fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      List out;
      for (__int128 i = start; step > 0 ? i < stop : i > stop; i += step)
        out.push_back(Value::integer(static_cast<int64_t>(i)));
      return Value::list(std::move(out));
    });
  }
  if (name == "dict" || name == "namespace") {
    const bool ns = name == "namespace";
    return Value::callable(std::string(name), [ns](Interpreter& in, CallArgs& a) {
      auto d = std::make_shared<Value::Dict>();
      if (a.args.size() > 1) in.fail("dict expected at most 1 argument");
      if (!a.args.empty()) {
        const Value& init = a.args[0];
        if (init.is_dict()) {
          *d = init.dict();
        } else {
          for (const auto& pair : in.iterate(init)) {
            const List kv = in.iterate(pair);
            if (kv.size() != 2) in.fail("dictionary update sequence element has the wrong length");
            d->set(kv[0], kv[1]);
          }
        }
      }
      for (const auto& [key, value] : a.kwargs) d->set(Value::string(key), value);
      if (!ns) return Value::dict(std::move(d));
      Value out = Value::make_namespace();
      for (const auto& [key, value] : d->entries) {
        const std::string k = soft_str(key);
        if (!k.empty() && k[0] == '_') {
          in.fail(
              fmt::format("Chat templates cannot store underscore-prefixed attributes on a "
                          "namespace, but got '{}'. Please rename the attribute.",
                          k));
        }
        out.ns().set(k, value);
      }
      in.track(out);
      return out;
    });
  }
  return {};
}

}  // namespace trainer::tokenizers::jinja
