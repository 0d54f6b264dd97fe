// YAML configuration files read with yaml-cpp into JSON values, their scalars typed by PyYAML's
// YAML 1.1 resolver and constructors (what TRL's TrlParser reads a recipe with: yaml.safe_load).
#include "lib/base/yaml_text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
// yaml-cpp 0.7's node headers trip GCC 12's -Wdangling-pointer (its own code, inlined here).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"

namespace trainer::base {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxValues = 100000;  // values after aliases are expanded

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python's str.lower() of ASCII text.
std::string lowered(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string without_underscores(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != '_') out += c;
  }
  return out;
}

// Reads [chars]+ (or [chars]* when `empty_ok`) from text at i.
template <typename Accept>
bool run_of(const std::string& text, size_t& i, Accept accept, bool empty_ok) {
  const size_t start = i;
  while (i < text.size() && accept(text[i])) ++i;
  return empty_ok || i > start;
}

bool digit_or_underscore(char c) { return is_digit(c) || c == '_'; }

// (?::[0-5]?[0-9])+ at i.
bool sexagesimal_tail(const std::string& text, size_t& i) {
  bool any = false;
  while (i < text.size() && text[i] == ':') {
    size_t j = i + 1;
    if (j + 1 < text.size() && text[j] >= '0' && text[j] <= '5' && is_digit(text[j + 1])) {
      j += 2;
    } else if (j < text.size() && is_digit(text[j])) {
      j += 1;
    } else {
      return any;
    }
    i = j;
    any = true;
  }
  return any;
}

// PyYAML's int resolver: [-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) |
// [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
bool looks_like_int(const std::string& text) {
  size_t start = text.empty() || (text[0] != '-' && text[0] != '+') ? 0 : 1;
  const std::string s = text.substr(start);
  if (s.empty()) return false;
  auto all = [&](size_t from, auto accept) {
    if (from >= s.size()) return false;
    for (size_t i = from; i < s.size(); ++i) {
      if (!accept(s[i])) return false;
    }
    return true;
  };
  if (s.rfind("0b", 0) == 0) return all(2, [](char c) { return c == '0' || c == '1' || c == '_'; });
  if (s.rfind("0x", 0) == 0) {
    return all(2, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '_'; });
  }
  if (s == "0") return true;
  if (s[0] == '0') return all(1, [](char c) { return (c >= '0' && c <= '7') || c == '_'; });
  if (!is_digit(s[0])) return false;
  size_t i = 1;
  run_of(s, i, digit_or_underscore, true);
  if (i == s.size()) return true;
  return sexagesimal_tail(s, i) && i == s.size();
}

// PyYAML's float resolver: [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)? |
// \.[0-9_]+(?:[eE][-+][0-9]+)? | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]* |
// [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)
bool looks_like_float(const std::string& text) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return true;
  const bool signed_ = !text.empty() && (text[0] == '-' || text[0] == '+');
  const std::string s = text.substr(signed_ ? 1 : 0);
  if (s == ".inf" || s == ".Inf" || s == ".INF") return true;
  auto exponent = [&](size_t i) {  // (?:[eE][-+][0-9]+)? then the end
    if (i == s.size()) return true;
    if (s[i] != 'e' && s[i] != 'E') return false;
    ++i;
    if (i >= s.size() || (s[i] != '-' && s[i] != '+')) return false;
    ++i;
    return run_of(s, i, is_digit, false) && i == s.size();
  };
  if (!s.empty() && s[0] == '.') {
    if (signed_) return false;
    size_t i = 1;
    return run_of(s, i, digit_or_underscore, false) && exponent(i);
  }
  if (s.empty() || !is_digit(s[0])) return false;
  size_t i = 1;
  run_of(s, i, digit_or_underscore, true);
  if (i < s.size() && s[i] == '.') {
    ++i;
    run_of(s, i, digit_or_underscore, true);
    return exponent(i);
  }
  if (!sexagesimal_tail(s, i) || i >= s.size() || s[i] != '.') return false;
  ++i;
  run_of(s, i, digit_or_underscore, true);
  return i == s.size();
}

// Base 60: "1:30" is 90, as PyYAML's constructors read it.
template <typename Number>
std::optional<Number> sexagesimal(const std::string& digits, Number (*part)(const std::string&)) {
  Number value = 0;
  size_t start = 0;
  while (start <= digits.size()) {
    size_t colon = digits.find(':', start);
    if (colon == std::string::npos) colon = digits.size();
    value = value * 60 + part(digits.substr(start, colon - start));
    start = colon + 1;
  }
  return value;
}

// PyYAML's construct_yaml_int of text the int resolver matched.
json construct_int(const std::string& text) {
  std::string value = without_underscores(text);
  int sign = 1;
  if (!value.empty() && (value[0] == '-' || value[0] == '+')) {
    if (value[0] == '-') sign = -1;
    value = value.substr(1);
  }
  int base = 10;
  std::string digits = value;
  if (value == "0") return 0;
  if (value.rfind("0b", 0) == 0) {
    base = 2;
    digits = value.substr(2);
  } else if (value.rfind("0x", 0) == 0) {
    base = 16;
    digits = value.substr(2);
  } else if (!value.empty() && value[0] == '0') {
    base = 8;
  } else if (value.find(':') != std::string::npos) {
    // Sexagesimal parts are at most 59 but the first; a long first part overflows below.
    long double whole = *sexagesimal<long double>(
        value, +[](const std::string& p) { return std::strtold(p.c_str(), nullptr); });
    if (whole > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
      throw InputError(fmt::format("the integer {} is out of range (up to 2^63-1)", text));
    }
    return sign * static_cast<int64_t>(whole);
  }
  if (digits.empty()) {
    throw InputError(fmt::format("{} is not an integer (no digits; quote it for text)", text));
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long magnitude = std::strtoull(digits.c_str(), &end, base);
  const unsigned long long limit =
      sign < 0 ? uint64_t{1} << 63 : uint64_t{std::numeric_limits<int64_t>::max()};
  if (errno == ERANGE || *end != '\0' || magnitude > limit) {
    throw InputError(fmt::format("the integer {} is out of range (up to 2^63-1)", text));
  }
  if (sign < 0)
    return magnitude == limit ? std::numeric_limits<int64_t>::min()
                              : -static_cast<int64_t>(magnitude);
  return static_cast<int64_t>(magnitude);
}

// PyYAML's construct_yaml_float of text the float resolver matched.
json construct_float(const std::string& text) {
  std::string value = lowered(without_underscores(text));
  double sign = 1;
  if (!value.empty() && (value[0] == '-' || value[0] == '+')) {
    if (value[0] == '-') sign = -1;
    value = value.substr(1);
  }
  if (value == ".inf") return sign * std::numeric_limits<double>::infinity();
  if (value == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (value.find(':') != std::string::npos) {
    return sign * *sexagesimal<double>(
                      value, +[](const std::string& p) { return std::strtod(p.c_str(), nullptr); });
  }
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (value.empty() || value == "." || *end != '\0') {
    throw InputError(fmt::format("{} is not a number (quote it for text)", text));
  }
  return sign * number;
}

// Python's float() of text, or nothing (for an explicit !!float tag).
json explicit_float(const std::string& text) {
  if (looks_like_float(text) || looks_like_int(text)) return construct_float(text);
  throw InputError(fmt::format("!!float {} is not a number", shown_text(text)));
}

bool is_null_text(const std::string& text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

std::optional<bool> bool_text(const std::string& text) {
  for (const char* word : {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (text == word) return true;
  }
  for (const char* word : {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (text == word) return false;
  }
  return std::nullopt;
}

// A document's events ignored but where it starts (for the second document's line).
class DocumentStart : public YAML::EventHandler {
 public:
  YAML::Mark mark = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& at) override { mark = at; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

class Reader {
 public:
  Reader(const std::string& what, int max_depth) : what_(what), max_depth_(max_depth) {}

  json value(const YAML::Node& node, int depth) {
    if (++values_ > kMaxValues) {
      fail(node, fmt::format("more than {} values (aliases expand to copies)", kMaxValues));
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return nullptr;
      case YAML::NodeType::Scalar:
        return scalar(node);
      case YAML::NodeType::Sequence: {
        container(node, depth, "tag:yaml.org,2002:seq");
        json out = json::array();
        for (const YAML::Node& item : node) out.push_back(value(item, depth + 1));
        return out;
      }
      case YAML::NodeType::Map:
        container(node, depth, "tag:yaml.org,2002:map");
        return mapping(node, depth);
    }
    return nullptr;
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& why) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) throw InputError(fmt::format("{}: {}", what_, why));
    throw InputError(fmt::format("{}:{}:{}: {}", what_, mark.line + 1, mark.column + 1, why));
  }

 private:
  void container(const YAML::Node& node, int depth, const char* own_tag) const {
    const std::string& tag = node.Tag();
    if (!tag.empty() && tag != "?" && tag != "!" && tag != own_tag) unsupported_tag(node);
    if (depth > max_depth_) {
      fail(node, fmt::format("values nested deeper than {} levels", max_depth_));
    }
  }

  [[noreturn]] void unsupported_tag(const YAML::Node& node) const {
    fail(node, fmt::format("the tag {} is not one PyYAML's safe_load constructs (str, int, float, "
                           "bool, null, seq, map)",
                           shown_text(node.Tag(), 80)));
  }

  json scalar(const YAML::Node& node) const {
    const std::string& text = node.Scalar();
    const std::string& tag = node.Tag();
    try {
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return text;  // quoted, or !!str
      if (tag == "?") return yaml_plain_scalar(text);
      if (tag == "tag:yaml.org,2002:int") {
        if (!looks_like_int(text)) fail(node, fmt::format("!!int {} is not an integer", text));
        return construct_int(text);
      }
      if (tag == "tag:yaml.org,2002:float") return explicit_float(text);
      if (tag == "tag:yaml.org,2002:bool") {
        // construct_yaml_bool: the words of the resolver, in any case.
        const std::string word = lowered(text);
        for (const char* yes : {"yes", "true", "on"}) {
          if (word == yes) return true;
        }
        for (const char* no : {"no", "false", "off"}) {
          if (word == no) return false;
        }
        fail(node, fmt::format("!!bool {} is not yes/no, true/false or on/off", shown_text(text)));
      }
      if (tag == "tag:yaml.org,2002:null") return nullptr;
    } catch (const InputError& e) {
      if (std::string(e.what()).rfind(what_ + ":", 0) == 0) throw;
      fail(node, e.what());
    }
    unsupported_tag(node);
  }

  std::string key_text(const YAML::Node& key) const {
    if (key.Type() != YAML::NodeType::Scalar) {
      fail(key, "a mapping's key must be text, not a list, a mapping or null");
    }
    const std::string& text = key.Scalar();
    if (!is_valid_utf8(text)) fail(key, fmt::format("the key {} is not UTF-8", shown_text(text)));
    return text;
  }

  // Merges `source` (a mapping, or a list of mappings: the first wins) into `out` under the keys
  // it does not hold yet, as PyYAML's flatten_mapping.
  void merge(const YAML::Node& source, int depth, json& out) {
    std::vector<YAML::Node> maps;
    if (source.IsMap()) {
      maps.push_back(source);
    } else if (source.IsSequence()) {
      for (const YAML::Node& item : source) {
        if (!item.IsMap()) fail(item, "a merge (<<) takes a mapping or a list of mappings");
        maps.push_back(item);
      }
    } else {
      fail(source, "a merge (<<) takes a mapping or a list of mappings");
    }
    for (const YAML::Node& map : maps) {
      json merged = value(map, depth);
      for (auto& [k, v] : merged.items()) {
        if (!out.contains(k)) out[k] = v;
      }
    }
  }

  json mapping(const YAML::Node& node, int depth) {
    json explicit_keys = json::object();
    std::map<std::string, YAML::Mark> where;
    std::vector<YAML::Node> merges;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies: it-> hands out a proxy whose pair dies with the expression (ASan's
      // stack-use-after-scope on a reference to its first).
      const YAML::Node key = it->first;
      const YAML::Node item = it->second;
      if (key.IsScalar() && key.Tag() == "?" && key.Scalar() == "<<") {
        merges.push_back(item);
        continue;
      }
      const std::string name = key_text(key);
      if (auto seen = where.find(name); seen != where.end()) {
        fail(key, fmt::format("{} is given twice (first at line {}); give it once", name,
                              seen->second.line + 1));
      }
      where[name] = key.Mark();
      explicit_keys[name] = value(item, depth + 1);
    }
    if (merges.empty()) return explicit_keys;
    // PyYAML: the merged keys first, those given explicitly replacing them.
    json out = json::object();
    for (const YAML::Node& source : merges) merge(source, depth, out);
    for (auto& [k, v] : explicit_keys.items()) out[k] = v;
    return out;
  }

  std::string what_;
  int max_depth_;
  size_t values_ = 0;
};

}  // namespace

json yaml_plain_scalar(const std::string& text) {
  if (is_null_text(text)) return nullptr;
  if (auto b = bool_text(text)) return *b;
  if (looks_like_int(text)) return construct_int(text);
  if (looks_like_float(text)) return construct_float(text);
  return text;
}

json parse_yaml(std::string_view text, const std::string& what, int max_depth) {
  // PyYAML reads UTF-8 only (its reader refuses other bytes), and JSON holds text only.
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    const std::string_view before = text.substr(0, bad);
    const size_t line_start = before.rfind('\n');
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t column = line_start == std::string_view::npos ? bad + 1 : bad - line_start;
    throw InputError(fmt::format("{}:{}:{}: not valid YAML: the byte 0x{:02X} is not UTF-8", what,
                                 line, column, static_cast<unsigned char>(text[bad])));
  }
  const std::string input(text);
  YAML::Node document;
  std::optional<YAML::Mark> second;
  try {
    // yaml-cpp 0.7's LoadAll can loop forever on stray flow indicators (", a": a null document
    // at each turn, its memory growing until the process is killed): the first document is
    // read alone, then the parser is asked once whether another follows.
    document = YAML::Load(input);
    std::istringstream in(input);
    YAML::Parser parser(in);
    DocumentStart first, next;
    parser.HandleNextDocument(first);
    if (parser.HandleNextDocument(next)) second = next.mark;
  } catch (const YAML::Exception& e) {
    const std::string why = e.msg.empty() ? "not valid YAML" : e.msg;
    if (e.mark.is_null()) throw InputError(fmt::format("{}: not valid YAML: {}", what, why));
    throw InputError(
        fmt::format("{}:{}:{}: not valid YAML: {}", what, e.mark.line + 1, e.mark.column + 1, why));
  }
  if (second) {
    throw InputError(fmt::format("{}:{}:{}: a second YAML document; a config file holds one", what,
                                 second->line + 1, second->column + 1));
  }
  Reader reader(what, max_depth);
  try {
    return reader.value(document, 0);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: not valid YAML: {}", what, e.msg));
  }
}

}  // namespace trainer::base
