// A Jinja2 engine for chat templates, torch-free: the part of the language that real chat
// templates use, computed as jinja2 3.1 computes it under Transformers' settings
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, `{% generation %}`).
//
// Built: text with `-`/`+` whitespace control, comments, raw; {{ }}; if/elif/else, for (with
// tuple targets, an `if` filter, else, the `loop` object with previtem/nextitem), break and
// continue, set (names, tuples, namespace attributes, set blocks), macro (defaults, keyword
// arguments), filter blocks, generation blocks; literals (str, int, float, list, tuple, dict),
// arithmetic, `~`, comparisons (chained, in, not in), and/or/not, conditional expressions,
// attributes, subscripts and slices; jinja2's filters, tests and globals that templates call
// (jinja_builtins.cpp lists them) and Python's str, list and dict methods.
// Left out: include/import/extends/block (a template reaches no other file), call blocks other
// than generation, recursive loops, *args/**kwargs in calls, with, autoescape.
//
// A template is code that came with a download: it sees only the values it is given (no files,
// no environment, no clock unless the caller passes one as a global), mutates nothing of them
// (list.append and dict.update are refused as jinja2's immutable sandbox refuses them), and its
// running time, call depth and output size are bounded (Limits): each overrun is a TemplateError.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/tokenizers/jinja_value.h"

namespace trainer::tokenizers::jinja {

struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any string or list made
  int max_call_depth = 100;                    // macros calling macros
  int max_nesting = 200;                       // blocks and expressions nested in the source
  double max_seconds = 10.0;                   // wall-clock time of one render
};

// What a render gives: the text, and the spans {% generation %} blocks wrote, as Transformers'
// AssistantTracker records them (start at the length of the top-level output when the block
// ends, so a block inside a macro counts from there too), in bytes and in characters (Python's
// str indices).
struct Rendered {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation_bytes;
  std::vector<std::pair<size_t, size_t>> generation_chars;
};

struct Program;

class Template {
 public:
  // Parses `source` (UTF-8). `name` says which template in messages. Throws TemplateError
  // (jinja_value.h) with kind kSyntax: a syntax error, an unknown filter or test, invalid UTF-8.
  static Template parse(std::string_view source, std::string name, Limits limits = {});

  // Renders with `variables` as the template's context (messages, tools, add_generation_prompt,
  // the special tokens, globals such as raise_exception). Throws TemplateError: kRuntime for an
  // error of the template's code (an undefined value used, a type error), kRaised for
  // raise_exception, kLimit for a bound passed. The message names the template and the line.
  Rendered render(const std::vector<std::pair<std::string, Value>>& variables) const;

  const std::string& name() const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace trainer::tokenizers::jinja
