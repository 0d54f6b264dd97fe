// The Jinja parser: tokens into statements (text, {{ }}, and the tags: if, for, set, macro,
// filter, generation, break, continue), their bodies up to their end tags, and parse(), the
// parser's door. Expressions are jinja_parser_expr.cpp's.
#include "lib/tokenizers/jinja_parser.h"

namespace trainer::tokenizers::jinja {

Body Parser::statements(const std::vector<std::string>& ends) {
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

std::unique_ptr<Stmt> Parser::stmt(Stmt::Kind kind) const {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line();
  return s;
}

std::unique_ptr<Stmt> Parser::block(const std::vector<std::string>& ends) {
  if (cur().type != Type::kName) fail("tag name expected");
  const std::string name = cur().value;
  if (name == "if") return if_block();
  if (name == "for") return for_block();
  if (name == "set") return set_block();
  if (name == "macro") return macro_block();
  if (name == "generation") return generation_block();
  if (name == "filter") return filter_block();
  if (name == "with") return with_block();
  if (name == "call") {
    fail(
        "call blocks ({% call %}) are not supported in chat templates here (only "
        "{% generation %})");
  }
  if (name == "break" || name == "continue") {
    if (loops_ == 0) fail(fmt::format("'{}' outside loop", name));
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
  fail(expected.empty() ? fmt::format("encountered unknown tag '{}'", name)
                        : fmt::format("encountered unknown tag '{}'; expected {}", name, expected));
}

std::unique_ptr<Stmt> Parser::if_block() {
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

Target Parser::target(bool with_tuple) {
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

std::unique_ptr<Stmt> Parser::for_block() {
  auto s = stmt(Stmt::Kind::kFor);
  ++i_;  // for
  s->target = target(true);
  if (!skip_name("in")) fail(fmt::format("expected 'in', got {}", describe(cur())));
  s->expr = tuple_expr(false);
  if (skip_name("if")) s->condition = expression(true);
  if (is_name("recursive"))
    fail("recursive loops ({% for ... recursive %}) are not supported in chat templates here");
  expect_block_end();
  s->body = body_with_loops(loops_ + 1, {"endfor", "else"});
  if (expect_name() == "else") {
    expect_block_end();
    s->else_body = statements({"endfor"});
    ++i_;
  }
  expect_block_end();
  return s;
}

std::unique_ptr<Stmt> Parser::set_block() {
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

ExprPtr Parser::filters_on_placeholder() {
  ExprPtr node = placeholder();
  while (skip_op("|")) node = filter(std::move(node));
  return node;
}

std::unique_ptr<Stmt> Parser::filter_block() {
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

std::unique_ptr<Stmt> Parser::macro_block() {
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
  s->body = body_with_loops(0, {"endmacro"});
  ++i_;
  if (cur().type == Type::kName && cur().value == s->text) ++i_;
  expect_block_end();
  return s;
}

std::unique_ptr<Stmt> Parser::generation_block() {
  auto s = stmt(Stmt::Kind::kCallBlock);
  ++i_;  // generation
  expect_block_end();
  s->body = body_with_loops(0, {"endgeneration"});
  ++i_;
  expect_block_end();
  return s;
}

// {% with a = x, ns.b = y %}: the values are read in the enclosing scope, the names set in the
// block's own.
std::unique_ptr<Stmt> Parser::with_block() {
  auto s = stmt(Stmt::Kind::kWith);
  ++i_;  // with
  while (cur().type != Token::Type::kBlockEnd && cur().type != Token::Type::kEnd) {
    if (!s->assignments.empty()) expect_op(",");
    Target t = target(false);
    expect_op("=");
    s->assignments.emplace_back(std::move(t), expression(true));
  }
  expect_block_end();
  s->body = statements({"endwith"});
  ++i_;
  expect_block_end();
  return s;
}

Body parse(const std::vector<Token>& tokens, int max_depth) {
  return Parser(tokens, max_depth).run();
}

}  // namespace trainer::tokenizers::jinja
