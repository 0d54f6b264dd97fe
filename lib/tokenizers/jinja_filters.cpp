// jinja2's filters as jinja2/filters.py defines them, with Transformers' own tojson (json.dumps
// with ensure_ascii=False); the format filter is jinja_globals.cpp's Python %-formatting.
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_int.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {
namespace {

using K = Value::Kind;

bool flag(const CallArgs& a, size_t index, const char* name, bool fallback = false) {
  const Value v = argument(a, index, name, Value::boolean(fallback));
  return v.truthy();
}

// jinja2's make_attrgetter: "a.b.0" looked up part by part (digits as indices).
Value attribute_of(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    const bool digits = !part.empty() && part.size() < 18 &&
                        part.find_first_not_of("0123456789") == std::string::npos;
    v = in.getitem(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    start = dot + 1;
  }
  return v;
}

// The key a sort, unique, min or max compares by: the attribute, lowered unless case_sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  Value v = attribute.is_string() ? attribute_of(in, item, attribute.str())
            : attribute.is_int()  ? in.getitem(item, attribute)
                                  : item;
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.str()));
  return v;
}

Value length(Interpreter& in, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case K::kString:
      return Value::integer(static_cast<int64_t>(code_points(v.str())));
    case K::kList:
    case K::kTuple:
      return Value::integer(static_cast<int64_t>(v.items().size()));
    case K::kDict:
      return Value::integer(static_cast<int64_t>(v.dict().entries.size()));
    case K::kUndefined:
      return Value::integer(0);
    default:
      in.fail(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

Value tojson(Interpreter& in, const Value& v, CallArgs& a) {
  // Transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  JsonOptions o;
  o.ensure_ascii = flag(a, 0, "ensure_ascii");
  const Value indent = argument(a, 1, "indent", Value::none());
  if (indent.is_string()) {
    o.indent_text = indent.str();
    o.indent_text_set = true;
  } else if (indent.is_int()) {
    o.indent = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 1 << 16));
    if (indent.as_int() < 0) o.indent_text_set = true;  // a negative indent: newlines, no spaces
  } else if (!indent.is_none()) {
    in.fail(fmt::format("tojson's indent must be an int or a str, not {}", indent.type_name()));
  }
  if (o.indent >= 0 || o.indent_text_set) o.item_separator = ",";
  const Value separators = argument(a, 2, "separators", Value::none());
  if (!separators.is_none()) {
    const List parts = in.iterate(separators);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      in.fail("tojson's separators must be a pair of strings");
    o.item_separator = parts[0].str();
    o.key_separator = parts[1].str();
  }
  o.sort_keys = flag(a, 3, "sort_keys");
  std::string out = to_json(v, o);
  in.check_size(out.size(), "tojson's text");
  return Value::string(std::move(out));
}

Value join(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string sep = soft_str(argument(a, 0, "d", Value::string("")));
  const Value attribute = argument(a, 1, "attribute", Value::none());
  std::string out;
  bool first = true;
  for (const auto& item : in.iterate(v)) {
    in.step();
    if (!first) out += sep;
    first = false;
    out += soft_str(attribute.is_none() ? item : attribute_of(in, item, soft_str(attribute)));
    in.check_size(out.size(), "the join filter's text");
  }
  return Value::string(std::move(out));
}

Value items(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) in.fail("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [key, value] : v.dict().entries) out.push_back(Value::tuple({key, value}));
  return Value::list(std::move(out));
}

Value dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.is_dict()) in.fail("dictsort needs a mapping");
  const bool case_sensitive = flag(a, 0, "case_sensitive");
  const std::string by = soft_str(argument(a, 1, "by", Value::string("key")));
  const bool reverse = flag(a, 2, "reverse");
  if (by != "key" && by != "value") in.fail("You can only sort by either \"key\" or \"value\"");
  const size_t pos = by == "key" ? 0 : 1;
  std::vector<std::pair<Value, Value>> entries = v.dict().entries;
  auto key = [&](const std::pair<Value, Value>& e) {
    const Value& k = pos == 0 ? e.first : e.second;
    return !case_sensitive && k.is_string() ? Value::string(py_lower(k.str())) : k;
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    in.step();
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  List out;
  for (auto& [k, value] : entries) out.push_back(Value::tuple({k, value}));
  return Value::list(std::move(out));
}

// select/reject (attr: false) and selectattr/rejectattr (attr: true).
Value select(Interpreter& in, const Value& v, CallArgs& a, bool attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (attr) attribute = soft_str(argument(a, next++, "attribute"));
  const Value test = next < a.args.size() ? a.args[next++] : Value::none();
  CallArgs test_args;
  test_args.args.assign(a.args.begin() + static_cast<long>(std::min(next, a.args.size())),
                        a.args.end());
  List out;
  if (!v.truthy()) return Value::list({});  // jinja2 iterates only a true value (0 gives [])
  for (const auto& item : in.iterate(v)) {
    in.step();
    const Value subject = attr ? attribute_of(in, item, attribute) : item;
    CallArgs args = test_args;
    const bool pass =
        test.is_none() ? subject.truthy() : in.apply_test(soft_str(test), subject, args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return Value::list({});  // as select
  if (a.args.empty()) {
    const std::string attribute = soft_str(argument(a, 99, "attribute"));
    const Value fallback = argument(a, 99, "default");
    for (const auto& item : in.iterate(v)) {
      in.step();
      Value got = attribute_of(in, item, attribute);
      out.push_back(got.is_undefined() && !fallback.is_undefined() ? fallback : got);
    }
    return Value::list(std::move(out));
  }
  const std::string filter = soft_str(a.args[0]);
  for (const auto& item : in.iterate(v)) {
    in.step();
    CallArgs args;
    args.args.assign(a.args.begin() + 1, a.args.end());
    args.kwargs = a.kwargs;
    out.push_back(in.apply_filter(filter, item, args));
  }
  return Value::list(std::move(out));
}

Value sorted(Interpreter& in, const Value& v, CallArgs& a) {
  const bool reverse = flag(a, 0, "reverse");
  const bool case_sensitive = flag(a, 1, "case_sensitive");
  const Value attribute = argument(a, 2, "attribute", Value::none());
  List out = in.iterate(v);
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    in.step();
    const Value kx = sort_key(in, x, attribute, case_sensitive);
    const Value ky = sort_key(in, y, attribute, case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return Value::list(std::move(out));
}

Value extreme(Interpreter& in, const Value& v, CallArgs& a, bool max) {
  const bool case_sensitive = flag(a, 0, "case_sensitive");
  const Value attribute = argument(a, 1, "attribute", Value::none());
  const List all = in.iterate(v);
  if (all.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    in.step();
    const Value k = sort_key(in, all[i], attribute, case_sensitive);
    const Value b = sort_key(in, all[best], attribute, case_sensitive);
    if (max ? less(b, k) : less(k, b)) best = i;
  }
  return all[best];
}

Value unique(Interpreter& in, const Value& v, CallArgs& a) {
  const bool case_sensitive = flag(a, 0, "case_sensitive");
  const Value attribute = argument(a, 1, "attribute", Value::none());
  // Python's set of the keys: numbers equal as ints where whole (1 == 1.0 == True).
  List out;
  std::unordered_set<std::string> seen;
  for (const auto& item : in.iterate(v)) {
    in.step();
    const Value k = sort_key(in, item, attribute, case_sensitive);
    std::string hashed;
    if (k.is_string()) {
      hashed = "s" + k.str();
    } else if (k.is_int()) {
      hashed = "n" + int_to_string(k, 16);
    } else if (k.kind() == Value::Kind::kFloat && std::isfinite(k.as_float()) &&
               k.as_float() == std::trunc(k.as_float())) {
      hashed = "n" + int_to_string(int_from_float(k.as_float()), 16);
    } else if (k.is_undefined()) {
      hashed = "u";
    } else if (k.is_sequence() || k.is_dict()) {
      in.fail(fmt::format("unhashable type: '{}'", k.type_name()));
    } else {
      hashed = k.type_name() + ":" + repr(k);
    }
    if (seen.insert(std::move(hashed)).second) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Value width = argument(a, 0, "width", Value::integer(4));
  const std::string pad =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 1 << 16)), ' ');
  const bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  // jinja2 adds "\n" to the value and splits its lines: a string's only.
  in.require_defined(v);
  if (v.kind() == Value::Kind::kTuple) in.fail("can only concatenate tuple (not \"str\") to tuple");
  if (v.kind() == Value::Kind::kList) in.fail("'list' object has no attribute 'splitlines'");
  if (!v.is_string())
    in.fail(fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", v.type_name()));
  const std::vector<std::string> lines = py_splitlines(v.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
    in.check_size(out.size(), "the indent filter's text");
  }
  return Value::string(first ? pad + out : out);
}

Value title(Interpreter&, const Value& v, CallArgs&) {
  // jinja2: words split at runs of [-\s({\[<], each word's first letter upper, the rest lower.
  const auto cps = decode(soft_str(v));
  std::string out;
  bool start = true;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool separator = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    const std::string ch = encode(cps, i, i + 1);
    out += separator ? ch : start ? py_upper(ch) : py_lower(ch);
    start = separator;
  }
  return Value::string(std::move(out));
}

Value escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value first_or_last(Interpreter& in, const Value& v, bool first) {
  const List all = in.iterate(v);
  if (all.empty())
    return Value::undefined(first ? "No first item, sequence was empty."
                                  : "No last item, sequence was empty.");
  return first ? all.front() : all.back();
}

struct Filter {
  const char* name;
  FilterFn fn;
};

const Filter kFilters[] = {
    {"length", length},
    {"count", length},
    {"tojson", tojson},
    {"join", join},
    {"items", items},
    {"dictsort", dictsort},
    {"map", map},
    {"select",
     [](Interpreter& in, const Value& v, CallArgs& a) { return select(in, v, a, false, true); }},
    {"reject",
     [](Interpreter& in, const Value& v, CallArgs& a) { return select(in, v, a, false, false); }},
    {"selectattr",
     [](Interpreter& in, const Value& v, CallArgs& a) { return select(in, v, a, true, true); }},
    {"rejectattr",
     [](Interpreter& in, const Value& v, CallArgs& a) { return select(in, v, a, true, false); }},
    {"sort", sorted},
    {"unique", unique},
    {"min", [](Interpreter& in, const Value& v, CallArgs& a) { return extreme(in, v, a, false); }},
    {"max", [](Interpreter& in, const Value& v, CallArgs& a) { return extreme(in, v, a, true); }},
    {"indent", indent},
    {"title", title},
    {"int", filter_int},
    {"float", filter_float},
    {"round", filter_round},
    {"center", filter_center},
    {"truncate", filter_truncate},
    {"batch", filter_batch},
    {"slice", filter_slice},
    {"format", python_format},
    {"e", escape},
    {"escape", escape},
    {"forceescape", escape},
    {"default",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value fallback = argument(a, 0, "default_value", Value::string(""));
       return v.is_undefined() || (flag(a, 1, "boolean") && !v.truthy()) ? fallback : v;
     }},
    {"d",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value fallback = argument(a, 0, "default_value", Value::string(""));
       return v.is_undefined() || (flag(a, 1, "boolean") && !v.truthy()) ? fallback : v;
     }},
    {"string", [](Interpreter&, const Value& v, CallArgs&) { return Value::string(soft_str(v)); }},
    {"safe", [](Interpreter&, const Value& v, CallArgs&) { return Value::string(soft_str(v)); }},
    {"list", [](Interpreter& in, const Value& v, CallArgs&) { return Value::list(in.iterate(v)); }},
    {"first",
     [](Interpreter& in, const Value& v, CallArgs&) { return first_or_last(in, v, true); }},
    {"last",
     [](Interpreter& in, const Value& v, CallArgs&) { return first_or_last(in, v, false); }},
    {"reverse",
     [](Interpreter& in, const Value& v, CallArgs&) {
       if (v.is_string()) {
         auto cps = decode(v.str());
         std::reverse(cps.begin(), cps.end());
         return Value::string(encode(cps, 0, cps.size()));
       }
       List all = in.iterate(v);
       std::reverse(all.begin(), all.end());
       return Value::list(std::move(all));
     }},
    {"upper",
     [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_upper(soft_str(v))); }},
    {"lower",
     [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_lower(soft_str(v))); }},
    {"capitalize", [](Interpreter&, const Value& v,
                      CallArgs&) { return Value::string(py_capitalize(soft_str(v))); }},
    {"trim",
     [](Interpreter&, const Value& v, CallArgs& a) {
       return Value::string(
           py_strip(soft_str(v), argument(a, 0, "chars", Value::none()), true, true));
     }},
    {"replace",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       const Value count = argument(a, 2, "count", Value::none());
       return Value::string(py_replace(in, soft_str(v), soft_str(argument(a, 0, "old")),
                                       soft_str(argument(a, 1, "new")),
                                       count.is_none() ? -1 : count.as_int()));
     }},
    {"abs",
     [](Interpreter& in, const Value& v, CallArgs&) {
       if (!v.is_number()) in.fail(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
       if (v.kind() == K::kFloat) return Value::number(std::fabs(v.as_float()));
       return int_abs(v);
     }},
    {"sum",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       const Value attribute = argument(a, 0, "attribute", Value::none());
       Value total = argument(a, 1, "start", Value::integer(0));
       for (const auto& item : in.iterate(v)) {
         in.step();
         const Value x = attribute.is_none() ? item : attribute_of(in, item, soft_str(attribute));
         in.require_defined(x);
         total = binary_operator(in, "+", total, x);
       }
       return total;
     }},
    {"wordcount",
     [](Interpreter&, const Value& v, CallArgs&) {
       int64_t n = 0;
       bool in_word = false;
       for (char32_t c : decode(soft_str(v))) {
         const bool word =
             c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !is_space(c));
         n += word && !in_word;
         in_word = word;
       }
       return Value::integer(n);
     }},
    {"attr",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       // jinja2's attr is Python's getattr: a dict's keys are not its attributes.
       const std::string name = soft_str(argument(a, 0, "name"));
       bool unsafe = false;
       if (v.is_dict() && !find_method(v, name, unsafe))
         return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
       return in.getattr(v, name);
     }},
};

}  // namespace

std::string missing_filter(std::string_view name) {
  static const char* const kUnbuilt[] = {"filesizeformat", "groupby",   "pprint",
                                         "random",         "striptags", "urlencode",
                                         "urlize",         "wordwrap",  "xmlattr"};
  for (const char* unbuilt : kUnbuilt) {
    if (name == unbuilt)
      return fmt::format("jinja2's filter '{}' is not supported in chat templates here", name);
  }
  return fmt::format("no filter named '{}'", name);
}

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

}  // namespace trainer::tokenizers::jinja
