// Python's str, list and dict methods as chat templates call them ('a,b'.split(','),
// message.get('content'), tools.items()), jinja2's tests (is defined, is string, is mapping, ...),
// and the string helpers the filters share. Case mappings are ICU's full mappings, as Python's.
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <fmt/format.h>

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

std::string icu_case(std::string_view s, bool upper) {
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  upper ? u.toUpper(icu::Locale::getRoot()) : u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool ascii_only(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// Whether code point c is one of `chars` (a strip's argument).
bool one_of(char32_t c, const std::vector<char32_t>& chars) {
  return std::find(chars.begin(), chars.end(), c) != chars.end();
}

}  // namespace

std::string py_upper(std::string_view s) {
  if (!ascii_only(s)) return icu_case(s, true);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string py_lower(std::string_view s) {
  if (!ascii_only(s)) return icu_case(s, false);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return "";
  const auto cps = decode(s);
  // The first character's full title-case mapping (Python's capitalize), the rest lowered.
  icu::UnicodeString head(static_cast<UChar32>(cps[0]));
  head.toTitle(nullptr, icu::Locale::getRoot(),
               U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  std::string first;
  head.toUTF8String(first);
  return first + py_lower(encode(cps, 1, cps.size()));
}

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  const auto cps = decode(s);
  std::vector<char32_t> set;
  const bool spaces = chars.is_none() || chars.is_undefined();
  if (!spaces) set = decode(chars.str());
  auto strip = [&](char32_t c) { return spaces ? is_space(c) : one_of(c, set); };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strip(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip(cps[end - 1])) --end;
  return encode(cps, begin, end);
}

std::string py_replace(Interpreter& in, std::string_view s, std::string_view old,
                       std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python puts the replacement before each character and at the end.
    const auto cps = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < cps.size()) out += encode(cps, i, i + 1);
      in.check_size(out.size());
    }
    return out;
  }
  size_t at = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old, at);
    if (found == std::string_view::npos) break;
    out.append(s.substr(at, found - at));
    out.append(replacement);
    in.check_size(out.size());
    at = found + old.size();
    ++done;
  }
  out.append(s.substr(at));
  in.check_size(out.size());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  const auto cps = decode(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    lines.push_back(encode(cps, start, i));
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(encode(cps, start, cps.size()));
  return lines;
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
      end = found;
    }
    reversed.push_back(s.substr(0, end));
    pieces.assign(reversed.rbegin(), reversed.rend());
  }
  for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  return Value::list(std::move(parts));
}

Value affix(Interpreter& in, const Value& self, CallArgs& args, bool prefix) {
  const Value what = argument(args, 0, "prefix");
  std::string_view s = self.str();
  const Value start = argument(args, 1, "start", Value::none());
  if (start.is_int()) {
    const auto cps = decode(s);
    int64_t b = start.as_int();
    if (b < 0) b = std::max<int64_t>(0, b + static_cast<int64_t>(cps.size()));
    if (b > static_cast<int64_t>(cps.size())) return Value::boolean(false);
    const std::string rest = encode(cps, static_cast<size_t>(b), cps.size());
    CallArgs inner;
    inner.args.push_back(what);
    return affix(in, Value::string(rest), inner, prefix);
  }
  auto test = [&](const std::string& a) {
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
  const size_t at = from_right ? self.str().rfind(sub) : self.str().find(sub);
  if (at == std::string::npos) {
    if (raise) in.fail("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(char_index(self.str(), at));
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
  if (name == "title") return in.apply_filter("title", self, args);
  if (name == "replace") {
    return Value::string(py_replace(in, s, str_arg(in, argument(args, 0, "old"), "replace"),
                                    str_arg(in, argument(args, 1, "new"), "replace"),
                                    argument(args, 2, "count", Value::integer(-1)).as_int()));
  }
  if (name == "find" || name == "index") return find(in, self, args, false, name == "index");
  if (name == "rfind" || name == "rindex") return find(in, self, args, true, name == "rindex");
  if (name == "count") {
    const std::string& sub = str_arg(in, argument(args, 0, "sub"), "count");
    if (sub.empty()) return Value::integer(static_cast<int64_t>(code_points(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& item : in.iterate(argument(args, 0, "iterable"))) {
      if (!item.is_string())
        in.fail(fmt::format("sequence item: expected str instance, {} found", item.type_name()));
      if (!first) out += s;
      first = false;
      out += item.str();
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    List lines;
    for (auto& line : py_splitlines(s)) lines.push_back(Value::string(std::move(line)));
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

}  // namespace

MethodFn find_method(const Value& self, std::string_view name, bool& unsafe) {
  static const char* const kStr[] = {
      "split",     "rsplit",  "strip",      "lstrip",  "rstrip",     "startswith", "endswith",
      "upper",     "lower",   "capitalize", "title",   "replace",    "find",       "index",
      "rfind",     "rindex",  "count",      "join",    "splitlines", "isdigit",    "isnumeric",
      "isdecimal", "isalpha", "isalnum",    "isspace", "isupper",    "islower"};
  static const char* const kList[] = {"count", "index"};
  static const char* const kListUnsafe[] = {"append", "extend",  "insert", "pop",
                                            "remove", "reverse", "sort",   "clear"};
  static const char* const kDict[] = {"get", "items", "keys", "values", "copy"};
  static const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
  auto among = [&](const auto& names) {
    for (const char* n : names)
      if (name == n) return true;
    return false;
  };
  unsafe = false;
  if (self.is_string()) return among(kStr) ? str_method : nullptr;
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
