// The Jinja evaluator: statements (output, if, for with jinja2's loop scoping, set, macros,
// generation and filter blocks) and expressions (operators with Python's semantics, the
// sandbox's attribute and item lookup), under the bounds of Limits; and Template, the door.
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

// A message on one line: the line breaks a template's text may bring (raise_exception's message,
// a character in a format) shown as \n and \r.
std::string one_line(const std::string& what) {
  std::string out;
  for (char c : what) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

Interpreter::Interpreter(const std::string& template_name, const Limits& limits)
    : name_(template_name), limits_(limits) {}

Interpreter::~Interpreter() {
  // Break the cycles a render can make: a namespace holding itself, a macro held by the scope
  // it closes over.
  for (auto& ns : namespaces_) ns.ns().attrs.clear();
  for (auto& scope : macro_scopes_) scope->vars.clear();
}

void Interpreter::fail(const std::string& what, TemplateError::Kind kind) const {
  TemplateError error(
      kind, line_,
      kind == TemplateError::Kind::kRaised
          ? fmt::format("chat template {} line {}: raise_exception: {}", name_, line_,
                        one_line(what))
          : fmt::format("chat template {} line {}: {}", name_, line_, one_line(what)));
  error.detail = what;
  throw error;
}

void Interpreter::check_size(size_t size, const std::string& what) const {
  if (size > limits_.max_output_bytes) {
    fail(fmt::format("{} passes {} bytes (a string or list that large is refused)", what,
                     base::thousands(static_cast<int64_t>(limits_.max_output_bytes))),
         TemplateError::Kind::kLimit);
  }
}

Interpreter::Nested::Nested(Interpreter& in) : in(in) {
  if (++in.nested_ > kMaxNested) {
    --in.nested_;
    in.fail(fmt::format("the template's code nests deeper than {} statements and expressions",
                        kMaxNested),
            TemplateError::Kind::kLimit);
  }
}

void Interpreter::step() {
  if ((++steps_ & 255) != 0) return;
  if (std::chrono::steady_clock::now() > deadline_) {
    fail(fmt::format("rendering takes longer than {} s", limits_.max_seconds),
         TemplateError::Kind::kLimit);
  }
}

void Interpreter::require_defined(const Value& v) const {
  if (v.is_undefined()) fail(v.hint().empty() ? "a value is undefined" : v.hint());
}

List Interpreter::iterate(const Value& v) const {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.items();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& entry : v.dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::string& s = v.str();
      check_size(code_points(s) * sizeof(Value), "the list of a string's characters");
      for (size_t i = 0; i < s.size();) {
        const size_t n = std::max<size_t>(1, base::utf8_sequence_length(s, i));
        chars.push_back(Value::string(s.substr(i, n)));
        i += n;
      }
      return chars;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      fail(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

Value Interpreter::lookup(const std::string& name, const Scope& scope) const {
  for (const Scope* s = &scope; s; s = s->parent.get()) {
    if (const Value* v = s->find(name)) return *v;
  }
  if (name == "self") {
    // jinja2's TemplateReference of a template made from a string (it has no blocks here).
    static const auto self = std::make_shared<const Value::Object>(
        Value::Object{"TemplateReference", "<TemplateReference None>", {}});
    return Value::object(self);
  }
  Value global = find_global(name);
  if (!global.is_undefined()) return global;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Value Interpreter::getattr(const Value& object, const std::string& name) {
  using K = Value::Kind;
  if (object.is_undefined()) require_defined(object);
  bool unsafe = false;
  if (MethodFn method = find_method(object, name, unsafe)) {
    if (unsafe) {
      return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.",
                                          name, object.type_name()));
    }
    Value self = object;
    return Value::callable(name, [method, self, name](Interpreter& in, CallArgs& args) {
      return method(in, self, args, name);
    });
  }
  if (object.kind() == K::kDict) {
    if (const Value* v = object.dict().find(std::string_view(name))) return *v;
  } else if (object.kind() == K::kNamespace) {
    if (const Value* v = object.ns().find(name)) return *v;
  } else if (object.kind() == K::kObject) {
    if (const Value* v = object.obj().find(name)) return *v;
  } else if (object.is_number()) {
    // Python's int and float attributes (a bool's are its int's).
    const bool is_float = object.kind() == K::kFloat;
    const Value whole =
        is_float || object.kind() != K::kBool ? object : Value::integer(object.as_int());
    if (name == "real") return whole;
    if (name == "imag") return is_float ? Value::number(0.0) : Value::integer(0);
    if (!is_float && name == "numerator") return whole;
    if (!is_float && name == "denominator") return Value::integer(1);
  }
  return Value::undefined(
      fmt::format("'{} object' has no attribute '{}'", object.type_name(), name));
}

Value Interpreter::getitem(const Value& object, const Value& key) {
  using K = Value::Kind;
  if (object.is_undefined()) require_defined(object);
  if (object.kind() == K::kDict) {
    if (const Value* v = object.dict().find(key)) return *v;
  } else if ((object.is_sequence() || object.is_string()) && key.is_int()) {
    const int64_t i = key.as_int();
    if (object.is_string()) {
      const auto cps = decode(object.str());
      const auto n = static_cast<int64_t>(cps.size());
      const int64_t at = i < 0 ? i + n : i;
      if (at >= 0 && at < n) return Value::string(encode(cps, at, at + 1));
    } else {
      const List& items = object.items();
      const auto n = static_cast<int64_t>(items.size());
      const int64_t at = i < 0 ? i + n : i;
      if (at >= 0 && at < n) return items[static_cast<size_t>(at)];
    }
    return Value::undefined(fmt::format("{} object has no element {}", object.type_name(), i));
  }
  if (key.is_string()) return getattr(object, key.str());
  return Value::undefined(
      fmt::format("'{} object' has no attribute {}", object.type_name(), repr(key)));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) require_defined(callee);
  if (callee.kind() != Value::Kind::kCallable)
    fail(fmt::format("'{}' object is not callable", callee.type_name()));
  return callee.fn().call(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& subject, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) fail(missing_filter(name));
  return f(*this, subject, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& subject, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) fail(fmt::format("no test named '{}'", name));
  return t(*this, subject, args);
}

void Interpreter::emit(std::string_view text) {
  check_size(out_->size() + text.size());
  out_->append(text);
}

Rendered Interpreter::run(const Body& body,
                          const std::vector<std::pair<std::string, Value>>& variables) {
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(limits_.max_seconds));
  Rendered rendered;
  rendered_ = &rendered;
  out_ = root_ = &rendered.text;
  auto scope = std::make_shared<Scope>();
  for (const auto& [name, value] : variables) scope->set(name, value);
  try {
    exec(body, scope);
  } catch (const std::invalid_argument& e) {  // Python's TypeError from the value layer
    fail(e.what());
  }
  return rendered;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& s : body) {
    Flow flow = exec(*s, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

namespace {

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  return scope;
}

}  // namespace

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Nested nested(*this);
  step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::kText:
      emit(s.text);
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      const Value v = eval(*s.expr, *scope);
      line_ = s.line;
      emit(to_str(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (const auto& [condition, body] : s.branches) {
        if (eval(*condition, *scope).truthy()) return exec(body, scope);
      }
      return exec(s.else_body, scope);
    case Stmt::Kind::kFor:
      return exec_for(s, scope);
    case Stmt::Kind::kSet:
      assign(s.target, eval(*s.expr, *scope), *scope);
      return Flow::kNormal;
    case Stmt::Kind::kSetBlock:
    case Stmt::Kind::kFilterBlock: {
      auto inner = child_of(scope);
      inner->set(kBlockText, Value::string(capture(s.body, inner)));
      Value v = eval(*s.expr, *inner);
      if (s.kind == Stmt::Kind::kSetBlock) {
        assign(s.target, v, *scope);
      } else {
        emit(to_str(v));
      }
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      exec_macro(s, scope);
      return Flow::kNormal;
    case Stmt::Kind::kWith: {
      List values;
      for (const auto& [target, expr] : s.assignments) values.push_back(eval(*expr, *scope));
      auto inner = child_of(scope);
      for (size_t k = 0; k < values.size(); ++k) assign(s.assignments[k].first, values[k], *inner);
      return exec(s.body, inner);
    }
    case Stmt::Kind::kCallBlock: {
      // Transformers' AssistantTracker: the block's text, and its span counted from the length
      // of the top-level output at the time the block ends.
      const std::string text = capture(s.body, child_of(scope));
      const size_t start = root_->size();
      const size_t start_chars = code_points(*root_);
      rendered_->generation_bytes.emplace_back(start, start + text.size());
      rendered_->generation_chars.emplace_back(start_chars, start_chars + code_points(text));
      emit(text);
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  const Value iterable = eval(*s.expr, *scope);
  List items = iterate(iterable);
  if (s.condition) {
    List kept;
    for (auto& item : items) {
      step();
      auto probe = child_of(scope);
      assign(s.target, item, *probe);
      if (eval(*s.condition, *probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, child_of(scope));
  const auto n = static_cast<int64_t>(items.size());
  // loop.changed's last arguments, kept across the iterations (none before the first call).
  auto last_changed = std::make_shared<std::optional<Value>>();
  struct Forget {  // the arguments may hold the loop itself: the cycle is broken at the end
    ~Forget() { last->reset(); }
    std::shared_ptr<std::optional<Value>> last;
  } forget{last_changed};
  for (int64_t i = 0; i < n; ++i) {
    step();  // an empty body still takes time
    // Each iteration is a scope of its own: a set in the body is gone by the next one (jinja2).
    auto inner = child_of(scope);
    auto loop = std::make_shared<Value::Object>();
    loop->type = "LoopContext";
    loop->text = fmt::format("<LoopContext {}/{}>", i + 1, n);
    loop->attrs.reserve(13);
    auto put = [&](const char* key, Value v) { loop->attrs.emplace_back(key, std::move(v)); };
    put("index", Value::integer(i + 1));
    put("index0", Value::integer(i));
    put("revindex", Value::integer(n - i));
    put("revindex0", Value::integer(n - i - 1));
    put("first", Value::boolean(i == 0));
    put("last", Value::boolean(i == n - 1));
    put("length", Value::integer(n));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    put("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    put("cycle", Value::callable("cycle", [i](Interpreter& in, CallArgs& args) {
          if (args.args.empty()) in.fail("no items for cycling given");
          return args.args[static_cast<size_t>(i) % args.args.size()];
        }));
    put("changed", Value::callable("changed", [last_changed](Interpreter&, CallArgs& args) {
          Value values = Value::tuple(args.args);
          if (*last_changed && equal(**last_changed, values)) return Value::boolean(false);
          *last_changed = std::move(values);
          return Value::boolean(true);
        }));
    inner->set("loop", Value::object(std::move(loop)));
    assign(s.target, items[static_cast<size_t>(i)], *inner);
    if (exec(s.body, inner) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::exec_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  macro_scopes_.push_back(scope);
  const Stmt* macro = &s;
  std::weak_ptr<Scope> defined_in = scope;
  scope->set(s.text, Value::callable(s.text, [macro, defined_in](Interpreter& in, CallArgs& args) {
               auto outer = defined_in.lock();
               if (!outer)
                 in.fail(fmt::format("macro '{}' is called after its scope ended", macro->text));
               return in.call_macro(*macro, outer, args);
             }));
}

Value Interpreter::call_macro(const Stmt& s, const std::shared_ptr<Scope>& defined_in,
                              CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    fail(fmt::format("macro '{}' nests deeper than {} calls", s.text, limits_.max_call_depth),
         TemplateError::Kind::kLimit);
  }
  if (args.args.size() > s.params.size()) {
    fail(fmt::format("macro '{}' takes not more than {} argument(s)", s.text, s.params.size()));
  }
  auto inner = child_of(defined_in);
  const size_t first_default = s.params.size() - s.defaults.size();
  for (size_t p = 0; p < s.params.size(); ++p) {
    const std::string& param = s.params[p];
    const Value* given = p < args.args.size() ? &args.args[p] : nullptr;
    for (const auto& [key, value] : args.kwargs) {
      if (key != param) continue;
      if (given)
        fail(fmt::format("macro '{}' got multiple values for argument '{}'", s.text, param));
      given = &value;
    }
    if (given) {
      inner->set(param, *given);
    } else if (p >= first_default) {
      inner->set(param, eval(*s.defaults[p - first_default], *inner));
    } else {
      inner->set(param, Value::undefined(fmt::format("parameter '{}' was not provided", param)));
    }
  }
  for (const auto& [key, value] : args.kwargs) {
    if (std::find(s.params.begin(), s.params.end(), key) == s.params.end())
      fail(fmt::format("macro '{}' takes no keyword argument '{}'", s.text, key));
  }
  const int line = line_;
  ++call_depth_;
  std::string text;
  try {
    text = capture(s.body, inner);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  line_ = line;
  return Value::string(std::move(text));
}

void Interpreter::assign(const Target& t, const Value& v, Scope& scope) {
  if (t.is_tuple) {
    const List items = iterate(v);
    if (items.size() != t.items.size()) {
      fail(items.size() > t.items.size()
               ? fmt::format("too many values to unpack (expected {})", t.items.size())
               : fmt::format("not enough values to unpack (expected {}, got {})", t.items.size(),
                             items.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], scope);
    return;
  }
  if (t.attr.empty()) {
    scope.set(t.name, v);
    return;
  }
  const Value ns = lookup(t.name, scope);
  if (ns.kind() != Value::Kind::kNamespace) fail("cannot assign attribute on non-namespace object");
  if (!t.attr.empty() && t.attr[0] == '_') {
    fail(
        fmt::format("Chat templates cannot store underscore-prefixed attributes on a namespace, "
                    "but got '{}'. Please rename the attribute.",
                    t.attr));
  }
  ns.ns().set(t.attr, v);
}

}  // namespace trainer::tokenizers::jinja
