// The Jinja parser's class, shared by its two files: jinja_parser.cpp (statements: tags and their
// bodies) and jinja_parser_expr.cpp (expressions, with jinja2's precedence). Not a public header.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/tokenizers/jinja_ast.h"

namespace trainer::tokenizers::jinja {

class Parser {
 public:
  using Type = Token::Type;

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
  Body statements(const std::vector<std::string>& ends);

  std::unique_ptr<Stmt> stmt(Stmt::Kind kind) const;

  // The tag after {%: its name at cur().
  std::unique_ptr<Stmt> block(const std::vector<std::string>& ends);

  std::unique_ptr<Stmt> if_block();

  Target target(bool with_tuple);

  std::unique_ptr<Stmt> for_block();

  std::unique_ptr<Stmt> set_block();

  // `| f(...) | g` of a set or filter block, applied to a literal the block's text replaces.
  ExprPtr filters_on_placeholder();

  std::unique_ptr<Stmt> filter_block();

  std::unique_ptr<Stmt> macro_block();

  std::unique_ptr<Stmt> generation_block();
  std::unique_ptr<Stmt> with_block();

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
  ExprPtr tuple_expr(bool with_condition);

  ExprPtr expression(bool with_condition);

  ExprPtr or_expr();

  ExprPtr and_expr();

  ExprPtr not_expr();

  ExprPtr compare();

  ExprPtr math1();

  ExprPtr concat();

  ExprPtr math2();

  ExprPtr pow();

  ExprPtr unary(bool with_filter);

  ExprPtr primary();

  ExprPtr postfix(ExprPtr e);

  ExprPtr subscript(ExprPtr object);

  // Arguments in parentheses into `e` (args after those it has, kwargs).
  void arguments(Expr& e);

  ExprPtr call(ExprPtr callee);

  ExprPtr filter_named(ExprPtr value);

  ExprPtr filter(ExprPtr value) { return filter_named(std::move(value)); }

  ExprPtr filter_expr(ExprPtr e);

  ExprPtr test(ExprPtr value);

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_depth_;
  // for bodies around the statement being parsed (a macro's or generation block's body starts
  // at none: jinja2 refuses a break there).
  int loops_ = 0;
  // Body of a block parsed with `loops` for bodies around it.
  Body body_with_loops(int loops, const std::vector<std::string>& ends) {
    const int saved = loops_;
    loops_ = loops;
    Body body = statements(ends);
    loops_ = saved;
    return body;
  }
};

}  // namespace trainer::tokenizers::jinja
