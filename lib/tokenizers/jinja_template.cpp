// Template, the Jinja engine's door: a source checked as jinja2 compiles it (UTF-8, syntax, every
// filter and test known), then rendered by an Interpreter of its own each time.
#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

namespace {

// jinja2 resolves filters and tests when it compiles a template: an unknown one fails the whole
// template, reached or not.
// `soft`: inside an if or a conditional expression, where jinja2 defers an unknown name to a
// run-time error (its soft frames); a for loop's or a macro's body starts a frame of its own.
void check_expr(const Expr& e, bool soft) {
  soft = soft || e.kind == Expr::Kind::kCondition;
  if (!soft && e.kind == Expr::Kind::kFilter && !find_filter(e.name))
    throw TemplateError(TemplateError::Kind::kSyntax, e.line, missing_filter(e.name));
  if (!soft && e.kind == Expr::Kind::kTest && !find_test(e.name))
    throw TemplateError(TemplateError::Kind::kSyntax, e.line,
                        fmt::format("no test named '{}'", e.name));
  for (const auto& a : e.args)
    if (a) check_expr(*a, soft);
  for (const auto& [key, a] : e.kwargs) check_expr(*a, soft);
}

void check_body(const Body& body, bool soft) {
  for (const auto& s : body) {
    const bool frame = s->kind == Stmt::Kind::kFor || s->kind == Stmt::Kind::kMacro;
    const bool inner = frame ? false : soft || s->kind == Stmt::Kind::kIf;
    for (const Expr* e : {s->expr.get(), s->condition.get()})
      if (e) check_expr(*e, s->kind == Stmt::Kind::kFor ? soft : inner);
    for (const auto& d : s->defaults) check_expr(*d, soft);
    for (const auto& assignment : s->assignments) check_expr(*assignment.second, inner);
    for (const auto& [condition, branch] : s->branches) {
      check_expr(*condition, true);
      check_body(branch, true);
    }
    check_body(s->body, inner);
    check_body(s->else_body, inner);
  }
}

}  // namespace

Template Template::parse(std::string_view source, std::string name, Limits limits) {
  if (const size_t bad = base::first_invalid_utf8(source); bad != std::string_view::npos) {
    throw TemplateError(TemplateError::Kind::kSyntax, 0,
                        fmt::format("chat template {}: byte {} is not UTF-8", name, bad));
  }
  auto program = std::make_shared<Program>();
  program->name = std::move(name);
  program->limits = limits;
  try {
    program->body = jinja::parse(tokenize(source), limits.max_nesting);
    check_body(program->body, false);
  } catch (TemplateError& e) {
    TemplateError error(
        e.kind, e.line,
        fmt::format("chat template {} line {}: {}", program->name, e.line, one_line(e.what())));
    error.detail = e.what();
    throw error;
  }
  Template t;
  t.program_ = std::move(program);
  return t;
}

Rendered Template::render(const std::vector<std::pair<std::string, Value>>& variables) const {
  Interpreter interpreter(program_->name, program_->limits);
  return interpreter.run(program_->body, variables);
}

const std::string& Template::name() const { return program_->name; }

}  // namespace trainer::tokenizers::jinja
