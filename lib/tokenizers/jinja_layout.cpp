// jinja2's filters that lay out text or group a sequence, as filters.py defines them: center,
// truncate, batch and slice (the last two a list of lists where jinja2 yields a generator:
// equal under `list`, a for loop or `length`); and the joiner() global.
#include <memory>

#include <fmt/format.h>

#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers::jinja {

namespace {

int64_t int_argument(Interpreter& in, const Value& v) {
  if (!v.is_int())
    in.fail(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
  return v.as_int();
}

}  // namespace

// do_center(value, width=80): str.center.
Value filter_center(Interpreter& in, const Value& v, CallArgs& a) {
  if (a.args.size() + a.kwargs.size() > 1)
    in.fail("do_center() takes from 1 to 2 positional arguments");
  CallArgs width;
  width.args.push_back(argument(a, 0, "width", Value::integer(80)));
  bool unsafe = false;
  const Value text = Value::string(soft_str(v));
  return find_method(text, "center", unsafe)(in, text, width, "center");
}

// do_truncate(s, length=255, killwords=False, end='...', leeway=None): leeway None is the
// environment's policy, 5.
Value filter_truncate(Interpreter& in, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return v;  // len(Undefined) is 0
  if (!v.is_string() && !v.is_sequence() && !v.is_dict())
    in.fail(fmt::format("object of type '{}' has no len()", v.type_name()));
  const int64_t length = int_argument(in, argument(a, 0, "length", Value::integer(255)));
  const bool killwords = argument(a, 1, "killwords", Value::boolean(false)).truthy();
  const std::string end = soft_str(argument(a, 2, "end", Value::string("...")));
  const Value leeway_value = argument(a, 3, "leeway", Value::none());
  const int64_t leeway = leeway_value.is_none() ? 5 : int_argument(in, leeway_value);
  const auto end_length = static_cast<int64_t>(code_points(end));
  if (length < end_length)
    in.fail(fmt::format("expected length >= {}, got {}", end_length, length));
  if (leeway < 0) in.fail(fmt::format("expected leeway >= 0, got {}", leeway));
  const auto n = static_cast<int64_t>(v.is_string() ? code_points(v.str())
                                      : v.is_dict() ? v.dict().entries.size()
                                                    : v.items().size());
  if (n <= length + leeway) return v;
  if (!v.is_string()) {  // s[:n] + end of a list or dict
    in.fail(v.is_dict() ? "unhashable type: 'slice'"
                        : fmt::format("can only concatenate {} (not \"str\") to {}", v.type_name(),
                                      v.type_name()));
  }
  const auto cps = decode(v.str());
  std::string kept = encode(cps, 0, static_cast<size_t>(length - end_length));
  if (!killwords) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return Value::string(kept + end);
}

// do_batch(value, linecount, fill_with=None): lists of linecount items, the last one filled.
Value filter_batch(Interpreter& in, const Value& v, CallArgs& a) {
  const Value count_value = argument(a, 0, "linecount");
  in.require_defined(count_value);
  const Value fill = argument(a, 1, "fill_with", Value::none());
  // Python's len(batch) == linecount: never true for what is not a number.
  const bool numeric = count_value.is_number();
  const double count = count_value.as_float();
  if (!fill.is_none() && !numeric) {
    in.fail(fmt::format("'<' not supported between instances of 'int' and '{}'",
                        count_value.type_name()));
  }
  List batches, current;
  for (const auto& item : in.iterate(v)) {
    in.step();
    if (numeric && static_cast<double>(current.size()) == count) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (!fill.is_none() && static_cast<double>(current.size()) < count) {
      const int64_t missing = int_argument(in, count_value) - static_cast<int64_t>(current.size());
      in.check_size(static_cast<size_t>(missing) * sizeof(Value),
                    fmt::format("a batch filled to {} items", count_value.as_int()));
      current.insert(current.end(), static_cast<size_t>(missing), fill);
    }
    batches.push_back(Value::list(std::move(current)));
  }
  return Value::list(std::move(batches));
}

// do_slice(value, slices, fill_with=None): `slices` lists, the first ones one item longer.
Value filter_slice(Interpreter& in, const Value& v, CallArgs& a) {
  const int64_t slices = int_argument(in, argument(a, 0, "slices"));
  const Value fill = argument(a, 1, "fill_with", Value::none());
  const List seq = in.iterate(v);
  if (slices == 0) in.fail("integer division or modulo by zero");
  if (slices < 0) return Value::list({});
  in.check_size(static_cast<size_t>(slices) * sizeof(Value),
                fmt::format("a list sliced into {} parts", slices));
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per_slice = length / slices, with_extra = length % slices;
  List out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    in.step();
    const int64_t start = offset + k * per_slice;
    if (k < with_extra) ++offset;
    const int64_t end = offset + (k + 1) * per_slice;
    List part(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && k >= with_extra) part.push_back(fill);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

// joiner(sep=', '): a callable that returns '' the first time, then sep.
Value make_joiner(Interpreter& in, CallArgs& a) {
  if (a.args.size() + a.kwargs.size() > 1) in.fail("joiner() takes at most 1 argument");
  const Value separator = argument(a, 0, "sep", Value::string(", "));
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [separator, used](Interpreter&, CallArgs&) {
    if (*used) return separator;
    *used = true;
    return Value::string("");
  });
}

}  // namespace trainer::tokenizers::jinja
