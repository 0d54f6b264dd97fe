// jinja2's tests (`x is defined`, `x is string`, `x is mapping`, ...), as jinja2/tests.py
// defines them on Python's values.
#include <unicode/uchar.h>

#include <fmt/format.h>

#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {
namespace {

using K = Value::Kind;

Value other(const CallArgs& args) { return argument(args, 0, "other"); }

// jinja2's odd, even and divisibleby: Python's `value % divisor == remainder`.
bool remainder_is(Interpreter& in, const Value& v, const Value& divisor, int64_t remainder) {
  in.require_defined(v);
  in.require_defined(divisor);
  return equal(binary_operator(in, "%", v, divisor), Value::integer(remainder));
}

bool cased(const Value& v, bool upper) {
  const std::string s = soft_str(v);
  return !s.empty() &&
         (upper ? py_upper(s) == s && py_lower(s) != s : py_lower(s) == s && py_upper(s) != s);
}

struct Test {
  const char* name;
  TestFn fn;
};

const Test kTests[] = {
    {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
    {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
    {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
    {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == K::kBool; }},
    {"true",
     [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == K::kBool && v.as_bool(); }},
    {"false",
     [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == K::kBool && !v.as_bool(); }},
    {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == K::kInt; }},
    {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == K::kFloat; }},
    {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
    {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
    {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }},
    {"iterable",
     [](Interpreter&, const Value& v, CallArgs&) {
       return v.is_sequence() || v.is_string() || v.is_dict() || v.is_undefined();
     }},
    {"sequence",
     [](Interpreter&, const Value& v, CallArgs&) {
       return v.is_sequence() || v.is_string() || v.is_dict() || v.is_undefined();
     }},
    {"callable", [](Interpreter&, const Value& v,
                    CallArgs&) { return v.kind() == K::kCallable || v.is_undefined(); }},
    {"sameas",
     [](Interpreter&, const Value& v, CallArgs& a) {
       // Python's `is`: None, the bools, and CPython's cached small ints (-5..256) are
       // themselves; other values made apart are not.
       const Value o = other(a);
       if (v.kind() != o.kind()) return false;
       switch (v.kind()) {
         case K::kNone:
         case K::kUndefined:
           return true;
         case K::kBool:
           return v.as_bool() == o.as_bool();
         case K::kInt:
           return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
         case K::kNamespace:
           return &v.ns() == &o.ns();
         case K::kObject:
           return &v.obj() == &o.obj();
         default:
           return false;
       }
     }},
    {"escaped", [](Interpreter&, const Value&, CallArgs&) { return false; }},
    {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return equal(v, other(a)); }},
    {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !equal(v, other(a)); }},
    {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return ordered("<", v, other(a)); }},
    {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return ordered(">", v, other(a)); }},
    {"le", [](Interpreter&, const Value& v, CallArgs& a) { return ordered("<=", v, other(a)); }},
    {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return ordered(">=", v, other(a)); }},
    {"in",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       CallArgs probe;
       const Value seq = argument(a, 0, "seq");
       if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
       if (seq.is_dict()) return seq.dict().find(v) != nullptr;
       for (const auto& item : in.iterate(seq))
         if (equal(item, v)) return true;
       return false;
     }},
    {"odd", [](Interpreter& in, const Value& v,
               CallArgs&) { return remainder_is(in, v, Value::integer(2), 1); }},
    {"even", [](Interpreter& in, const Value& v,
                CallArgs&) { return remainder_is(in, v, Value::integer(2), 0); }},
    {"divisibleby", [](Interpreter& in, const Value& v,
                       CallArgs& a) { return remainder_is(in, v, argument(a, 0, "num"), 0); }},
    {"lower", [](Interpreter&, const Value& v, CallArgs&) { return cased(v, false); }},
    {"upper", [](Interpreter&, const Value& v, CallArgs&) { return cased(v, true); }},
    {"filter", [](Interpreter&, const Value& v,
                  CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }},
    {"test", [](Interpreter&, const Value& v,
                CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }},
};

const std::pair<const char*, const char*> kAliases[] = {
    {"==", "eq"}, {"equalto", "eq"},     {"!=", "ne"}, {"<", "lt"}, {"lessthan", "lt"},
    {">", "gt"},  {"greaterthan", "gt"}, {"<=", "le"}, {">=", "ge"}};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& [alias, target] : kAliases)
    if (name == alias) name = target;
  for (const auto& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

}  // namespace trainer::tokenizers::jinja
