// The values a chat template computes with, torch-free: Python's None, bool, int, float, str,
// list, tuple and dict as Jinja2 sees them, plus Jinja's Undefined, namespace() and callables
// (macros, bound methods, globals). Printing (str and repr), equality, ordering and json.dumps
// follow Python's, byte for byte, so that a template renders here what it renders under jinja2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::tokenizers::jinja {

// An error of a template: its syntax, its code at run time, its raise_exception, or a bound of
// Limits passed. what() is one line naming the template and the line (1-based; 0: none).
struct TemplateError : std::runtime_error {
  enum class Kind { kSyntax, kRuntime, kRaised, kLimit };
  TemplateError(Kind kind, int line, const std::string& what)
      : std::runtime_error(what), kind(kind), line(line) {}
  Kind kind;
  int line;
  std::string detail;  // the message alone, without the template's name and line
};

class Value;
class Interpreter;
struct BigInt;  // an int past 64 bits: GMP's mpz, inside jinja_int.cpp
using List = std::vector<Value>;

// What a call passes: positional and keyword arguments, in order.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// A callable: a global (range, namespace, raise_exception), a bound method ('a'.split) or a macro.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable,
    kObject
  };
  struct Dict;
  struct Namespace;
  struct Object;

  // Undefined, with the message an operation on it fails with ("'x' is undefined").
  Value() = default;
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  // An int past 64 bits (jinja_int.h makes them): `saturated` is the int64 bound nearer to it.
  static Value big_integer(std::shared_ptr<const BigInt> big, int64_t saturated);
  static Value number(double f);
  static Value string(std::string s);
  // Throw std::invalid_argument for a value nested deeper than kMaxDepth.
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(std::shared_ptr<const Dict> dict);
  static Value make_namespace();
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);
  // One of jinja2's own objects (a for loop's `loop`, `self`): read-only attributes, printed as
  // `text`, named `type` in messages.
  static Value object(std::shared_ptr<const Object> object);
  // JSON as Python's json.loads gives it (objects keep their key order).
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }  // bool is an int
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return b_; }
  // An int's value (a bool's 0 or 1; an int past 64 bits: the nearer int64 bound); 0 for
  // anything else.
  int64_t as_int() const {
    return kind_ == Kind::kBool ? (b_ ? 1 : 0) : kind_ == Kind::kInt ? i_ : 0;
  }
  // A number as a float (an int past a float's range: an infinity; jinja_int.h's int_to_float
  // refuses it as Python does).
  double as_float() const {
    return kind_ == Kind::kFloat ? f_ : big() ? big_as_float() : static_cast<double>(as_int());
  }
  // An int past 64 bits; nullptr for any other value.
  const BigInt* big() const {
    return kind_ == Kind::kInt ? static_cast<const BigInt*>(p_.get()) : nullptr;
  }
  const std::string& str() const;  // a string's bytes (UTF-8)
  const List& items() const;       // a list's or tuple's elements
  const Dict& dict() const;
  Namespace& ns() const;
  const Callable& fn() const;
  const Object& obj() const;
  // Undefined's message.
  const std::string& hint() const;
  int depth() const { return depth_; }
  static constexpr int kMaxDepth = 256;

  // Python's bool(x) (Undefined is false).
  bool truthy() const;
  // Python's type name, as jinja2 names it in messages ("str", "list", "dict", "NoneType").
  std::string type_name() const;

 private:
  double big_as_float() const;  // jinja_int.cpp

  Kind kind_ = Kind::kUndefined;
  // How deep lists, tuples and dicts nest in this value (1: a scalar): a value past kMaxDepth is
  // refused when it is made, so that printing or freeing it never recurses past a bound.
  uint16_t depth_ = 1;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const void> p_;
};

// A dict in insertion order (Python's), keyed by any hashable value; small dicts, linear search.
struct Value::Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces an equal key's value in place, or appends
};

// namespace(): the one mutable value ({% set ns.x = ... %}).
struct Value::Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

// jinja2's LoopContext or TemplateReference, as chat templates see them.
struct Value::Object {
  std::string type, text;
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view name) const;
};

// Python's ==: 1 == 1.0 == True, lists and dicts by their elements; Undefined equals Undefined.
bool equal(const Value& a, const Value& b);
// Python's <, for numbers, strings (by code point) and sequences; throws base InputError-free
// std::invalid_argument naming the types otherwise (the interpreter turns it into a TemplateError).
bool less(const Value& a, const Value& b);

// Python's str(x) as jinja2 prints {{ x }} (None, True, 1.5, [1, 'a'], {'a': 1}); Undefined is "".
std::string to_str(const Value& v);
// Python's repr(x).
std::string repr(const Value& v);
// Python's repr of a str.
std::string repr_string(std::string_view s);
// Python's repr of a float (shortest round trip: 1.0, 1e-05, 1e+16, inf, nan).
std::string repr_float(double f);

struct JsonOptions {
  bool ensure_ascii = false;
  int indent = -1;          // -1: None (one line)
  std::string indent_text;  // used when indent_text_set (an indent given as a string)
  bool indent_text_set = false;
  std::string item_separator = ", ", key_separator = ": ";
  bool sort_keys = false;
};
// json.dumps(x, ...) as Transformers' tojson filter calls it. Throws std::invalid_argument for
// what json.dumps refuses (Undefined, a namespace, a callable, a dict key that is a list).
std::string to_json(const Value& v, const JsonOptions& options);

// Text helpers on UTF-8, by code point as Python's str counts.
size_t code_points(std::string_view s);
std::vector<char32_t> decode(std::string_view s);
std::string encode(const std::vector<char32_t>& cps, size_t begin, size_t end);
// Python's str.isspace for one code point.
bool is_space(char32_t c);

}  // namespace trainer::tokenizers::jinja
