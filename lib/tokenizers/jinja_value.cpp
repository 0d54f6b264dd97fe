// Python's values for the Jinja engine: construction, equality and ordering as CPython does them,
// and the UTF-8 helpers; their printing is jinja_print.cpp's.
#include "lib/tokenizers/jinja_value.h"

#include <stdexcept>

#include <fmt/format.h>
#include <unicode/uchar.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_int.h"

namespace trainer::tokenizers::jinja {

namespace {

template <typename T>
std::shared_ptr<const void> hold(T value) {
  return std::make_shared<const T>(std::move(value));
}

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

uint16_t nested_depth(int deepest_child) {
  if (deepest_child + 1 > Value::kMaxDepth)
    throw std::invalid_argument(
        fmt::format("a list or dict nested more than {} deep", Value::kMaxDepth));
  return static_cast<uint16_t>(deepest_child + 1);
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = hold(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::big_integer(std::shared_ptr<const BigInt> big, int64_t saturated) {
  Value v = integer(saturated);
  v.p_ = std::move(big);
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.p_ = hold(std::move(s));
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  int deepest = 0;
  for (const auto& item : items) deepest = std::max(deepest, item.depth());
  v.depth_ = nested_depth(deepest);
  v.p_ = hold(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::dict(std::shared_ptr<const Dict> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  int deepest = 0;
  for (const auto& [key, item] : dict->entries)
    deepest = std::max({deepest, key.depth(), item.depth()});
  v.depth_ = nested_depth(deepest);
  v.p_ = std::move(dict);
  return v;
}

Value Value::make_namespace() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.p_ = std::make_shared<Namespace>();
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.p_ = hold(Callable{std::move(name), std::move(call)});
  return v;
}

Value Value::object(std::shared_ptr<const Object> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.p_ = std::move(object);
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return *int_from_digits(std::to_string(u), 10);
      return integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return number(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [key, item] : json.items()) d->set(string(key), from_json(item));
      return dict(std::move(d));
    }
    default:
      return none();  // binary and discarded values do not come from JSON text
  }
}

const std::string& Value::str() const {
  return kind_ == Kind::kString ? *static_cast<const std::string*>(p_.get()) : empty_string();
}

const List& Value::items() const {
  static const List empty;
  return is_sequence() ? *static_cast<const List*>(p_.get()) : empty;
}

const Value::Dict& Value::dict() const {
  static const Dict empty;
  return kind_ == Kind::kDict ? *static_cast<const Dict*>(p_.get()) : empty;
}

Value::Namespace& Value::ns() const {
  return *const_cast<Namespace*>(static_cast<const Namespace*>(p_.get()));
}

const Callable& Value::fn() const { return *static_cast<const Callable*>(p_.get()); }

const Value::Object& Value::obj() const { return *static_cast<const Object*>(p_.get()); }

const Value* Value::Object::find(std::string_view name) const {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

const std::string& Value::hint() const {
  return kind_ == Kind::kUndefined && p_ ? *static_cast<const std::string*>(p_.get())
                                         : empty_string();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !dict().entries.empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kObject:
      return obj().type;
    default:
      return "function";
  }
}

const Value* Value::Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Value::Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Value::Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* Value::Namespace::find(std::string_view name) const {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

void Value::Namespace::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) return number_compare(a, b) == 0;
  const bool a_seq = a.is_sequence(), b_seq = b.is_sequence();
  if (a_seq || b_seq) {
    if (a.kind() != b.kind()) return false;  // [1] != (1,)
    const List &x = a.items(), &y = b.items();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equal(x[i], y[i])) return false;
    return true;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.str() == b.str();
    case K::kDict: {
      const auto &x = a.dict().entries, &y = b.dict().entries;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case K::kNamespace:
      return &a.ns() == &b.ns();
    case K::kCallable:
      return &a.fn() == &b.fn();
    case K::kObject:
      return &a.obj() == &b.obj();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return number_compare(a, b) == -1;
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order is code point order
  if (a.is_sequence() && a.kind() == b.kind()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw std::invalid_argument(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                          a.type_name(), b.type_name()));
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    out.push_back(base::decode_utf8(s, i, length));
    i += length;
  }
  return out;
}

std::string encode(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) base::append_utf8(out, cps[i]);
  return out;
}

bool is_space(char32_t c) {
  // Python's str.isspace: bidirectional class WS, B or S, or category Zs.
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
  if (c < 0x80) return false;
  const auto bidi = u_charDirection(static_cast<UChar32>(c));
  return bidi == U_WHITE_SPACE_NEUTRAL || bidi == U_BLOCK_SEPARATOR ||
         bidi == U_SEGMENT_SEPARATOR || u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR;
}

}  // namespace trainer::tokenizers::jinja
