// Python's str, list and dict methods as chat templates call them ('a,b'.split(','),
// message.get('content'), tools.items()), jinja2's tests (is defined, is string, is mapping, ...),
// and the string helpers the filters share. Case mappings are ICU's full mappings, as Python's.
#include <cmath>
#include <optional>

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

using K = Value::Kind;

Value argument(const CallArgs& args, size_t index, std::string_view name, Value fallback) {
  for (const auto& [key, value] : args.kwargs)
    if (key == name) return value;
  if (index < args.args.size()) return args.args[index];
  return fallback;
}

namespace {

const std::string& str_arg(Interpreter& in, const Value& v, const char* method) {
  if (!v.is_string())
    in.fail(fmt::format("{}() argument must be str, not {}", method, v.type_name()));
  return v.str();
}

Value split(Interpreter& in, const Value& self, CallArgs& args, bool from_right) {
  const Value sep = argument(args, 0, "sep", Value::none());
  const int64_t maxsplit = argument(args, 1, "maxsplit", Value::integer(-1)).as_int();
  const std::string& s = self.str();
  List parts;
  if (sep.is_none()) {
    auto cps = decode(s);
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && is_space(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // The words past maxsplit stay one piece, its inner white space kept.
      if (from_right) {
        const size_t keep = words.size() - static_cast<size_t>(maxsplit);
        std::vector<std::pair<size_t, size_t>> merged{{words[0].first, words[keep - 1].second}};
        merged.insert(merged.end(), words.begin() + static_cast<long>(keep), words.end());
        words = merged;
      } else {
        const auto keep = static_cast<size_t>(maxsplit);
        words[keep].second = words.back().second;
        words.resize(keep + 1);
        size_t end = cps.size();
        while (end > words[keep].first && is_space(cps[end - 1])) --end;
        words[keep].second = end;
      }
    }
    in.check_size(words.size() * sizeof(Value), "the list str.split makes");
    for (const auto& [b, e] : words) parts.push_back(Value::string(encode(cps, b, e)));
    return Value::list(std::move(parts));
  }
  const std::string& d = str_arg(in, sep, "split");
  if (d.empty()) in.fail("empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t at = 0;
    while (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) {
      const size_t found = s.find(d, at);
      if (found == std::string::npos) break;
      pieces.push_back(s.substr(at, found - at));
      in.check_size(pieces.size() * sizeof(Value), "the list str.split makes");
      at = found + d.size();
    }
    pieces.push_back(s.substr(at));
  } else {
    size_t end = s.size();
    std::vector<std::string> reversed;
    while (maxsplit < 0 || static_cast<int64_t>(reversed.size()) < maxsplit) {
      if (end < d.size()) break;
      const size_t found = s.rfind(d, end - d.size());
      if (found == std::string::npos) break;
      reversed.push_back(s.substr(found + d.size(), end - found - d.size()));
      in.check_size(reversed.size() * sizeof(Value), "the list str.rsplit makes");
      end = found;
    }
    reversed.push_back(s.substr(0, end));
    pieces.assign(reversed.rbegin(), reversed.rend());
  }
  for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  return Value::list(std::move(parts));
}

// s[start:end] as Python slices a str for find, count, startswith and endswith (arguments
// `first` and `first` + 1), with the character offset of its start; nullopt when start is past
// the end (Python's methods then find nothing, even an empty string).
struct Window {
  std::string text;
  int64_t offset;
};
std::optional<Window> window(const std::string& s, const CallArgs& args, size_t first) {
  const Value start = argument(args, first, "start", Value::none());
  const Value end = argument(args, first + 1, "end", Value::none());
  if (!start.is_int() && !end.is_int()) return Window{s, 0};
  const auto cps = decode(s);
  const auto n = static_cast<int64_t>(cps.size());
  auto bound = [&](const Value& v, int64_t fallback) {
    if (!v.is_int()) return fallback;
    const int64_t i = v.as_int() < 0 ? std::max<int64_t>(0, v.as_int() + n) : v.as_int();
    return std::min(i, n);
  };
  if (start.is_int() && start.as_int() > n) return std::nullopt;
  const int64_t b = bound(start, 0), e = std::max(b, bound(end, n));
  return Window{encode(cps, static_cast<size_t>(b), static_cast<size_t>(e)), b};
}

Value affix(Interpreter& in, const Value& self, CallArgs& args, bool prefix) {
  const Value what = argument(args, 0, "prefix");
  const auto w = window(self.str(), args, 1);
  auto test = [&](const std::string& a) {
    if (!w) return false;
    const std::string_view s = w->text;
    return prefix ? s.substr(0, a.size()) == a
                  : s.size() >= a.size() && s.substr(s.size() - a.size()) == a;
  };
  if (what.kind() == K::kTuple) {
    for (const auto& a : what.items())
      if (test(str_arg(in, a, prefix ? "startswith" : "endswith"))) return Value::boolean(true);
    return Value::boolean(false);
  }
  if (!what.is_string())
    in.fail(fmt::format("{} first arg must be str or a tuple of str, not {}",
                        prefix ? "startswith" : "endswith", what.type_name()));
  return Value::boolean(test(what.str()));
}

int64_t char_index(const std::string& s, size_t byte) {
  return static_cast<int64_t>(code_points(std::string_view(s).substr(0, byte)));
}

Value find(Interpreter& in, const Value& self, CallArgs& args, bool from_right, bool raise) {
  const std::string& sub = str_arg(in, argument(args, 0, "sub"), from_right ? "rfind" : "find");
  const auto w = window(self.str(), args, 1);
  const size_t at = !w ? std::string::npos : from_right ? w->text.rfind(sub) : w->text.find(sub);
  if (at == std::string::npos) {
    if (raise) in.fail("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(w->offset + char_index(w->text, at));
}

Value count(Interpreter& in, const Value& self, CallArgs& args) {
  const std::string& sub = str_arg(in, argument(args, 0, "sub"), "count");
  const auto w = window(self.str(), args, 1);
  if (!w) return Value::integer(0);
  if (sub.empty()) return Value::integer(static_cast<int64_t>(code_points(w->text)) + 1);
  int64_t n = 0;
  for (size_t at = w->text.find(sub); at != std::string::npos;
       at = w->text.find(sub, at + sub.size()))
    ++n;
  return Value::integer(n);
}

// One code point's full case mapping through ICU: upper, lower or title.
std::string map_case(char32_t c, char how) {
  icu::UnicodeString u(static_cast<UChar32>(c));
  if (how == 'u') {
    u.toUpper(icu::Locale::getRoot());
  } else if (how == 'l') {
    u.toLower(icu::Locale::getRoot());
  } else {
    u.toTitle(nullptr, icu::Locale::getRoot(),
              U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

// Python's str.title (a word starts after any character that is not cased) and swapcase.
std::string py_title(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : decode(s)) {
    out += map_case(c, previous_cased ? 'l' : 't');
    previous_cased = u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED) != 0;
  }
  return out;
}

std::string py_swapcase(const std::string& s) {
  std::string out;
  for (char32_t c : decode(s)) {
    const auto u = static_cast<UChar32>(c);
    if (u_isUUppercase(u)) {
      out += map_case(c, 'l');
    } else if (u_isULowercase(u)) {
      out += map_case(c, 'u');
    } else {
      base::append_utf8(out, c);
    }
  }
  return out;
}

// center, ljust, rjust and zfill: `s` padded to `width` characters as CPython pads it.
Value pad(Interpreter& in, const std::string& s, CallArgs& args, std::string_view name) {
  const Value width_value = argument(args, 0, "width");
  if (!width_value.is_int())
    in.fail(fmt::format("{}() needs an integer width, not {}", name, width_value.type_name()));
  const int64_t n = static_cast<int64_t>(code_points(s));
  const int64_t width = width_value.as_int();
  if (width <= n) return Value::string(s);
  in.check_size(static_cast<size_t>(width) * 4, fmt::format("a string padded by str.{}", name));
  std::string fill = " ";
  if (name != "zfill") {
    const Value f = argument(args, 1, "fillchar", Value::string(" "));
    if (!f.is_string() || code_points(f.str()) != 1)
      in.fail("The fill character must be exactly one character long");
    fill = f.str();
  }
  const int64_t margin = width - n;
  auto repeat = [](const std::string& unit, int64_t k) {
    std::string out;
    for (int64_t i = 0; i < k; ++i) out += unit;
    return out;
  };
  if (name == "ljust") return Value::string(s + repeat(fill, margin));
  if (name == "rjust") return Value::string(repeat(fill, margin) + s);
  if (name == "zfill") {
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    return Value::string(sign ? s.substr(0, 1) + repeat("0", margin) + s.substr(1)
                              : repeat("0", margin) + s);
  }
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value::string(repeat(fill, left) + s + repeat(fill, margin - left));
}

Value partition(Interpreter& in, const std::string& s, CallArgs& args, bool from_right) {
  const std::string& sep = str_arg(in, argument(args, 0, "sep"), "partition");
  if (sep.empty()) in.fail("empty separator");
  const size_t at = from_right ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos) {
    return from_right ? Value::tuple({Value::string(""), Value::string(""), Value::string(s)})
                      : Value::tuple({Value::string(s), Value::string(""), Value::string("")});
  }
  return Value::tuple({Value::string(s.substr(0, at)), Value::string(sep),
                       Value::string(s.substr(at + sep.size()))});
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t c : decode(s))
    if (!pred(c)) return false;
  return true;
}

bool cased_only(const std::string& s, bool upper) {
  bool any = false;
  for (char32_t c : decode(s)) {
    const auto u = static_cast<UChar32>(c);
    if (upper ? u_isULowercase(u) || u_istitle(u) : u_isUUppercase(u) || u_istitle(u)) return false;
    any = any || u_isULowercase(u) || u_isUUppercase(u) || u_istitle(u);
  }
  return any;
}

Value str_method(Interpreter& in, const Value& self, CallArgs& args, std::string_view name) {
  const std::string& s = self.str();
  if (name == "split") return split(in, self, args, false);
  if (name == "rsplit") return split(in, self, args, true);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = argument(args, 0, "chars", Value::none());
    if (!chars.is_none() && !chars.is_string())
      in.fail(fmt::format("{} arg must be None or str", name));
    return Value::string(py_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith") return affix(in, self, args, true);
  if (name == "endswith") return affix(in, self, args, false);
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "replace") {
    return Value::string(py_replace(in, s, str_arg(in, argument(args, 0, "old"), "replace"),
                                    str_arg(in, argument(args, 1, "new"), "replace"),
                                    argument(args, 2, "count", Value::integer(-1)).as_int()));
  }
  if (name == "find" || name == "index") return find(in, self, args, false, name == "index");
  if (name == "rfind" || name == "rindex") return find(in, self, args, true, name == "rindex");
  if (name == "count") return count(in, self, args);
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill")
    return pad(in, s, args, name);
  if (name == "partition" || name == "rpartition")
    return partition(in, s, args, name == "rpartition");
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& a = str_arg(in, argument(args, 0, "prefix"), "removeprefix");
    const bool prefix = name == "removeprefix";
    const bool has = prefix
                         ? s.compare(0, a.size(), a) == 0
                         : s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
    if (!has) return self;
    return Value::string(prefix ? s.substr(a.size()) : s.substr(0, s.size() - a.size()));
  }
  if (name == "swapcase") return Value::string(py_swapcase(s));
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& item : in.iterate(argument(args, 0, "iterable"))) {
      if (!item.is_string())
        in.fail(fmt::format("sequence item: expected str instance, {} found", item.type_name()));
      if (!first) out += s;
      first = false;
      out += item.str();
      in.check_size(out.size(), "the string str.join makes");
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    List lines;
    const bool keepends = argument(args, 0, "keepends", Value::boolean(false)).truthy();
    for (auto& line : py_splitlines(s, keepends)) lines.push_back(Value::string(std::move(line)));
    return Value::list(std::move(lines));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return Value::boolean(
        all_chars(s, [](char32_t c) { return u_isdigit(static_cast<UChar32>(c)) != 0; }));
  if (name == "isalpha")
    return Value::boolean(
        all_chars(s, [](char32_t c) { return u_isalpha(static_cast<UChar32>(c)) != 0; }));
  if (name == "isalnum")
    return Value::boolean(
        all_chars(s, [](char32_t c) { return u_isalnum(static_cast<UChar32>(c)) != 0; }));
  if (name == "isspace") return Value::boolean(all_chars(s, is_space));
  if (name == "isupper") return Value::boolean(cased_only(s, true));
  if (name == "islower") return Value::boolean(cased_only(s, false));
  in.fail(fmt::format("str.{} is not supported", name));
}

Value list_method(Interpreter& in, const Value& self, CallArgs& args, std::string_view name) {
  const Value x = argument(args, 0, "value");
  const List& items = self.items();
  if (name == "count") {
    int64_t n = 0;
    for (const auto& v : items) n += equal(v, x);
    return Value::integer(n);
  }
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], x)) return Value::integer(static_cast<int64_t>(i));
  in.fail(fmt::format("{} is not in list", repr(x)));
}

Value dict_method(Interpreter& in, const Value& self, CallArgs& args, std::string_view name) {
  const auto& entries = self.dict().entries;
  if (name == "get") {
    const Value* v = self.dict().find(argument(args, 0, "key"));
    return v ? *v : argument(args, 1, "default", Value::none());
  }
  if (name == "copy") return self;
  List out;
  for (const auto& [key, value] : entries) {
    if (name == "keys") {
      out.push_back(key);
    } else if (name == "values") {
      out.push_back(value);
    } else {
      out.push_back(Value::tuple({key, value}));
    }
  }
  (void)in;
  return Value::list(std::move(out));
}

// Python's str.hex of a float ('0x1.8000000000000p+0').
std::string float_hex(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  const std::string sign = std::signbit(f) ? "-" : "";
  if (f == 0) return sign + "0x0.0p+0";
  int exponent = 0;
  double m = std::frexp(std::fabs(f), &exponent);  // m in [0.5, 1)
  int leading = 1;
  exponent -= 1;
  m *= 2;                  // [1, 2)
  if (exponent < -1022) {  // subnormal: 0x0.xxxp-1022
    m = std::ldexp(m, exponent + 1022);
    exponent = -1022;
    leading = 0;
  }
  auto fraction = static_cast<uint64_t>(std::ldexp(m - leading, 52));
  return fmt::format("{}0x{}.{:013x}p{}{}", sign, leading, fraction, exponent < 0 ? '-' : '+',
                     std::abs(exponent));
}

// The methods of an int, a bool or a float that take no argument (Python's).
Value number_method(Interpreter& in, const Value& self, CallArgs&, std::string_view name) {
  const bool is_float = self.kind() == K::kFloat;
  const double f = self.as_float();
  if (name == "conjugate")
    return is_float ? self : self.kind() == K::kBool ? Value::integer(self.as_int()) : self;
  if (name == "is_integer") return Value::boolean(std::isfinite(f) && f == std::trunc(f));
  if (name == "hex") return Value::string(float_hex(f));
  if (name == "as_integer_ratio") {
    if (!is_float)
      return Value::tuple({binary_operator(in, "+", self, Value::integer(0)), Value::integer(1)});
    if (!std::isfinite(f))
      in.fail(std::isnan(f) ? "cannot convert NaN to integer ratio"
                            : "cannot convert Infinity to integer ratio");
    if (f == 0) return Value::tuple({Value::integer(0), Value::integer(1)});
    int exponent = 0;
    const double m = std::frexp(f, &exponent);
    int64_t numerator = static_cast<int64_t>(std::ldexp(m, 53));
    exponent -= 53;
    while (numerator % 2 == 0 && numerator != 0 && exponent < 0) numerator /= 2, ++exponent;
    Value num = Value::integer(numerator), den = Value::integer(1);
    const Value two_power =
        binary_operator(in, "**", Value::integer(2), Value::integer(std::abs(exponent)));
    if (exponent > 0) num = binary_operator(in, "*", num, two_power);
    if (exponent < 0) den = two_power;
    return Value::tuple({num, den});
  }
  if (name == "bit_length") return Value::integer(int_bits(self, false));
  return Value::integer(int_bits(self, true));  // bit_count
}

// Python's str methods that chat templates here do not build: one line naming the method.
Value unbuilt_str_method(Interpreter& in, const Value&, CallArgs&, std::string_view name) {
  in.fail(fmt::format("str.{} is not supported in chat templates here{}", name,
                      name == "format" || name == "format_map"
                          ? " (the format filter and '%' format as printf does)"
                          : ""));
}

}  // namespace

MethodFn find_method(const Value& self, std::string_view name, bool& unsafe) {
  static const char* const kStr[] = {
      "split",      "rsplit",    "strip",      "lstrip",       "rstrip",       "startswith",
      "endswith",   "upper",     "lower",      "capitalize",   "title",        "replace",
      "find",       "index",     "rfind",      "rindex",       "count",        "join",
      "splitlines", "isdigit",   "isnumeric",  "isdecimal",    "isalpha",      "isalnum",
      "isspace",    "isupper",   "islower",    "center",       "ljust",        "rjust",
      "zfill",      "partition", "rpartition", "removeprefix", "removesuffix", "swapcase"};
  static const char* const kList[] = {"count", "index"};
  static const char* const kListUnsafe[] = {"append", "extend",  "insert", "pop",
                                            "remove", "reverse", "sort",   "clear"};
  static const char* const kStrUnbuilt[] = {
      "format",       "format_map",  "casefold", "encode",    "expandtabs", "isascii",
      "isidentifier", "isprintable", "istitle",  "translate", "maketrans"};
  static const char* const kInt[] = {"bit_length", "bit_count", "conjugate", "as_integer_ratio"};
  static const char* const kFloat[] = {"conjugate", "is_integer", "hex", "as_integer_ratio"};
  static const char* const kDict[] = {"get", "items", "keys", "values", "copy"};
  static const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
  auto among = [&](const auto& names) {
    for (const char* n : names)
      if (name == n) return true;
    return false;
  };
  unsafe = false;
  if (self.is_string()) {
    return among(kStr) ? str_method : among(kStrUnbuilt) ? unbuilt_str_method : nullptr;
  }
  if (self.is_int()) return among(kInt) ? number_method : nullptr;
  if (self.kind() == K::kFloat) return among(kFloat) ? number_method : nullptr;
  if (self.is_sequence()) {
    unsafe = self.kind() == K::kList && among(kListUnsafe);
    return among(kList) || unsafe ? list_method : nullptr;
  }
  if (self.is_dict()) {
    unsafe = among(kDictUnsafe);
    return among(kDict) || unsafe ? dict_method : nullptr;
  }
  return nullptr;
}

}  // namespace trainer::tokenizers::jinja
