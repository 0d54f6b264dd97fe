// Python's printing of the Jinja engine's values, byte for byte: str() as {{ x }} prints it,
// repr() (strings quoted and escaped as CPython does, floats in their shortest round trip) and
// json.dumps as Transformers' tojson filter calls it.
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <unicode/uchar.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_value.h"

namespace trainer::tokenizers::jinja {

std::string repr_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // "-1.2345e+17": the shortest digits that round-trip
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {  // repr's switch to exponent notation
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto point = static_cast<size_t>(exponent + 1);
    if (digits.size() <= point) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return out;
}

namespace {

// Python's str.isprintable for one code point: not Cc, Cf, Cs, Co, Cn, Zl, Zp, or Zs but space.
bool printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

void repr_into(std::string& out, const Value& v, int depth);

void repr_items(std::string& out, const List& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    repr_into(out, items[i], depth + 1);
  }
}

void check_depth(int depth) {
  if (depth > 512) throw std::invalid_argument("a value nested more than 512 deep");
}

void repr_into(std::string& out, const Value& v, int depth) {
  using K = Value::Kind;
  check_depth(depth);
  switch (v.kind()) {
    case K::kString:
      out += repr_string(v.str());
      break;
    case K::kList:
      out += '[';
      repr_items(out, v.items(), depth);
      out += ']';
      break;
    case K::kTuple:
      out += '(';
      repr_items(out, v.items(), depth);
      out += v.items().size() == 1 ? ",)" : ")";
      break;
    case K::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, key, depth + 1);
        out += ": ";
        repr_into(out, item, depth + 1);
      }
      out += '}';
      break;
    }
    case K::kNamespace: {
      out += "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : v.ns().attrs) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(key) + ": ";
        repr_into(out, item, depth + 1);
      }
      out += "}>";
      break;
    }
    case K::kUndefined:
      out += "Undefined";
      break;
    default:
      out += to_str(v);
  }
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    const char32_t c = base::decode_utf8(s, i, length);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
        } else if (ensure_ascii && c >= 0x80) {
          if (c >= 0x10000) {
            const char32_t u = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
          }
        } else {
          out.append(s.substr(i, length));
        }
    }
    i += length;
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return repr_float(f);
}

// A dict key as json.dumps turns it into a string (keys that are not strings are converted).
std::string json_key(const Value& key) {
  using K = Value::Kind;
  switch (key.kind()) {
    case K::kString:
      return key.str();
    case K::kBool:
      return key.as_bool() ? "true" : "false";
    case K::kInt:
      return int_to_string(key);
    case K::kFloat:
      return json_float(key.as_float());
    case K::kNone:
      return "null";
    default:
      throw std::invalid_argument(
          fmt::format("keys must be str, int, float, bool or None, not {}", key.type_name()));
  }
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  using K = Value::Kind;
  check_depth(depth);
  const bool pretty = o.indent >= 0 || o.indent_text_set;
  auto newline = [&](int level) {
    if (!pretty) return;
    out += '\n';
    for (int i = 0; i < level; ++i) {
      if (o.indent_text_set) {
        out += o.indent_text;
      } else {
        out.append(static_cast<size_t>(o.indent), ' ');
      }
    }
  };
  switch (v.kind()) {
    case K::kNone:
      out += "null";
      break;
    case K::kBool:
      out += v.as_bool() ? "true" : "false";
      break;
    case K::kInt:
      out += int_to_string(v);
      break;
    case K::kFloat:
      out += json_float(v.as_float());
      break;
    case K::kString:
      json_string(out, v.str(), o.ensure_ascii);
      break;
    case K::kList:
    case K::kTuple: {
      const List& items = v.items();
      if (items.empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        json_into(out, items[i], o, depth + 1);
      }
      newline(depth);
      out += ']';
      break;
    }
    case K::kDict: {
      const auto& entries = v.dict().entries;
      if (entries.empty()) {
        out += "{}";
        break;
      }
      std::vector<std::pair<std::string, const Value*>> fields;
      for (const auto& [key, item] : entries) fields.emplace_back(json_key(key), &item);
      if (o.sort_keys) {
        std::stable_sort(fields.begin(), fields.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        json_string(out, fields[i].first, o.ensure_ascii);
        out += o.key_separator;
        json_into(out, *fields[i].second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
    }
    default:
      throw std::invalid_argument(
          fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    const char32_t c = base::decode_utf8(s, i, length);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (printable(c)) {
      out.append(s.substr(i, length));
    } else if (c < 0x100) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c < 0x10000) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
    i += length;
  }
  out += quote;
  return out;
}

std::string to_str(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kUndefined:
      return "";
    case K::kNone:
      return "None";
    case K::kBool:
      return v.as_bool() ? "True" : "False";
    case K::kInt:
      return int_to_string(v);
    case K::kFloat:
      return repr_float(v.as_float());
    case K::kString:
      return v.str();
    case K::kCallable:
      return fmt::format("<function {}>", v.fn().name);
    case K::kObject:
      return v.obj().text;
    default: {
      std::string out;
      repr_into(out, v, 0);
      return out;
    }
  }
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_into(out, v, options, 0);
  return out;
}

}  // namespace trainer::tokenizers::jinja
