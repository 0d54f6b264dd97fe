// The Jinja engine's evaluator, shared by the statements and expressions (jinja_eval.cpp) and
// the builtins (jinja_builtins.cpp): scopes, attribute and item lookup as jinja2's sandbox does
// them, calls, the bounds of Limits. Not a public header: jinja.h is the engine's door.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lib/tokenizers/jinja.h"
#include "lib/tokenizers/jinja_ast.h"

namespace trainer::tokenizers::jinja {

// A parsed template (Template's inside).
struct Program {
  std::string name;
  Limits limits;
  Body body;
};

// A message on one line: the line breaks a template's text may bring (raise_exception's message,
// a character in a format) shown as \n and \r.
std::string one_line(const std::string& what);

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);
using MethodFn = Value (*)(Interpreter&, const Value& self, CallArgs&, std::string_view name);

// The builtins by name (nullptr: none of that name).
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// A method of a str, list, tuple or dict (`'a'.split`, `d.get`); nullptr where Python has none.
// `unsafe` is set for the methods the immutable sandbox refuses (list.append, dict.update).
MethodFn find_method(const Value& self, std::string_view name, bool& unsafe);
// jinja2's globals: range, dict, namespace (jinja_globals.cpp).
Value find_global(std::string_view name);
// The int, float and round filters (jinja_numbers.cpp).
Value filter_int(Interpreter& in, const Value& v, CallArgs& args);
Value filter_float(Interpreter& in, const Value& v, CallArgs& args);
Value filter_round(Interpreter& in, const Value& v, CallArgs& args);
// center, truncate, batch and slice, and the joiner() global (jinja_layout.cpp).
Value filter_center(Interpreter& in, const Value& v, CallArgs& args);
Value filter_truncate(Interpreter& in, const Value& v, CallArgs& args);
Value filter_batch(Interpreter& in, const Value& v, CallArgs& args);
Value filter_slice(Interpreter& in, const Value& v, CallArgs& args);
Value make_joiner(Interpreter& in, CallArgs& args);
// The line for a filter that is not there: jinja2's own filters this engine does not build are
// named as not supported, any other name as unknown.
std::string missing_filter(std::string_view name);
// Python's a < b, a > b, a <= b or a >= b (op "<", ">", "<=", ">="): false with a NaN.
bool ordered(std::string_view op, const Value& a, const Value& b);
// Python's binary operator `op` (+ - * / // % **) on two defined values (jinja_expr.cpp).
Value binary_operator(Interpreter& in, std::string_view op, const Value& a, const Value& b);
// Python's `format % args` (args: the call's positional arguments, or its keywords or one dict
// for %(name)s), as the format filter and the % operator use it.
Value python_format(Interpreter& in, const Value& format, CallArgs& args);

// The builtins' shared helpers (jinja_methods.cpp): a call's argument `index` (positional) or
// `name` (keyword), `fallback` when absent; Python's str methods on UTF-8.
Value argument(const CallArgs& args, size_t index, std::string_view name, Value fallback = {});
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
// str.strip(chars) (chars none: white space), from the left, the right or both.
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
// str.replace(old, new, count) (count < 0: all), the result's size checked.
std::string py_replace(Interpreter& in, std::string_view s, std::string_view old,
                       std::string_view replacement, int64_t count);
// str.splitlines(keepends).
std::vector<std::string> py_splitlines(std::string_view s, bool keepends = false);
// The value's string as jinja2's soft_str gives it (Undefined: "").
inline std::string soft_str(const Value& v) { return v.is_string() ? v.str() : to_str(v); }

class Interpreter {
 public:
  Interpreter(const std::string& template_name, const Limits& limits);
  ~Interpreter();

  Rendered run(const Body& body, const std::vector<std::pair<std::string, Value>>& variables);

  // A runtime error at the current line; kRaised for raise_exception.
  [[noreturn]] void fail(const std::string& what,
                         TemplateError::Kind kind = TemplateError::Kind::kRuntime) const;
  // Fails when a string or list of `size` bytes (or elements) would pass max_output_bytes;
  // `what` names what grew ("a list of 1 item repeated 100,000,000 times"), "the output" when it
  // is the rendered text or the value at large.
  void check_size(size_t size, const std::string& what = "the output") const;
  const Limits& limits() const { return limits_; }
  // Counts a step and fails past the time bound.
  void step();

  // jinja2's environment.getattr / getitem (sandboxed): a missing one is Undefined.
  Value getattr(const Value& object, const std::string& name);
  Value getitem(const Value& object, const Value& key);
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
  bool apply_test(const std::string& name, const Value& subject, CallArgs& args);
  // Fails with an Undefined's message when `v` is Undefined.
  void require_defined(const Value& v) const;
  // The elements a for loop or list() sees: a list's, a dict's keys, a string's characters.
  List iterate(const Value& v) const;

  // Namespaces made by namespace(), emptied at the end of the render (a namespace can hold
  // itself; emptying frees the cycle).
  void track(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void exec_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value call_macro(const Stmt& s, const std::shared_ptr<Scope>& defined_in, CallArgs& args);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  void assign(const Target& t, const Value& v, Scope& scope);
  void emit(std::string_view text);

  Value eval(const Expr& e, Scope& scope);
  Value eval_binary(const Expr& e, Scope& scope);
  Value eval_slice(const Expr& e, Scope& scope);
  Value eval_unary(const Expr& e, Scope& scope);
  Value eval_dict(const Expr& e, Scope& scope);
  Value eval_compare(const Expr& e, Scope& scope);
  Value lookup(const std::string& name, const Scope& scope) const;
  CallArgs eval_args(const Expr& e, Scope& scope, size_t first);

  // Statements and expressions being evaluated inside one another (macro bodies included):
  // bounded so that no template recurses past the stack.
  struct Nested {
    explicit Nested(Interpreter& in);
    ~Nested() { --in.nested_; }
    Interpreter& in;
  };
  static constexpr int kMaxNested = 2000;
  int nested_ = 0;

  const std::string& name_;
  Limits limits_;
  int line_ = 0;
  int call_depth_ = 0;
  uint64_t steps_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::string* out_ = nullptr;
  std::string* root_ = nullptr;
  Rendered* rendered_ = nullptr;
  std::vector<Value> namespaces_;
  std::vector<std::shared_ptr<Scope>> macro_scopes_;
};

}  // namespace trainer::tokenizers::jinja
