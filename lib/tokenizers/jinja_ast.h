// The Jinja engine's inside: the lexer's tokens (what jinja2's lexer.py yields, with
// trim_blocks and lstrip_blocks applied to the text between tags) and the syntax tree the
// parser builds (jinja2's nodes.py, the part of it that templates use). Not a public header:
// jinja.h is the engine's door.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizers/jinja_value.h"

namespace trainer::tokenizers::jinja {

struct Token {
  enum class Type {
    kText,           // template data between tags
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,
    kString,  // value: the literal's text, escapes decoded
    kInteger,
    kFloat,
    kOperator,
    kEnd
  };
  Type type;
  std::string value;
  int line;
};

// The tokens of a template's source: newlines normalized to \n, one trailing newline dropped,
// comments left out, {% raw %} bodies as text. Throws TemplateError(kSyntax).
std::vector<Token> tokenize(std::string_view source);

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kAttr,       // args[0].name
    kItem,       // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]], null where absent
    kCall,       // args[0](args[1:], kwargs)
    kFilter,     // args[0] | name(args[1:], kwargs)
    kTest,       // args[0] is [not] name(args[1:])
    kUnary,      // name ("-", "+", "not") args[0]
    kBinary,     // args[0] name args[1]: + - * / // % ** ~
    kAnd,        // args[0] and args[1]
    kOr,         // args[0] or args[1]
    kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ...
    kCondition,  // args[1] if args[0] else args[2] (args[2] null: undefined)
    kList,       // [args]
    kTuple,      // (args)
    kDict        // {args[0]: args[1], args[2]: args[3], ...}
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

// The name under which a set or filter block's rendered body reaches its filters (no template
// can spell it).
inline constexpr const char* kBlockText = "\x01block";

// An assignment target: a name, a namespace's attribute (ns.x) or a tuple of targets.
struct Target {
  std::string name;
  std::string attr;  // non-empty: name.attr
  std::vector<Target> items;
  bool is_tuple = false;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (condition, body) ..., else_body
    kFor,          // for target in expr [if condition] body [else else_body]
    kSet,          // set target = expr
    kSetBlock,     // set target (| filters in expr, applied to kBlockText) body
    kMacro,        // macro name(params = defaults) body
    kCallBlock,    // generation body (the one call block templates use)
    kFilterBlock,  // filter ... body
    kWith,         // with assignments body
    kBreak,
    kContinue
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;                        // aligned to the end of params, as Python's
  std::vector<std::pair<Target, ExprPtr>> assignments;  // with's
};

// The statements of a template. Throws TemplateError(kSyntax) with the line; nesting deeper
// than `max_depth` is refused.
Body parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace trainer::tokenizers::jinja
