// Jinja expressions, parsed with jinja2's grammar and precedence (parser.py): conditional
// expressions, or/and/not, comparisons with `in` and chains, `~`, the arithmetic operators (`**`
// binding left to right, as in jinja2), unary signs, filters and `is` tests after postfix
// attribute, item, slice and call.
#include "lib/tokenizers/jinja_parser.h"

#include "lib/tokenizers/jinja_int.h"

namespace trainer::tokenizers::jinja {
namespace {

// An integer token's value: decimal digits, or 0x/0o/0b and the digits (the lexer's forms).
Value integer_literal(const std::string& text) {
  const bool radix = text.size() > 2 && (text[1] == 'x' || text[1] == 'o' || text[1] == 'b');
  const int base = !radix ? 10 : text[1] == 'x' ? 16 : text[1] == 'o' ? 8 : 2;
  return *int_from_digits(radix ? text.substr(2) : text, base);
}

}  // namespace

ExprPtr Parser::tuple_expr(bool with_condition) {
  const int start = line();
  ExprPtr first = with_condition ? expression(true) : or_expr();
  if (!is_op(",")) return first;
  auto tuple = make(Expr::Kind::kTuple);
  tuple->line = start;
  tuple->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().type == Type::kBlockEnd || cur().type == Type::kVariableEnd || is_op(")") ||
        is_name("if") || is_name("in"))
      break;
    tuple->args.push_back(with_condition ? expression(true) : or_expr());
  }
  return tuple;
}

ExprPtr Parser::expression(bool with_condition) {
  Depth depth(*this);
  ExprPtr e = or_expr();
  if (!with_condition) return e;
  while (skip_name("if")) {
    auto c = make(Expr::Kind::kCondition);
    ExprPtr test = or_expr();
    ExprPtr otherwise = skip_name("else") ? expression(true) : nullptr;
    c->args.push_back(std::move(test));
    c->args.push_back(std::move(e));
    c->args.push_back(std::move(otherwise));
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::or_expr() {
  ExprPtr e = and_expr();
  while (skip_name("or")) e = binary(Expr::Kind::kOr, "or", std::move(e), and_expr());
  return e;
}

ExprPtr Parser::and_expr() {
  ExprPtr e = not_expr();
  while (skip_name("and")) e = binary(Expr::Kind::kAnd, "and", std::move(e), not_expr());
  return e;
}

ExprPtr Parser::not_expr() {
  if (is_name("not")) {
    Depth depth(*this);
    auto e = make(Expr::Kind::kUnary);
    ++i_;
    e->name = "not";
    e->args.push_back(not_expr());
    return e;
  }
  return compare();
}

ExprPtr Parser::compare() {
  ExprPtr first = math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    std::string op;
    if (cur().type == Type::kOperator &&
        (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
         cur().value == "<=" || cur().value == ">=")) {
      op = t_[i_++].value;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && peek().type == Type::kName && peek().value == "in") {
      i_ += 2;
      op = "not in";
    } else {
      break;
    }
    ops.push_back(op);
    operands.push_back(math1());
  }
  if (ops.empty()) return first;
  auto e = make(Expr::Kind::kCompare);
  e->args.push_back(std::move(first));
  for (auto& operand : operands) e->args.push_back(std::move(operand));
  e->ops = std::move(ops);
  return e;
}

ExprPtr Parser::math1() {
  ExprPtr e = concat();
  while (is_op("+") || is_op("-")) {
    std::string op = t_[i_++].value;
    e = binary(Expr::Kind::kBinary, op, std::move(e), concat());
  }
  return e;
}

ExprPtr Parser::concat() {
  ExprPtr e = math2();
  while (skip_op("~")) e = binary(Expr::Kind::kBinary, "~", std::move(e), math2());
  return e;
}

ExprPtr Parser::math2() {
  ExprPtr e = pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = t_[i_++].value;
    e = binary(Expr::Kind::kBinary, op, std::move(e), pow());
  }
  return e;
}

ExprPtr Parser::pow() {
  ExprPtr e = unary(true);
  while (skip_op("**")) e = binary(Expr::Kind::kBinary, "**", std::move(e), unary(true));
  return e;
}

ExprPtr Parser::unary(bool with_filter) {
  Depth depth(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = make(Expr::Kind::kUnary);
    e->name = t_[i_++].value;
    e->args.push_back(unary(false));
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  return with_filter ? filter_expr(std::move(e)) : std::move(e);
}

ExprPtr Parser::primary() {
  const Token& t = cur();
  auto e = make(Expr::Kind::kLiteral);
  switch (t.type) {
    case Type::kName:
      ++i_;
      if (t.value == "true" || t.value == "True") {
        e->value = Value::boolean(true);
      } else if (t.value == "false" || t.value == "False") {
        e->value = Value::boolean(false);
      } else if (t.value == "none" || t.value == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.value;
      }
      return e;
    case Type::kString: {
      std::string s;
      while (cur().type == Type::kString) s += t_[i_++].value;
      e->value = Value::string(std::move(s));
      return e;
    }
    case Type::kInteger:
      ++i_;
      e->value = integer_literal(t.value);
      return e;
    case Type::kFloat:
      ++i_;
      e->value = Value::number(std::strtod(t.value.c_str(), nullptr));
      return e;
    default:
      break;
  }
  if (skip_op("(")) {
    if (skip_op(")")) {
      e->kind = Expr::Kind::kTuple;
      return e;
    }
    ExprPtr inner = expression(true);
    if (is_op(",")) {
      auto tuple = make(Expr::Kind::kTuple);
      tuple->args.push_back(std::move(inner));
      while (skip_op(",")) {
        if (is_op(")")) break;
        tuple->args.push_back(expression(true));
      }
      inner = std::move(tuple);
    }
    expect_op(")");
    return inner;
  }
  if (skip_op("[")) {
    e->kind = Expr::Kind::kList;
    while (!skip_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (skip_op("]")) break;
      e->args.push_back(expression(true));
    }
    return e;
  }
  if (skip_op("{")) {
    e->kind = Expr::Kind::kDict;
    while (!skip_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (skip_op("}")) break;
      e->args.push_back(expression(true));
      expect_op(":");
      e->args.push_back(expression(true));
    }
    return e;
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

ExprPtr Parser::postfix(ExprPtr e) {
  while (true) {
    if (is_op(".")) {
      ++i_;
      auto a = make(Expr::Kind::kAttr);
      if (cur().type == Type::kName) {
        a->name = t_[i_++].value;
      } else if (cur().type == Type::kInteger) {
        a->kind = Expr::Kind::kItem;
        auto index = make(Expr::Kind::kLiteral);
        index->value = integer_literal(t_[i_++].value);
        a->args.push_back(std::move(e));
        a->args.push_back(std::move(index));
        e = std::move(a);
        continue;
      } else {
        fail(fmt::format("expected an attribute name, got {}", describe(cur())));
      }
      a->args.push_back(std::move(e));
      e = std::move(a);
    } else if (is_op("[")) {
      ++i_;
      e = subscript(std::move(e));
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::subscript(ExprPtr object) {
  ExprPtr parts[3];
  bool slice = false;
  size_t k = 0;
  while (!is_op("]")) {
    if (is_op(":")) {
      ++i_;
      slice = true;
      if (++k > 2) fail("a slice takes at most three parts");
      continue;
    }
    if (parts[k]) fail(fmt::format("expected ']', got {}", describe(cur())));
    parts[k] = expression(true);
    if (!slice && is_op(",")) fail("tuple subscripts are not supported");
  }
  expect_op("]");
  auto e = make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
  e->args.push_back(std::move(object));
  if (!slice) {
    if (!parts[0]) fail("expected a subscript");
    e->args.push_back(std::move(parts[0]));
  } else {
    for (auto& p : parts) e->args.push_back(std::move(p));
  }
  return e;
}

void Parser::arguments(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!skip_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (skip_op(")")) break;
    if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
    if (cur().type == Type::kName && peek().type == Type::kOperator && peek().value == "=") {
      std::string key = t_[i_].value;
      i_ += 2;
      e.kwargs.emplace_back(std::move(key), expression(true));
    } else {
      if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
      e.args.push_back(expression(true));
    }
  }
}

ExprPtr Parser::call(ExprPtr callee) {
  auto e = make(Expr::Kind::kCall);
  e->args.push_back(std::move(callee));
  arguments(*e);
  return e;
}

ExprPtr Parser::filter_named(ExprPtr value) {
  auto e = make(Expr::Kind::kFilter);
  e->name = expect_name();
  while (skip_op(".")) e->name += "." + expect_name();
  e->args.push_back(std::move(value));
  if (is_op("(")) arguments(*e);
  return e;
}

ExprPtr Parser::filter_expr(ExprPtr e) {
  while (true) {
    if (skip_op("|")) {
      e = filter(std::move(e));
    } else if (is_name("is")) {
      ++i_;
      e = test(std::move(e));
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::test(ExprPtr value) {
  auto e = make(Expr::Kind::kTest);
  e->negated = skip_name("not");
  e->name = expect_name();
  while (skip_op(".")) e->name += "." + expect_name();
  e->args.push_back(std::move(value));
  if (is_op("(")) {
    arguments(*e);
  } else if (cur().type == Type::kString || cur().type == Type::kInteger ||
             cur().type == Type::kFloat || is_op("[") || is_op("{") ||
             (cur().type == Type::kName && !is_name("else") && !is_name("or") && !is_name("and"))) {
    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
    if (is_name("is")) fail("you cannot chain multiple tests with is");
    ExprPtr arg = primary();
    arg = postfix(std::move(arg));
    e->args.push_back(std::move(arg));
  }
  return e;
}

}  // namespace trainer::tokenizers::jinja
