// Jinja expressions: literals, names, attributes, subscripts and slices, calls, filters and
// tests, and the operators with Python's semantics (ints of any size, jinja_int.h; sizes checked
// before a string or list is made).
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "lib/base/text.h"
#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {
namespace {

using K = Value::Kind;

// Python's slice of a length-n sequence: the indices it takes, in order.
std::vector<int64_t> slice_indices(Interpreter& in, int64_t n, const Value& start,
                                   const Value& stop, const Value& step_value) {
  const int64_t step = step_value.is_none() || step_value.is_undefined() ? 1 : step_value.as_int();
  if (step == 0) in.fail("slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t fallback) {
    if (v.is_none() || v.is_undefined()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t begin = bound(start, step > 0 ? 0 : n - 1);
  const int64_t end = bound(stop, step > 0 ? n : -1);
  std::vector<int64_t> out;
  // In 128 bits: a step near 2^63 must not overflow past the end.
  for (__int128 i = begin; step > 0 ? i < end : i > end; i += step)
    out.push_back(static_cast<int64_t>(i));
  return out;
}

bool slice_part_ok(const Value& v) { return v.is_none() || v.is_undefined() || v.is_int(); }

Value repeat(Interpreter& in, const Value& seq, const Value& times) {
  if (times.big() && times.as_int() > 0) in.fail("cannot fit 'int' into an index-sized integer");
  const int64_t count = times.as_int();
  const bool empty = seq.is_string() ? seq.str().empty() : seq.items().empty();
  if (count <= 0 || empty)  // () * 2**44 is () at once
    return seq.is_string()           ? Value::string("")
           : seq.kind() == K::kTuple ? Value::tuple({})
                                     : Value::list({});
  const size_t unit = seq.is_string() ? seq.str().size() : seq.items().size() * sizeof(Value);
  size_t total = 0;
  if (__builtin_mul_overflow(unit, static_cast<size_t>(count), &total)) total = SIZE_MAX;
  if (total > in.limits().max_output_bytes) {
    // What grew, not the output (which may be a short text: ([1] * 10**8)|length).
    const auto n = static_cast<int64_t>(seq.is_string() ? seq.str().size() : seq.items().size());
    const std::string unit_text =
        seq.is_string()
            ? fmt::format("a string of {} byte{}", base::thousands(n), n == 1 ? "" : "s")
            : fmt::format("a {} of {} item{}", seq.kind() == K::kTuple ? "tuple" : "list",
                          base::thousands(n), n == 1 ? "" : "s");
    in.check_size(total, fmt::format("{} repeated {} times", unit_text, base::thousands(count)));
  }
  if (seq.is_string()) {
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < count; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  List out;
  out.reserve(total);
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == K::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

[[noreturn]] void unsupported(Interpreter& in, std::string_view op, const Value& a,
                              const Value& b) {
  in.fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(),
                      b.type_name()));
}

// Python's + : numbers, strings and sequences of one kind joined.
Value plus(Interpreter& in, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return int_arithmetic(in, "+", a, b);
  if (a.is_number() && b.is_number()) return Value::number(to_float(a) + to_float(b));
  if (a.is_string() && b.is_string()) {
    in.check_size(a.str().size() + b.str().size(), "a string joined by +");
    return Value::string(a.str() + b.str());
  }
  if (a.is_sequence() && a.kind() == b.kind()) {
    in.check_size((a.items().size() + b.items().size()) * sizeof(Value),
                  fmt::format("a {} joined by +", a.type_name()));
    List out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.kind() == K::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  unsupported(in, "+", a, b);
}

// CPython's float_divmod: (x // y, x % y) of floats.
std::pair<double, double> float_divmod(double x, double y) {
  double m = std::fmod(x, y), div = (x - m) / y;
  if (m != 0) {
    if ((y < 0) != (m < 0)) {
      m += y;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, y);
  }
  double floor_div = std::copysign(0.0, x / y);
  if (div != 0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  }
  return {floor_div, m};
}

// Python's // and % (a string's % its format, as jinja2 passes it).
Value floor_division(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
  if (a.is_string() && op == "%") {
    CallArgs args;
    if (b.kind() == K::kTuple) {
      args.args = b.items();
    } else {
      args.args.push_back(b);
    }
    return in.apply_filter("format", a, args);
  }
  const bool ints = a.is_int() && b.is_int();
  if (!(a.is_number() && b.is_number())) unsupported(in, op, a, b);
  if (b.as_float() == 0) in.fail(ints ? "integer division or modulo by zero" : "float divmod()");
  if (ints) return int_arithmetic(in, op, a, b);
  const auto [quotient, remainder] = float_divmod(to_float(a), to_float(b));
  return Value::number(op == "//" ? quotient : remainder);
}

// Python's ** : an int to a power >= 0 is an int (of any size), else floats; a negative number
// to a fractional power is complex in Python, refused here by name.
Value power(Interpreter& in, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int() && b.as_int() >= 0) return int_power(in, a, b);
  if (!(a.is_number() && b.is_number())) unsupported(in, "**", a, b);
  const double x = to_float(a), y = to_float(b);
  if (x == 0 && y < 0) in.fail("0.0 cannot be raised to a negative power");
  if (x < 0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y)) {
    in.fail(fmt::format("{} ** {} is a complex number, which chat templates here do not support",
                        repr(a), repr(b)));
  }
  const double result = std::pow(x, y);
  if (std::isinf(result) && std::isfinite(x) && std::isfinite(y))
    in.fail("(34, 'Numerical result out of range')");  // CPython's OverflowError
  return Value::number(result);
}

}  // namespace

bool ordered(std::string_view op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {  // every comparison with a NaN is false
    const std::optional<int> order = number_compare(a, b);
    return order && (op == "<"    ? *order < 0
                     : op == ">"  ? *order > 0
                     : op == "<=" ? *order <= 0
                                  : *order >= 0);
  }
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return !less(b, a);
  return !less(a, b);
}

Value binary_operator(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
  const bool ints = a.is_int() && b.is_int();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") return plus(in, a, b);
  if (op == "-") {
    if (ints) return int_arithmetic(in, op, a, b);
    if (numbers) return Value::number(to_float(a) - to_float(b));
    unsupported(in, op, a, b);
  }
  if (op == "*") {
    if (ints) return int_arithmetic(in, op, a, b);
    if (numbers) return Value::number(to_float(a) * to_float(b));
    if ((a.is_string() || a.is_sequence()) && b.is_int()) return repeat(in, a, b);
    if ((b.is_string() || b.is_sequence()) && a.is_int()) return repeat(in, b, a);
    unsupported(in, op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported(in, op, a, b);
    if (b.as_float() == 0) in.fail("division by zero");
    if (ints) return Value::number(int_true_divide(in, a, b));
    return Value::number(to_float(a) / to_float(b));
  }
  if (op == "//" || op == "%") return floor_division(in, op, a, b);
  if (op == "**") return power(in, a, b);
  in.fail(fmt::format("unknown operator {}", op));
}

namespace {

bool contains(Interpreter& in, const Value& container, const Value& item) {
  switch (container.kind()) {
    case K::kString:
      if (!item.is_string())
        in.fail(
            fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
      return container.str().find(item.str()) != std::string::npos;
    case K::kList:
    case K::kTuple:
      for (const auto& v : container.items())
        if (equal(v, item)) return true;
      return false;
    case K::kDict:
      if (item.kind() == K::kList || item.is_dict())
        in.fail(fmt::format("unhashable type: '{}'", item.type_name()));
      return container.dict().find(item) != nullptr;
    case K::kUndefined:
      return false;
    default:
      in.fail(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

}  // namespace

CallArgs Interpreter::eval_args(const Expr& e, Scope& scope, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.args.push_back(eval(*e.args[i], scope));
  for (const auto& [key, value] : e.kwargs) args.kwargs.emplace_back(key, eval(*value, scope));
  return args;
}

Value Interpreter::eval(const Expr& e, Scope& scope) {
  Nested nested(*this);
  step();
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return lookup(e.name, scope);
    case Expr::Kind::kAttr:
      return getattr(eval(*e.args[0], scope), e.name);
    case Expr::Kind::kItem: {
      Value object = eval(*e.args[0], scope);
      return getitem(object, eval(*e.args[1], scope));
    }
    case Expr::Kind::kSlice:
      return eval_slice(e, scope);
    case Expr::Kind::kCall: {
      Value callee = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      line_ = e.line;
      return call(callee, args);
    }
    case Expr::Kind::kFilter: {
      Value subject = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      line_ = e.line;
      return apply_filter(e.name, subject, args);
    }
    case Expr::Kind::kTest: {
      Value subject = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      line_ = e.line;
      return Value::boolean(apply_test(e.name, subject, args) != e.negated);
    }
    case Expr::Kind::kUnary:
      return eval_unary(e, scope);
    case Expr::Kind::kBinary:
      return eval_binary(e, scope);
    case Expr::Kind::kAnd: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? eval(*e.args[1], scope) : a;
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? a : eval(*e.args[1], scope);
    }
    case Expr::Kind::kCompare:
      return eval_compare(e, scope);
    case Expr::Kind::kCondition:
      if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          e.line));
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return e.kind == Expr::Kind::kList ? Value::list(std::move(items))
                                         : Value::tuple(std::move(items));
    }
    case Expr::Kind::kDict:
      return eval_dict(e, scope);
  }
  return {};
}

// object[start:stop:step] of a string (by code points) or a sequence.
Value Interpreter::eval_slice(const Expr& e, Scope& scope) {
  const Value object = eval(*e.args[0], scope);
  require_defined(object);
  Value parts[3];
  for (int k = 0; k < 3; ++k)
    if (e.args[k + 1]) parts[k] = eval(*e.args[k + 1], scope);
  for (const auto& p : parts)
    if (!slice_part_ok(p)) return Value::undefined("slice indices must be integers or None");
  if (object.is_string()) {
    const auto cps = decode(object.str());
    std::vector<char32_t> picked;
    for (int64_t i :
         slice_indices(*this, static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2]))
      picked.push_back(cps[static_cast<size_t>(i)]);
    return Value::string(encode(picked, 0, picked.size()));
  }
  if (!object.is_sequence()) return Value::undefined("unhashable type: 'slice'");
  const List& items = object.items();
  List picked;
  for (int64_t i :
       slice_indices(*this, static_cast<int64_t>(items.size()), parts[0], parts[1], parts[2]))
    picked.push_back(items[static_cast<size_t>(i)]);
  return object.kind() == K::kTuple ? Value::tuple(std::move(picked))
                                    : Value::list(std::move(picked));
}

// not, + and - of one operand.
Value Interpreter::eval_unary(const Expr& e, Scope& scope) {
  const Value v = eval(*e.args[0], scope);
  if (e.name == "not") return Value::boolean(!v.truthy());
  require_defined(v);
  if (!v.is_number())
    fail(fmt::format("bad operand type for unary {}: '{}'", e.name, v.type_name()));
  if (e.name == "+") return v.kind() == K::kBool ? Value::integer(v.as_int()) : v;
  if (v.kind() == K::kFloat) return Value::number(-v.as_float());
  return int_negate(v);
}

// A dict display: its keys (hashable) and values in order.
Value Interpreter::eval_dict(const Expr& e, Scope& scope) {
  auto d = std::make_shared<Value::Dict>();
  for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
    Value key = eval(*e.args[i], scope);
    if (key.is_sequence() && key.kind() == K::kList) fail("unhashable type: 'list'");
    if (key.is_dict()) fail("unhashable type: 'dict'");
    d->set(std::move(key), eval(*e.args[i + 1], scope));
  }
  return Value::dict(std::move(d));
}

Value Interpreter::eval_binary(const Expr& e, Scope& scope) {
  const Value a = eval(*e.args[0], scope);
  const Value b = eval(*e.args[1], scope);
  line_ = e.line;
  if (e.name == "~") {
    std::string left = to_str(a), right = to_str(b);
    check_size(left.size() + right.size(), "a string joined by ~");
    return Value::string(left + right);
  }
  require_defined(a);
  require_defined(b);
  return binary_operator(*this, e.name, a, b);
}

Value Interpreter::eval_compare(const Expr& e, Scope& scope) {
  Value left = eval(*e.args[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], scope);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==") {
      result = equal(left, right);
    } else if (op == "!=") {
      result = !equal(left, right);
    } else if (op == "in" || op == "not in") {
      result = contains(*this, right, left) == (op == "in");
    } else {
      require_defined(left);
      require_defined(right);
      result = ordered(op, left, right);
    }
    if (!result) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace trainer::tokenizers::jinja
