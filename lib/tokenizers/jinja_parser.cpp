// The Jinja parser: tokens into statements and expressions with jinja2's grammar and precedence
// (parser.py): conditional expressions, or/and/not, comparisons with `in` and chains, `~`, the
// arithmetic operators (`**` binding left to right, as in jinja2), unary signs, filters and
// `is` tests after postfix attribute, item, slice and call.
#include <fmt/format.h>

#include "lib/tokenizers/jinja_ast.h"

namespace trainer::tokenizers::jinja {
namespace {

using Type = Token::Type;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : t_(tokens), max_depth_(max_depth) {}

  Body run() {
    Body body = statements({});
    if (cur().type != Type::kEnd) fail(fmt::format("unexpected '{}'", cur().value));
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  int line() const { return cur().line; }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(TemplateError::Kind::kSyntax, line(), what);
  }
  bool is_op(const char* op) const { return cur().type == Type::kOperator && cur().value == op; }
  bool is_name(const char* name) const { return cur().type == Type::kName && cur().value == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != Type::kName) fail(fmt::format("expected a name, got {}", describe(cur())));
    return t_[i_++].value;
  }
  void expect_block_end() {
    if (cur().type != Type::kBlockEnd)
      fail(fmt::format("expected the end of the statement block, got {}", describe(cur())));
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::kEnd:
        return "the end of the template";
      case Type::kBlockEnd:
        return "'%}'";
      case Type::kVariableEnd:
        return "'}}'";
      case Type::kString:
        return "a string";
      default:
        return fmt::format("'{}'", t.value);
    }
  }

  struct Depth {
    Depth(Parser& p) : p(p) {
      if (++p.depth_ > p.max_depth_)
        p.fail(fmt::format("the template nests more than {} levels deep", p.max_depth_));
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };

  // Statements up to a {% tag %} whose name is one of `ends` (left unconsumed, after the {%).
  Body statements(const std::vector<std::string>& ends) {
    Depth depth(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Type::kEnd) {
        if (ends.empty()) return body;
        fail(fmt::format("unexpected end of template, expected '{}'", ends[0]));
      }
      if (t.type == Type::kText) {
        auto s = stmt(Stmt::Kind::kText);
        s->text = t.value;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.type == Type::kVariableBegin) {
        ++i_;
        auto s = stmt(Stmt::Kind::kOutput);
        s->expr = tuple_expr(true);
        if (cur().type != Type::kVariableEnd)
          fail(fmt::format("expected the end of the print statement, got {}", describe(cur())));
        ++i_;
        body.push_back(std::move(s));
      } else {  // block begin
        const Token& name = peek();
        if (name.type == Type::kName) {
          for (const auto& end : ends) {
            if (name.value == end) {
              ++i_;
              return body;
            }
          }
        }
        ++i_;
        body.push_back(block(ends));
      }
    }
  }

  std::unique_ptr<Stmt> stmt(Stmt::Kind kind) const {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line();
    return s;
  }

  // The tag after {%: its name at cur().
  std::unique_ptr<Stmt> block(const std::vector<std::string>& ends) {
    if (cur().type != Type::kName) fail("tag name expected");
    const std::string name = cur().value;
    if (name == "if") return if_block();
    if (name == "for") return for_block();
    if (name == "set") return set_block();
    if (name == "macro") return macro_block();
    if (name == "generation") return generation_block();
    if (name == "filter") return filter_block();
    if (name == "break" || name == "continue") {
      auto s = stmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue);
      ++i_;
      expect_block_end();
      return s;
    }
    if (name == "include" || name == "import" || name == "from" || name == "extends" ||
        name == "block") {
      fail(fmt::format("'{}' is not available in chat templates (they reach no other file)", name));
    }
    std::string expected;
    for (const auto& end : ends) expected += (expected.empty() ? "" : " or ") + ("'" + end + "'");
    fail(expected.empty()
             ? fmt::format("encountered unknown tag '{}'", name)
             : fmt::format("encountered unknown tag '{}'; expected {}", name, expected));
  }

  std::unique_ptr<Stmt> if_block() {
    auto s = stmt(Stmt::Kind::kIf);
    ++i_;  // if
    while (true) {
      ExprPtr condition = tuple_expr(false);
      expect_block_end();
      Body body = statements({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(condition), std::move(body));
      const std::string tag = expect_name();
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->else_body = statements({"endif"});
        ++i_;
      }
      expect_block_end();
      return s;
    }
  }

  Target target(bool with_tuple) {
    Target t;
    if (skip_op("(")) {
      t = target(true);
      expect_op(")");
      return t;
    }
    t.name = expect_name();
    if (skip_op(".")) t.attr = expect_name();
    if (!with_tuple || !is_op(",")) return t;
    Target tuple;
    tuple.is_tuple = true;
    tuple.items.push_back(std::move(t));
    while (skip_op(",")) {
      if (cur().type != Type::kName && !is_op("(")) break;
      tuple.items.push_back(target(false));
    }
    return tuple;
  }

  std::unique_ptr<Stmt> for_block() {
    auto s = stmt(Stmt::Kind::kFor);
    ++i_;  // for
    s->target = target(true);
    if (!skip_name("in")) fail(fmt::format("expected 'in', got {}", describe(cur())));
    s->expr = tuple_expr(false);
    if (skip_name("if")) s->condition = expression(true);
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    s->body = statements({"endfor", "else"});
    if (expect_name() == "else") {
      expect_block_end();
      s->else_body = statements({"endfor"});
      ++i_;
    }
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> set_block() {
    auto s = stmt(Stmt::Kind::kSet);
    ++i_;  // set
    s->target = target(true);
    if (skip_op("=")) {
      s->expr = tuple_expr(true);
      expect_block_end();
      return s;
    }
    if (s->target.is_tuple || !s->target.attr.empty()) fail("a set block assigns one name");
    s->kind = Stmt::Kind::kSetBlock;
    s->expr = filters_on_placeholder();
    expect_block_end();
    s->body = statements({"endset"});
    ++i_;
    expect_block_end();
    return s;
  }

  // `| f(...) | g` of a set or filter block, applied to a literal the block's text replaces.
  ExprPtr filters_on_placeholder() {
    ExprPtr node = placeholder();
    while (skip_op("|")) node = filter(std::move(node));
    return node;
  }

  std::unique_ptr<Stmt> filter_block() {
    auto s = stmt(Stmt::Kind::kFilterBlock);
    ++i_;  // filter
    ExprPtr node = placeholder();
    node = filter_named(std::move(node));
    while (skip_op("|")) node = filter(std::move(node));
    s->expr = std::move(node);
    expect_block_end();
    s->body = statements({"endfilter"});
    ++i_;
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> macro_block() {
    auto s = stmt(Stmt::Kind::kMacro);
    ++i_;  // macro
    s->text = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (skip_op(")")) break;
      s->params.push_back(expect_name());
      if (skip_op("=")) {
        s->defaults.push_back(expression(true));
      } else if (!s->defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_block_end();
    s->body = statements({"endmacro"});
    ++i_;
    if (cur().type == Type::kName && cur().value == s->text) ++i_;
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> generation_block() {
    auto s = stmt(Stmt::Kind::kCallBlock);
    ++i_;  // generation
    expect_block_end();
    s->body = statements({"endgeneration"});
    ++i_;
    expect_block_end();
    return s;
  }

  // The block's rendered text, in the filters of a set or filter block.
  ExprPtr placeholder() const {
    auto e = make(Expr::Kind::kName);
    e->name = kBlockText;
    return e;
  }

  ExprPtr make(Expr::Kind kind) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line();
    return e;
  }

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr a, ExprPtr b) const {
    auto e = make(kind);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // An expression, or a tuple of them without brackets (`a, b`).
  // with_condition: conditional expressions allowed (not in an if's test or a for's iterable).
  ExprPtr tuple_expr(bool with_condition) {
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

  ExprPtr expression(bool with_condition) {
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

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (skip_name("or")) e = binary(Expr::Kind::kOr, "or", std::move(e), and_expr());
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (skip_name("and")) e = binary(Expr::Kind::kAnd, "and", std::move(e), not_expr());
    return e;
  }

  ExprPtr not_expr() {
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

  ExprPtr compare() {
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

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[i_++].value;
      e = binary(Expr::Kind::kBinary, op, std::move(e), concat());
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (skip_op("~")) e = binary(Expr::Kind::kBinary, "~", std::move(e), math2());
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[i_++].value;
      e = binary(Expr::Kind::kBinary, op, std::move(e), pow());
    }
    return e;
  }

  ExprPtr pow() {
    ExprPtr e = unary(true);
    while (skip_op("**")) e = binary(Expr::Kind::kBinary, "**", std::move(e), unary(true));
    return e;
  }

  ExprPtr unary(bool with_filter) {
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

  ExprPtr primary() {
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
        e->value = Value::integer(std::stoll(t.value));
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

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        ++i_;
        auto a = make(Expr::Kind::kAttr);
        if (cur().type == Type::kName) {
          a->name = t_[i_++].value;
        } else if (cur().type == Type::kInteger) {
          a->kind = Expr::Kind::kItem;
          auto index = make(Expr::Kind::kLiteral);
          index->value = Value::integer(std::stoll(t_[i_++].value));
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

  ExprPtr subscript(ExprPtr object) {
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

  // Arguments in parentheses into `e` (args after those it has, kwargs).
  void arguments(Expr& e) {
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

  ExprPtr call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall);
    e->args.push_back(std::move(callee));
    arguments(*e);
    return e;
  }

  ExprPtr filter_named(ExprPtr value) {
    auto e = make(Expr::Kind::kFilter);
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    e->args.push_back(std::move(value));
    if (is_op("(")) arguments(*e);
    return e;
  }

  ExprPtr filter(ExprPtr value) { return filter_named(std::move(value)); }

  ExprPtr filter_expr(ExprPtr e) {
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

  ExprPtr test(ExprPtr value) {
    auto e = make(Expr::Kind::kTest);
    e->negated = skip_name("not");
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    e->args.push_back(std::move(value));
    if (is_op("(")) {
      arguments(*e);
    } else if (cur().type == Type::kString || cur().type == Type::kInteger ||
               cur().type == Type::kFloat || is_op("[") || is_op("{") ||
               (cur().type == Type::kName && !is_name("else") && !is_name("or") &&
                !is_name("and"))) {
      // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      ExprPtr arg = primary();
      arg = postfix(std::move(arg));
      e->args.push_back(std::move(arg));
    }
    return e;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, int max_depth) {
  return Parser(tokens, max_depth).run();
}

}  // namespace trainer::tokenizers::jinja
